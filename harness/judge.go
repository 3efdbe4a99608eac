package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/invariant"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/httpworld"
	"github.com/overnight-dev/overnight/scenarios/world/mcpworld"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// Verdicts (history.VerdictPass, ...).
const (
	VerdictPass    = history.VerdictPass
	VerdictFail    = history.VerdictFail
	VerdictUnknown = history.VerdictUnknown
)

// Invariant kinds (scenarios/invariant).
const (
	KindAlways     = string(invariant.Always)     // safety: must hold over the whole history
	KindSometimes  = string(invariant.Sometimes)  // coverage: must have happened at least once
	KindEventually = string(invariant.Eventually) // liveness: must hold by the end
)

// Invariant names (scenarios/invariant).
const (
	InvNoDuplicateEffects = invariant.NoDuplicateEffects
	InvGoalReached        = invariant.GoalReached
	InvNoLostProgress     = invariant.NoLostProgress
	InvEffectsResolved    = invariant.EffectsResolved
	InvFaultsFired        = invariant.FaultsFired
)

// The result types of a run: the JSON contract of `overnight run --output
// json` (see history.Result).
type (
	Result          = history.Result
	FaultResult     = history.FaultResult
	EffectCounts    = history.EffectCounts
	InvariantResult = history.InvariantResult
)

func ms(d time.Duration) int64 { return d.Milliseconds() }

// finish judges the run and records the result durably.
func (r *run) finish(ctx context.Context, end endState) (*Result, error) {
	r.mu.Lock()
	r.ended = true
	r.mu.Unlock()

	res, err := r.judge(ctx, end)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.rec.Status, r.rec.Verdict, r.rec.Reason = history.StatusFinished, res.Verdict, res.Reason
	r.rec.EndedAt = time.Now().UTC()
	res.WallMS = ms(r.rec.EndedAt.Sub(r.rec.StartedAt))
	r.rec.Result = res
	rec := r.rec
	r.mu.Unlock()
	if err := r.put(ctx, history.RunEntry(rec)); err != nil {
		return nil, fmt.Errorf("record result of run %s: %w", rec.ID, err)
	}
	r.progress("run %s: %s (%s)", rec.ID, res.Verdict, res.Reason)
	return res, nil
}

