package reflect

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/writeup"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
)

// States of a run's reflection, as the gate sees them.
const (
	stateIdle       = iota // no reflection has opened
	stateReflecting        // one is deciding: guarded effects wait
	stateVerified          // the last one verified a lesson, and the asking attempt was handed it
	stateGaveUp            // the last one gave up: guarded effects are denied
	stateStale             // the last one verified a lesson the asking attempt was not handed
)

// gateView is the reflection's state for the gate.
type gateView struct {
	state  int
	id     string // the reflection
	lesson string // its lesson
	// remembered: the lesson is a remembered one, verified again here
	remembered bool
	why        string // a denial's reason
}

// reflector is the reflection loop of one run: the failure hook opens a
// reflection, a goroutine takes it through its stages (each journaled as
// it completes), the attempt policy waits for its decision before the next
// attempt, and the lesson source hands a verified lesson to the attempts
// after it.
type reflector struct {
	x    *Extension
	h    *harness.Harness
	ctx  context.Context // ends with the run's drive
	rec  history.RunRecord
	scen *scenarios.Scenario
	log  *slog.Logger

	mu      sync.Mutex
	refls   []history.ReflectionRecord
	open    int           // index of the open reflection in refls; -1: none
	changed chan struct{} // closed and replaced whenever a reflection decides
	memory  []history.LessonRecord
	handed  map[int]map[string]bool // attempt -> the ids of the lessons it was handed
	standby map[string]*standbys    // reflection -> the isolated runs it reserved, until its process takes them
	ahead   *standbys               // reserved as the run began, for its first reflection (reserveAhead)
}

var (
	_ harness.FailureHook   = (*reflector)(nil)
	_ harness.AttemptPolicy = (*reflector)(nil)
	_ harness.LessonSource  = (*reflector)(nil)
)

func newReflector(ctx context.Context, x *Extension, h *harness.Harness, rec history.RunRecord, scen *scenarios.Scenario) (*reflector, error) {
	rf := &reflector{x: x, h: h, ctx: ctx, rec: rec, scen: scen, log: x.opts.Logger.With("run", rec.ID), open: -1, changed: make(chan struct{}),
		handed: map[int]map[string]bool{}, standby: map[string]*standbys{}}
	refls, err := h.History().Reflections(rec.ID)
	if err != nil {
		return nil, err
	}
	rf.refls = refls
	attempts, err := h.History().Attempts(rec.ID)
	if err != nil {
		return nil, err
	}
	for _, a := range attempts {
		rf.hand(a.N, a.Lessons)
	}
	mode := x.opts.Lessons
	if m := rec.Extras[ExtraLessons]; m != "" {
		mode = m
	}
	if mode == LessonsMemory {
		if rf.memory, err = rememberedLessons(h, scen.Name, rec.Agent, x.opts.Keep); err != nil {
			return nil, err
		}
	}
	rf.reserveAhead()
	for i := range rf.refls {
		if !rf.refls[i].Decided() {
			// The harness died while this one was deciding: it goes on
			// from the last stage on record.
			rf.open = i
			go rf.process(i)
		}
	}
	return rf, nil
}

func (rf *reflector) save(r history.ReflectionRecord) error {
	return rf.h.Writer().Put(context.WithoutCancel(rf.ctx), history.ReflectionEntry(rf.rec.ID, r))
}

