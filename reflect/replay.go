package reflect

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// worldNow is the real world's snapshot and ledger seq now, read from the
// journal (the live run writes it; this reads a fresh view of what is
// durable).
func worldNow(ctx context.Context, h *harness.Harness, rec history.RunRecord, scen *scenarios.Scenario) ([]byte, int64, error) {
	w, err := h.History().World(ctx, rec, scen)
	if err != nil {
		return nil, 0, err
	}
	snap, err := w.Snapshot(ctx)
	if err != nil {
		return nil, 0, err
	}
	seq, err := world.LedgerSeq(ctx, w)
	return snap, seq, err
}

// worldHash fingerprints a world snapshot (its resources and API version).
func worldHash(snap []byte) string {
	s := sha256.Sum256(snap)
	return hex.EncodeToString(s[:])
}

// replaySpec is how the failing attempt is re-run in isolation.
type replaySpec struct {
	from      int64        // the checkpoint the failing attempt started from
	worldSeq  int64        // where the real world's ledger stood then
	faults    []chaos.Spec // the run's schedule still to come when the attempt started
	llm       string       // the model: the attempt's recording, when the run has one
	replayOf  int          // the attempt the recording is matched to
	lessons   []protocol.Lesson
	failedAt  int // the failing attempt
	triggerFx int // the order of the refused effect that triggered it (0: none)
}

// failing works out how to re-run the failing attempt of r.
func (rf *reflector) failing(r *history.ReflectionRecord) (replaySpec, error) {
	rd := rf.h.History()
	run, err := rd.Load(rf.ctx, rf.rec.ID)
	if err != nil {
		return replaySpec{}, err
	}
	sp := replaySpec{from: r.StartCheckpoint, failedAt: r.Trigger.Attempt}
	if a := r.Trigger.Attempt; a >= 1 && a <= len(run.Attempts) {
		// The world as the attempt found it: what happened between its
		// checkpoint and its start (a fault at the end of the attempt
		// before) included.
		sp.worldSeq = run.Attempts[a-1].WorldSeq
	}
	for _, f := range run.Faults {
		// Faults that fired before the attempt started are in the world's
		// state already; the rest are re-applied at the same points.
		if f.Applied && f.AppliedAttempt < r.Trigger.Attempt {
			continue
		}
		s, err := chaos.ParseSpec(f.Spec)
		if err != nil {
			return replaySpec{}, err
		}
		if k, _ := rf.h.Faults().Lookup(s.Kind); k.EndsHarness {
			// A re-run shares the harness's process with the real run: its
			// crash would be theirs. The crash's point is where the run was
			// resumed, which the replay starts from anyway.
			continue
		}
		sp.faults = append(sp.faults, s)
	}
	if rf.rec.LLM != "" || rf.scen.LLM != nil {
		sp.llm, sp.replayOf = "replay:"+rf.rec.ID, r.Trigger.Attempt
	}
	if r.Trigger.Attempt >= 1 && r.Trigger.Attempt <= len(run.Attempts) {
		sp.lessons = run.Attempts[r.Trigger.Attempt-1].Lessons
	}
	if r.Trigger.Effect != nil {
		sp.triggerFx = int(r.Trigger.Effect.Order)
	}
	return sp, nil
}

// isolated runs one isolated re-run and judges whether the failure came
// back in it.
func (rf *reflector) isolated(r *history.ReflectionRecord, sp replaySpec, faults []chaos.Spec, llmSpec, purpose string, replayOf int, sb *harness.IsolatedStandby) (history.ReplayRecord, *history.Run, error) {
	started := time.Now()
	var id string
	res, err := rf.h.Isolated(rf.ctx, harness.IsolatedRequest{
		Parent: rf.rec.ID, FromCheckpoint: sp.from, WorldSeq: &sp.worldSeq, Faults: faults, LLM: llmSpec, ReplayAttempt: replayOf,
		Lessons: sp.lessons, Purpose: purpose, Started: func(runID string) { id = runID }, Standby: sb,
	})
	if err != nil {
		return history.ReplayRecord{RunID: id}, nil, fmt.Errorf("%s: %w", purpose, err)
	}
	shadow, err := rf.h.History().Load(rf.ctx, res.RunID)
	if err != nil {
		return history.ReplayRecord{RunID: res.RunID}, nil, err
	}
	rec := history.ReplayRecord{RunID: res.RunID, Verdict: res.Verdict, WallMS: time.Since(started).Milliseconds()}
	rec.Reproduced, rec.Detail = reproduced(r.Trigger, res, shadow)
	return rec, shadow, nil
}