// judge evaluates the scenario's invariants — from the history and the
// world's own ledger, through the harness's invariant registry
// (Options.Invariants) — and the limits.
func (r *run) judge(ctx context.Context, end endState) (*Result, error) {
	r.mu.Lock()
	faults := r.faults.settle(ctx)
	rec, cp, clock, done := r.rec, r.cp, r.clock.now, r.done
	effects := make([]history.EffectRecord, 0, len(r.fx.effects))
	for _, e := range r.fx.effects {
		effects = append(effects, *e)
	}
	var totals *LLMTotals
	if r.llm != nil && r.llm.model != nil {
		t := r.llm.totals
		totals = &t
	}
	lessons := lessonsHanded(r.sup.list)
	r.unlock()
	sort.Slice(effects, func(i, k int) bool { return effects[i].Order < effects[k].Order })

	checkpoints, err := r.h.history.Checkpoints(rec.ID)
	if err != nil {
		return nil, err
	}
	res := &Result{
		RunID: rec.ID, Scenario: rec.Scenario, Agent: rec.Agent, Seed: rec.Seed, Attempts: rec.Attempts,
		StepsCompleted: cp.Step, Faults: faultResults(faults, rec.VirtualStart), Invariants: []InvariantResult{},
		VirtualMS: ms(clock.Sub(rec.VirtualStart)), Outcome: history.OutcomeNone, LLM: totals,
	}
	if done != nil {
		res.Outcome, res.Report = done.Outcome, done.Report
	}
	ev := &invariant.Evidence{World: r.world, Task: r.task, VirtualStart: rec.VirtualStart, Recovery: r.scen.Limits.Recovery, Label: history.EffectLabel}
	for _, e := range effects {
		res.Effects.Executed += e.Executions
		res.Effects.Deduplicated += e.Replays
		if e.InDoubt() {
			res.Effects.Unknown++
		}
		if e.Unkeyed {
			res.Effects.Unkeyed++
		}
		ev.Effects = append(ev.Effects, invariant.Effect{ID: e.ID, InDoubt: e.InDoubt()})
	}
	events, err := r.h.history.Events(rec.ID)
	if err != nil {
		return nil, err
	}
	res.MCP = mcpCounts(effects, events)
	for _, c := range checkpoints {
		ic := invariant.Checkpoint{Attempt: c.Attempt, Step: c.Step, Seq: c.Seq, RollbackOf: c.RollbackOf}
		if c.Poisoned() {
			ic.Poisoned = c.Consistency.Reason
		}
		ev.Checkpoints = append(ev.Checkpoints, ic)
	}
	for _, f := range faults {
		ev.Faults = append(ev.Faults, invariant.Fault{Spec: f.Spec, Applied: f.Applied, Error: f.Error, Met: f.Met, MetDetail: f.MetDetail, HealedVirtual: f.HealedVirtual})
	}
	if done != nil {
		ev.Done = &invariant.Done{Outcome: done.Outcome, Virtual: done.Virtual, Claims: done.Claims}
		if done.Consistency.Poisoned() {
			ev.Done.Poisoned = done.Consistency.Reason
		}
	}
	dups, err := r.world.Duplicates(ctx)
	if err != nil && !errors.Is(err, remote.ErrWorld) && !errors.Is(err, httpworld.ErrReplayDiverged) { // judged below: unknown
		return nil, err
	}
	for _, d := range dups {
		res.Effects.Duplicates += d.Count - 1
	}

	reg := r.h.opts.Invariants
	names := append([]string(nil), r.scen.Invariants...)
	for _, inv := range reg.All() {
		if inv.WhenFaults && len(faults) > 0 && !contains(names, inv.Name) {
			names = append(names, inv.Name)
		}
	}
	if res.ReplayDivergence, err = replayDivergence(ctx, r.world); err != nil {
		return nil, err
	}
	judged := false
	for _, name := range names {
		ir := InvariantResult{Name: name}
		if inv, ok := reg.Lookup(name); ok {
			ir.Kind = string(inv.Kind)
			judged = judged || inv.Kind == invariant.Always || inv.Kind == invariant.Eventually
		}
		j, err := reg.Judge(ctx, name, ev)
		switch {
		case errors.Is(err, remote.ErrWorld):
			// The world out of process cannot be asked: nothing is known.
			j, err = invariant.Judgement{Verdict: invariant.Unknown, Detail: fmt.Sprintf("not judged: the world did not answer (%v)", err)}, nil
		case errors.Is(err, httpworld.ErrReplayDiverged):
			// A replay past its recording acted on no world at all.
			j, err = invariant.Judgement{Verdict: invariant.Unknown, Detail: err.Error()}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("judge %s: %w", name, err)
		}
		ir.Verdict, ir.Detail = j.Verdict, j.Detail
		res.Invariants = append(res.Invariants, ir)
	}
	if !judged {
		res.Invariants = append(res.Invariants, InvariantResult{Name: "invariants-listed", Kind: KindAlways, Verdict: VerdictUnknown,
			Detail: "the scenario lists no safety or liveness invariant, so nothing about the run was judged"})
	}
	res.Verdict = VerdictPass
	for _, ir := range res.Invariants {
		if ir.Verdict == VerdictFail {
			res.Verdict = VerdictFail
		} else if ir.Verdict == VerdictUnknown && res.Verdict == VerdictPass {
			res.Verdict = VerdictUnknown
		}
	}
	switch {
	case end.verdict != "":
		res.Verdict, res.Reason = end.verdict, end.reason
	case end.limit:
		res.Verdict, res.Reason = VerdictFail, end.reason
	case res.Verdict == VerdictPass && len(res.Invariants) == 1:
		res.Reason = end.reason + "; its 1 invariant holds"
	case res.Verdict == VerdictPass:
		res.Reason = fmt.Sprintf("%s; all %d invariants hold", end.reason, len(res.Invariants))
	default:
		var bad []string
		for _, ir := range res.Invariants {
			if ir.Verdict != VerdictPass {
				bad = append(bad, ir.Name+" "+ir.Verdict)
			}
		}
		res.Reason = fmt.Sprintf("%s; %s", end.reason, strings.Join(bad, ", "))
	}
	res.Poisoned, res.Rollbacks = history.PoisonOf(checkpoints)
	res.HistoryDigest = digest(effects, checkpoints, faults, lessons, rec.VirtualStart, done)
	if err := r.reflections(res); err != nil {
		return nil, err
	}
	return res, nil
}

// replayDivergence is the first request of a replayed run its recording
// could not answer, across the run's HTTP APIs (the earliest in virtual
// time; nil: none diverged, or nothing is replayed).
func replayDivergence(ctx context.Context, w world.World) (*history.ReplayDivergence, error) {
	rt := world.RouterOf(w)
	if rt == nil {
		return nil, nil
	}
	var first *history.ReplayDivergence
	var at time.Time
	for _, route := range rt.Routes() {
		var d *httpworld.Divergence
		var err error
		switch w := route.World.(type) {
		case *httpworld.World:
			if w.API().Mode != scenarios.HTTPReplay {
				continue
			}
			d, err = w.Divergence(ctx)
		case *mcpworld.World:
			if w.Replaying() == "" {
				continue
			}
			d, err = w.Divergence(ctx)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("the replay divergence of %s: %w", route.World.Name(), err)
		}
		if d == nil {
			continue
		}
		if first == nil || d.At.Before(at) {
			first, at = &history.ReplayDivergence{API: d.API, Kind: d.Kind, Route: d.Route, Ordinal: d.Ordinal,
				Occurrence: d.Occurrence, Key: d.Key, Recording: d.Recording, Message: d.Message}, d.At
		}
	}
	return first, nil
}