// Failed implements harness.FailureHook: a failure opens a reflection — or
// joins the open one, when it is of the same step.
func (rf *reflector) Failed(ctx context.Context, f harness.Failure) {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if rf.open >= 0 {
		r := &rf.refls[rf.open]
		if f.Step == r.Trigger.Step {
			r.Trigger.Joined = append(r.Trigger.Joined, f.Kind+": "+f.Detail)
			if err := rf.save(*r); err != nil {
				rf.log.Error("journal a failure joining reflection", "reflection", r.ID, "err", err)
			}
		}
		return
	}
	last := rf.lastDecided()
	if last != nil && last.Decision == history.DecisionGaveUp {
		return // the run is lost: the gate stays shut, nothing more to learn
	}
	if f.Kind == harness.FailureCrashLoop && last != nil && last.Trigger.Kind == harness.FailureCrashLoop &&
		last.Decision == history.DecisionVerify && (last.Consumed == 0 || last.Consumed > f.Attempt) {
		// The harness died between this crash loop's verified reflection
		// and the attempt it lets start: the decision stands.
		return
	}
	if last != nil && last.Decision == history.DecisionVerify && last.Lesson != nil {
		switch {
		case rf.holds(f.Attempt, last.Lesson.ID):
			if f.Kind == harness.FailureEffectRefused {
				// An attempt that holds a verified lesson meets the refusals
				// the lesson was about on its way: that is the lesson at
				// work. Its giving up, a crash loop or an invariant still
				// opens a reflection.
				return
			}
		case (f.Kind == harness.FailureEffectRefused || f.Kind == harness.FailureDone) && (last.Consumed == 0 || f.Attempt < last.Consumed):
			// The attempt was not handed the lesson the last reflection
			// verified (the gate denies its guarded effects, saying so):
			// the next attempt starts with it. A refusal this one meets,
			// or its giving up — on that denial, say — is no new failure
			// to learn from. (A crash loop, a violated invariant or a
			// spent budget still opens a reflection.)
			return
		}
	}
	n := len(rf.refls) + 1
	r := history.ReflectionRecord{ID: fmt.Sprintf("r%d", n), N: n, Stage: history.StageCaptured, OpenedAt: time.Now().UTC(),
		Trigger: history.Trigger{Kind: f.Kind, Attempt: f.Attempt, Step: f.Step, Detail: f.Detail, Effect: f.Effect, Invariant: f.Invariant, Virtual: f.Virtual}}
	if n <= rf.scen.Reflect.Max && f.Kind != harness.FailureBudget {
		// Its isolated runs' sandboxes: those reserved as the run began,
		// else started now, beside the capture.
		rf.take(&r)
	}
	if err := rf.capture(&r); err != nil {
		rf.log.Error("capture a failure", "err", err)
		r.Reason = "capture failed: " + err.Error()
	}
	switch {
	case n > rf.scen.Reflect.Max:
		rf.decide(&r, history.DecisionGaveUp, fmt.Sprintf("the reflection limit (%d per run, reflect.max) is spent", rf.scen.Reflect.Max))
	case f.Kind == harness.FailureBudget:
		// A spent budget ends the run (the protocol's 429 budget_exceeded):
		// what caused it is written up, but no attempt can act on a lesson.
		d := diagnose(r.Trigger, nil, nil, nil, "")
		r.Diagnosis = &d
		rf.decide(&r, history.DecisionGaveUp, "a spent LLM budget ends the run: no attempt can act on a lesson")
	}
	rf.refls = append(rf.refls, r)
	if err := rf.save(r); err != nil {
		rf.log.Error("journal reflection", "reflection", r.ID, "err", err)
	}
	rf.h.Progressf("reflection %s opened: %s in attempt %d: %s", r.ID, f.Kind, f.Attempt, f.Detail)
	if !r.Decided() {
		rf.open = len(rf.refls) - 1
		go rf.process(rf.open)
	} else {
		rf.signal()
	}
}

// capture records where the run stood at the failure: the last good
// checkpoint (none written on or after a poisoned one), the checkpoint the failing attempt started from, the events
// since, and the real world's state.
func (rf *reflector) capture(r *history.ReflectionRecord) error {
	rd := rf.h.History()
	cps, err := rd.Checkpoints(rf.rec.ID)
	if err != nil {
		return err
	}
	poisoned := false // a checkpoint since the last rollback is poisoned: none after it is good
	for _, c := range cps {
		if c.RollbackOf > 0 {
			poisoned = false
		}
		if poisoned = poisoned || c.Poisoned(); !poisoned {
			r.Checkpoint = c.Seq
		}
		if c.Attempt < r.Trigger.Attempt {
			r.StartCheckpoint = c.Seq
		}
	}
	events, err := rd.Events(rf.rec.ID)
	if err != nil {
		return err
	}
	for _, e := range events {
		if e.Attempt >= r.Trigger.Attempt && r.EventsFrom == 0 {
			r.EventsFrom = e.Seq
		}
		r.EventsTo = e.Seq
	}
	snap, seq, err := worldNow(rf.ctx, rf.h, rf.rec, rf.scen)
	if err != nil {
		return err
	}
	r.WorldSeq = seq
	r.WorldState, err = rf.h.Writer().PutBlob(context.WithoutCancel(rf.ctx), snap)
	return err
}