// replay re-runs the failing attempt in isolation reflect.replays times, in
// parallel, and names the first request that differed from the recording.
func (rf *reflector) replay(r *history.ReflectionRecord, sb *standbys) error {
	sp, err := rf.failing(r)
	if err != nil {
		return err
	}
	parent, err := rf.h.History().Load(rf.ctx, rf.rec.ID)
	if err != nil {
		return err
	}
	// The replays and the counterfactual (the same re-run without the
	// run's faults, for the diagnosis) run side by side.
	n := rf.scen.Reflect.Replays
	out := make([]history.ReplayRecord, n+1)
	shadows := make([]*history.Run, n+1)
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			out[i], shadows[i], errs[i] = rf.isolated(r, sp, sp.faults, sp.llm, fmt.Sprintf("%s replay %d/%d", r.ID, i+1, n), sp.replayOf, sb.replay(i))
		})
	}
	wg.Go(func() {
		out[n], shadows[n], errs[n] = rf.isolated(r, sp, nil, liveSpec(rf.rec), r.ID+" counterfactual (no faults)", 0, sb.replay(n))
	})
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	cf := out[n]
	r.Counterfactual = &cf
	for i := range n {
		out[i].Divergence = divergence(parent, sp, shadows[i])
		if r.Divergence == "" && out[i].Divergence != "" {
			r.Divergence = fmt.Sprintf("replay %d: %s", i+1, out[i].Divergence)
		}
	}
	r.Replays = out[:n]
	return nil
}

// reproduced says whether the trigger's failure came back in a re-run.
func reproduced(t history.Trigger, res *harness.Result, shadow *history.Run) (bool, string) {
	switch t.Kind {
	case harness.FailureEffectRefused:
		for _, e := range shadow.Effects {
			if e.Attempt >= 1 && t.Effect != nil && e.Kind == t.Effect.Kind && e.Status == protocol.StatusFailed && e.Error != nil && t.Effect.Error != nil && e.Error.Code == t.Effect.Error.Code {
				return true, fmt.Sprintf("%s refused again (%s)", e.Kind, e.Error.Code)
			}
		}
		return false, "no " + effectKind(t) + " was refused the same way"
	case harness.FailureDone:
		if shadow.Done != nil && shadow.Done.Outcome == protocol.OutcomeFailure {
			return true, "the agent reported failure again: " + shadow.Done.Summary
		}
		return false, "the agent did not report failure (" + res.Reason + ")"
	case harness.FailurePoisoned:
		for _, c := range shadow.Checkpoints {
			if c.Poisoned() {
				return true, fmt.Sprintf("checkpoint %d (step %d) is poisoned again: %s", c.Seq, c.Step, c.Consistency.Reason)
			}
		}
		if shadow.Done != nil && shadow.Done.Consistency.Poisoned() {
			return true, "the claims sent with done are poisoned again: " + shadow.Done.Consistency.Reason
		}
		return false, "no checkpoint nor done the world contradicts (" + res.Reason + ")"
	case harness.FailureCrashLoop:
		if shadow.Done == nil && len(shadow.Attempts) > 0 {
			a := shadow.Attempts[len(shadow.Attempts)-1]
			if a.ExitCode != nil && *a.ExitCode != 0 {
				return true, fmt.Sprintf("the attempt ended again without reporting done (%s, exit code %d)", a.End, *a.ExitCode)
			}
		}
		return false, "the attempt did not crash (" + res.Reason + ")"
	case harness.FailureInvariant:
		for _, ir := range res.Invariants {
			if ir.Name == t.Invariant && ir.Verdict == history.VerdictFail {
				return true, t.Invariant + " failed again: " + ir.Detail
			}
		}
		return false, t.Invariant + " held"
	}
	return res.Verdict == history.VerdictFail, res.Reason
}

func effectKind(t history.Trigger) string {
	if t.Effect == nil {
		return "effect"
	}
	return t.Effect.Kind
}

// divergence names the first request of a re-run that differed from the
// recording: an LLM call the recording could not answer, or an effect of
// the failing attempt — up to the one that triggered the reflection — sent
// otherwise or answered otherwise.
func divergence(parent *history.Run, sp replaySpec, shadow *history.Run) string {
	if shadow == nil {
		return ""
	}
	if strings.Contains(shadow.Record.Reason, "diverged") {
		return shadow.Record.Reason
	}
	var want, got []history.EffectRecord
	for _, e := range parent.Effects {
		if e.Attempt == sp.failedAt && (sp.triggerFx == 0 || int(e.Order) <= sp.triggerFx) {
			want = append(want, e)
		}
	}
	var forked int64
	if iso := shadow.Record.Isolated; iso != nil {
		forked = iso.ForkedOrder
	}
	for _, e := range shadow.Effects {
		if e.Order > forked {
			got = append(got, e) // the re-run's own, not those copied at the fork
		}
	}
	for i := range want {
		if i >= len(got) {
			return fmt.Sprintf("effect %d of attempt %d (%s) was never sent", i+1, sp.failedAt, describeEffect(want[i]))
		}
		if effectDiff(want[i], got[i]) {
			return fmt.Sprintf("effect %d of attempt %d: recorded %s, re-run %s", i+1, sp.failedAt, describeEffect(want[i]), describeEffect(got[i]))
		}
	}
	return ""
}

// effectDiff reports whether a re-run's effect differs from the recorded
// one: in what was asked, or in how the world answered.
func effectDiff(a, b history.EffectRecord) bool {
	return a.Kind != b.Kind || !bytes.Equal(a.Args, b.Args) || a.Status != b.Status || code(a) != code(b)
}

func code(e history.EffectRecord) string {
	if e.Error == nil {
		return ""
	}
	return e.Error.Code
}

func describeEffect(e history.EffectRecord) string {
	s := fmt.Sprintf("%s %s -> %s", e.Kind, e.Args, e.Status)
	if c := code(e); c != "" {
		s += " (" + c + ")"
	}
	return s
}