// reflections adds what the reflection loop and the gate journaled (by an
// extension, through history) to the result.
func (r *run) reflections(res *Result) error {
	refls, err := r.h.history.Reflections(res.RunID)
	if err != nil {
		return err
	}
	for _, rf := range refls {
		out := history.Reflection{ID: rf.ID, Trigger: rf.Trigger.Kind + ": " + rf.Trigger.Detail, Checkpoint: rf.Checkpoint,
			ReplaysSkipped: rf.ReplaysSkipped, Divergence: rf.Divergence, Diagnosis: rf.Diagnosis, Counterfactual: rf.Counterfactual, Verification: rf.Verification,
			Decision: rf.Decision, Reason: rf.Reason, LLM: rf.LLM}
		out.Reproduced.Runs = len(rf.Replays)
		for _, rp := range rf.Replays {
			if rp.Reproduced {
				out.Reproduced.Failed++
			}
		}
		if rf.Lesson != nil {
			out.Lesson = &history.LessonRef{ID: rf.Lesson.ID, Text: rf.Lesson.Text, FromMemory: rf.FromMemory}
		}
		for _, t := range rf.Remembered {
			out.Remembered = append(out.Remembered, history.LessonTry{ID: t.Lesson.ID, Verdict: t.Verification.Verdict})
		}
		res.Reflections = append(res.Reflections, out)
	}
	decisions, err := r.h.history.GateDecisions(res.RunID)
	if err != nil {
		return err
	}
	if len(decisions) == 0 {
		return nil
	}
	g := &history.GateCounts{}
	held := map[string]bool{}
	for _, d := range decisions {
		switch d.Decision {
		case history.GateHeld:
			if !held[d.EffectID] {
				held[d.EffectID] = true
				g.Held++
			}
		case history.GateReleased:
			g.Released++
		case history.GateApproved:
			g.Approved++
			g.Released++
		case history.GateDenied:
			g.Denied++
		}
	}
	res.Gate = g
	return nil
}

func faultResults(faults []history.FaultRecord, start time.Time) []FaultResult {
	out := make([]FaultResult, 0, len(faults))
	for _, f := range faults {
		fr := FaultResult{Kind: f.Kind, Spec: f.Spec, At: f.At, Applied: f.Applied, Attempt: f.AppliedAttempt, Error: f.Error,
			Met: f.Met, MetDetail: f.MetDetail}
		if f.From != f.Spec {
			fr.From = f.From
		}
		if f.Applied {
			a := ms(f.AppliedVirtual.Sub(start))
			fr.AppliedVirtualMS = &a
			if !f.HealedVirtual.IsZero() {
				h := ms(f.HealedVirtual.Sub(start))
				fr.HealedVirtualMS = &h
			}
		}
		out = append(out, fr)
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// lessonsHanded lists the lessons handed to the run's attempts, each once,
// in the order they were first handed out, as "class: text" — what the
// agent was told, not the lesson's id, which names the run that drew it
// and so differs between two honest runs.
func lessonsHanded(atts []history.AttemptRecord) []string {
	var out []string
	seen := map[string]bool{}
	for _, a := range atts {
		for _, l := range a.Lessons {
			if !seen[l.ID] {
				seen[l.ID] = true
				out = append(out, l.Class+": "+l.Text)
			}
		}
	}
	return out
}

// digest is the run's history_digest: SHA-256 over the ordered effects
// (kind, args, status, result, and the virtual time of their last
// execution), checkpoints (step, state hash, virtual time), faults (kind,
// trigger, whether and when they fired, whether they were injected and
// met), the lessons the agent was handed (when there were any) and the
// outcome — nothing that differs between two honest runs (ids, tokens,
// containers, attempts a harness crash adds, wall times, the provider's
// name).
func digest(effects []history.EffectRecord, cps []history.CheckpointRecord, faults []history.FaultRecord, lessons []string, start time.Time, done *history.DoneRecord) string {
	h := sha256.New()
	line := func(fields ...string) {
		b, _ := json.Marshal(fields)
		h.Write(b)
		h.Write([]byte{'\n'})
	}
	for _, e := range effects {
		errCode := ""
		if e.Error != nil {
			errCode = e.Error.Code
		}
		line("effect", e.Kind, string(e.Args), e.Status, string(e.Result), errCode, fmt.Sprint(ms(e.Virtual.Sub(start))))
	}
	for _, c := range cps {
		line("checkpoint", fmt.Sprint(c.Step), c.StateHash, fmt.Sprint(ms(c.Virtual.Sub(start))))
	}
	for _, f := range faults {
		if f.Applied {
			line("fault", f.Kind, f.At, fmt.Sprint(ms(f.AppliedVirtual.Sub(start))), fmt.Sprint(f.Error == ""), fmt.Sprint(f.Met))
		} else {
			line("fault", f.Kind, f.At, "never")
		}
	}
	if len(lessons) > 0 {
		line(append([]string{"lessons"}, lessons...)...)
	}
	outcome := history.OutcomeNone
	if done != nil {
		outcome = done.Outcome
	}
	line("outcome", outcome)
	return hex.EncodeToString(h.Sum(nil))
}