// decide closes a reflection (mu held).
func (rf *reflector) decide(r *history.ReflectionRecord, decision, reason string) {
	r.Stage, r.Decision, r.Reason, r.DecidedAt = history.StageDecided, decision, reason, time.Now().UTC()
}

// signal wakes whoever waits for a decision (mu held).
func (rf *reflector) signal() {
	close(rf.changed)
	rf.changed = make(chan struct{})
}

// lastDecided is the newest decided reflection (mu held).
func (rf *reflector) lastDecided() *history.ReflectionRecord {
	for i := len(rf.refls) - 1; i >= 0; i-- {
		if rf.refls[i].Decided() {
			return &rf.refls[i]
		}
	}
	return nil
}

// process takes reflection i through its remaining stages.
func (rf *reflector) process(i int) {
	rf.mu.Lock()
	r := rf.refls[i]
	rf.mu.Unlock()
	sb := rf.standbysOf(r.ID)
	defer sb.release(rf.ctx, rf)
	err := rf.stages(&r, sb)
	if rf.ctx.Err() != nil {
		return // the run's drive ended (Ctrl-C): a resume goes on from the last stage on record
	}
	if err != nil {
		rf.log.Error("reflection", "reflection", r.ID, "err", err)
		rf.decide(&r, history.DecisionGaveUp, "the reflection failed: "+err.Error())
	}
	rf.mu.Lock()
	defer rf.mu.Unlock()
	rf.refls[i] = r
	if err := rf.save(r); err != nil {
		rf.log.Error("journal reflection", "reflection", r.ID, "err", err)
	}
	rf.open = -1
	rf.signal()
	rf.h.Progressf("reflection %s %s: %s", r.ID, writeup.DecisionText(r), r.Reason)
}

// stages runs the stages not yet on record, saving each.
func (rf *reflector) stages(r *history.ReflectionRecord, sb *standbys) error {
	step := func(stage string, fn func() error) error {
		if r.Decided() || stageIndex(r.Stage) >= stageIndex(stage) {
			return nil
		}
		if err := fn(); err != nil {
			return err
		}
		if rf.ctx.Err() != nil {
			return rf.ctx.Err()
		}
		if !r.Decided() {
			r.Stage = stage
		}
		rf.mu.Lock()
		defer rf.mu.Unlock()
		return rf.save(*r)
	}
	remembered := rf.rememberedBy(r.Trigger.Attempt)
	if err := step(history.StageReplayed, func() error {
		why, err := rf.journalShows(r, len(remembered) > 0)
		if err != nil || why != "" {
			r.ReplaysSkipped = why
			rf.h.Progressf("reflection %s: no replays: %s", r.ID, why)
			if sb != nil {
				sb.release(rf.ctx, rf, sb.replays...)
			}
			return err
		}
		rf.h.Progressf("reflection %s: replaying attempt %d in isolation (%s)", r.ID, r.Trigger.Attempt, history.Count(rf.scen.Reflect.Replays, "replay"))
		return rf.replay(r, sb)
	}); err != nil {
		return err
	}
	if err := step(history.StageDiagnosed, func() error { return rf.diagnose(r) }); err != nil {
		return err
	}
	if err := step(history.StageLesson, func() error {
		if ok, err := rf.tryRemembered(r, remembered); err != nil || ok {
			return err
		}
		return rf.lesson(r)
	}); err != nil {
		return err
	}
	if err := step(history.StageVerified, func() error {
		if r.FromMemory {
			return nil // verified as it was tried
		}
		rf.h.Progressf("reflection %s: verifying lesson %s in isolation", r.ID, r.Lesson.ID)
		return rf.verify(r, sb.verification())
	}); err != nil {
		return err
	}
	if !r.Decided() {
		switch {
		case r.Verification != nil && r.Verification.Verdict == history.VerdictPass && r.FromMemory:
			rf.decide(r, history.DecisionVerify, fmt.Sprintf("remembered lesson %s verified in isolation against this run's world: %s", r.Lesson.ID, r.Verification.Reason))
		case r.Verification != nil && r.Verification.Verdict == history.VerdictPass:
			rf.decide(r, history.DecisionVerify, fmt.Sprintf("lesson %s verified in isolation: %s", r.Lesson.ID, r.Verification.Reason))
		default:
			rf.decide(r, history.DecisionGaveUp, "verification failed: "+r.Verification.Reason)
		}
	}
	return rf.remember(r)
}

var stageOrder = []string{history.StageCaptured, history.StageReplayed, history.StageDiagnosed, history.StageLesson, history.StageVerified, history.StageDecided}

func stageIndex(s string) int {
	for i, x := range stageOrder {
		if x == s {
			return i
		}
	}
	return -1
}

// Next implements harness.AttemptPolicy: no attempt starts while a
// reflection decides. After a verified lesson the next attempt starts with
// it (an agent that gave up is taken at its word no more: the run is
// reopened) — unless the real world changed since the verification copied
// it, which is then redone. After a reflection that gave up, an agent that
// stops ends the run with verdict fail.
func (rf *reflector) Next(ctx context.Context, end harness.AttemptEnd) (harness.AttemptDecision, error) {
	for {
		rf.mu.Lock()
		open, wait := rf.open, rf.changed
		rf.mu.Unlock()
		if open < 0 {
			break
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return harness.AttemptDecision{}, ctx.Err()
		}
	}
	rf.mu.Lock()
	last := rf.lastDecided()
	var r history.ReflectionRecord
	if last != nil {
		r = *last
	}
	rf.mu.Unlock()
	switch {
	case last == nil:
		return harness.AttemptDecision{}, nil
	case r.Decision == history.DecisionGaveUp:
		if end.Done != nil || end.CrashLoop {
			return harness.AttemptDecision{Stop: true, Verdict: history.VerdictFail, Reason: fmt.Sprintf("reflection %s gave up: %s", r.ID, r.Reason)}, nil
		}
		return harness.AttemptDecision{}, nil
	case end.CrashLoop && (r.Trigger.Kind != harness.FailureCrashLoop || (r.Consumed > 0 && r.Consumed <= end.Attempt)):
		return harness.AttemptDecision{}, nil // attempts that had the lesson crashed on: the loop ends the run
	case end.CrashLoop && r.Consumed > end.Attempt:
		return harness.AttemptDecision{Renew: true}, nil // decided and consumed before a harness crash
	case r.Consumed > 0:
		return harness.AttemptDecision{}, nil // an attempt already acts with the lesson
	case end.Done != nil && end.Done.Outcome == protocol.OutcomeSuccess:
		return harness.AttemptDecision{}, nil // the run is done: no attempt is left to hand the lesson to
	}
	rf.mu.Lock()
	r.Consumed = end.Attempt + 1
	rf.refls[r.N-1] = r
	err := rf.save(r)
	rf.mu.Unlock()
	if err != nil {
		return harness.AttemptDecision{}, err
	}
	return harness.AttemptDecision{Reopen: end.Done != nil && end.Done.Outcome == protocol.OutcomeFailure, Renew: end.CrashLoop}, nil
}

// fresh redoes the verification of reflection i if the real world changed
// since it copied it; it reports whether the lesson still stands.
func (rf *reflector) fresh(ctx context.Context, i int) (bool, error) {
	rf.mu.Lock()
	r := rf.refls[i]
	rf.mu.Unlock()
	snap, _, err := worldNow(ctx, rf.h, rf.rec, rf.scen)
	if err != nil {
		return false, err
	}
	if worldHash(snap) == r.Verification.WorldHash {
		return true, nil
	}
	rf.h.Progressf("reflection %s: the real world changed since its verification: verifying lesson %s again", r.ID, r.Lesson.ID)
	redone := r.Verification.Redone + 1
	v, err := Verify(ctx, rf.h, rf.rec.ID, *r.Lesson, r.ID+" verification, redone (the real world changed)")
	if err != nil {
		return false, err
	}
	v.Redone, v.Stale = redone, true
	r.Verification = &v
	if v.Verdict != history.VerdictPass {
		rf.decide(&r, history.DecisionGaveUp, "verification failed once redone on the changed world: "+v.Reason)
	}
	if err := rf.remember(&r); err != nil {
		return false, err
	}
	rf.mu.Lock()
	defer rf.mu.Unlock()
	rf.refls[i] = r
	err = rf.save(r)
	rf.signal()
	return r.Decision == history.DecisionVerify, err
}

// Lessons implements harness.LessonSource: the lessons in memory for the
// scenario and agent, and each lesson this run verified for the attempts
// after its verification. Asked as the attempt that is first handed a
// verified lesson begins — after any down window — it redoes the
// verification if the real world changed since it copied it (resources or
// API version; refused requests change nothing), as Terraform refuses a
// stale plan: a lesson that fails there is not handed out.
func (rf *reflector) Lessons(ctx context.Context, _ string, attempt int) ([]protocol.Lesson, error) {
	rf.mu.Lock()
	var check []int
	for i, r := range rf.refls {
		if r.Decision == history.DecisionVerify && r.Consumed == attempt && r.Verification != nil {
			check = append(check, i)
		}
	}
	rf.mu.Unlock()
	for _, i := range check {
		if _, err := rf.fresh(ctx, i); err != nil {
			return nil, err
		}
	}
	rf.mu.Lock()
	defer rf.mu.Unlock()
	var out []protocol.Lesson
	seen := map[string]bool{}
	add := func(l protocol.Lesson) {
		if !seen[l.ID] {
			seen[l.ID] = true
			out = append(out, l)
		}
	}
	for _, l := range rf.memory {
		add(l.Protocol())
	}
	for _, r := range rf.refls {
		if r.Decision == history.DecisionVerify && r.Consumed > 0 && attempt >= r.Consumed && r.Lesson != nil {
			add(r.Lesson.Protocol())
		}
	}
	rf.hand(attempt, out)
	return out, nil
}

// hand notes the lessons an attempt was handed (mu held, or before the
// reflector is shared).
func (rf *reflector) hand(attempt int, lessons []protocol.Lesson) {
	ids := map[string]bool{}
	for _, l := range lessons {
		ids[l.ID] = true
	}
	rf.handed[attempt] = ids
}

// holds reports whether attempt was handed the lesson id (mu held): from
// memory as it began, or after the reflection that verified it.
func (rf *reflector) holds(attempt int, id string) bool {
	return rf.handed[attempt][id]
}

// rememberedBy are the remembered lessons attempt was handed, newest first.
func (rf *reflector) rememberedBy(attempt int) []history.LessonRecord {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	var out []history.LessonRecord
	for _, m := range rf.memory {
		if rf.holds(attempt, m.ID) {
			out = append(out, m)
		}
	}
	return out
}

// gateState is what the gate does with a guarded effect of attempt, and
// what to wait on while a reflection decides.
func (rf *reflector) gateState(attempt int) (gateView, <-chan struct{}) {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if rf.open >= 0 {
		return gateView{state: stateReflecting, id: rf.refls[rf.open].ID}, rf.changed
	}
	last := rf.lastDecided()
	switch {
	case last == nil:
		return gateView{state: stateIdle}, nil
	case last.Decision == history.DecisionGaveUp:
		return gateView{state: stateGaveUp, id: last.ID, why: fmt.Sprintf("denied: reflection %s gave up: %s", last.ID, last.Reason)}, nil
	case last.Lesson != nil && rf.holds(attempt, last.Lesson.ID):
		return gateView{state: stateVerified, id: last.ID, lesson: last.Lesson.ID, remembered: last.FromMemory}, nil
	}
	return gateView{state: stateStale, id: last.ID, why: fmt.Sprintf("denied: reflection %s verified lesson %s, which attempt %d was not handed; the next attempt starts with it", last.ID, last.Lesson.ID, attempt)}, nil
}
