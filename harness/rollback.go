package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// EventRollback is the trajectory event of a rollback (rollback:
// consistent): its data is the rollback checkpoint's seq, the poisoned
// checkpoint it replaced, the consistent one whose state it carries, and
// the effects journaled since that one.
const EventRollback = "rollback"

// rollbackPlan is what a rollback replaces and what it goes back to.
type rollbackPlan struct {
	poisoned history.CheckpointRecord  // the first poisoned checkpoint since the last rollback
	to       *history.CheckpointRecord // the newest consistent checkpoint before it; nil: the start (step 0, no state)
}

// planRollback decides from the checkpoints alone (so a harness killed
// mid-way decides the same again) whether the next attempt must not resume
// from the last one: when a checkpoint since the last rollback is
// poisoned, everything written after it is built on it, and the newest
// checkpoint before it — consistent, or the last rollback itself — is
// where the next attempt starts.
func planRollback(cps []history.CheckpointRecord) (rollbackPlan, bool) {
	start := 0
	for i, c := range cps {
		if c.RollbackOf > 0 {
			start = i
		}
	}
	for i := start; i < len(cps); i++ {
		c := cps[i]
		if c.RollbackOf > 0 || !c.Poisoned() {
			continue
		}
		p := rollbackPlan{poisoned: c}
		if i > 0 {
			to := cps[i-1]
			p.to = &to
		}
		return p, true
	}
	return rollbackPlan{}, false
}

// rollbackLocked works out, as attempt n begins, the checkpoint a rollback
// writes for it (nil: none) and its event; mu is held. With rollback:
// consistent and a poisoned checkpoint since the last rollback, it is the
// next seq, carrying the state and step of the newest consistent
// checkpoint, written for attempt n with expect_seq the last seq — fenced
// and counted like any checkpoint of n's.
func (r *run) rollbackLocked(ctx context.Context, n int) (*history.CheckpointRecord, *history.EventRecord, error) {
	if r.scen.Rollback != scenarios.RollbackConsistent || r.cp.Seq == 0 {
		return nil, nil, nil
	}
	cps, err := r.h.history.Checkpoints(r.rec.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("read checkpoints for a rollback: %w", err)
	}
	plan, ok := planRollback(cps)
	if !ok {
		return nil, nil, nil
	}
	last := r.cp
	expect := last.Seq
	rb := history.CheckpointRecord{Seq: last.Seq + 1, Attempt: n, ExpectSeq: &expect, Virtual: r.clock.now,
		Intents: r.fx.intents, LLMCalls: r.llm.callCount(), Wall: time.Now().UTC(),
		RollbackOf: plan.poisoned.Seq, EffectOrder: r.fx.order, WorldSeq: last.WorldSeq}
	if seq, err := world.LedgerSeq(ctx, r.world); err == nil {
		rb.WorldSeq = seq
	}
	rb.State = json.RawMessage("null") // the start: no state
	rb.StateHash = hashHex(rb.State)
	var after int64
	if to := plan.to; to != nil {
		rb.Step, rb.State, rb.StateBlob, rb.StateHash, rb.RollbackFrom = to.Step, to.State, to.StateBlob, to.StateHash, to.Seq
		after = to.EffectOrder
	}
	var past []*history.EffectRecord
	for _, e := range r.fx.effects {
		if e.Order > after {
			past = append(past, e)
		}
	}
	sort.Slice(past, func(i, k int) bool { return past[i].Order < past[k].Order })
	for _, e := range past {
		rb.RolledPast = append(rb.RolledPast, e.ID)
	}
	from := "the start"
	if plan.to != nil {
		from = fmt.Sprintf("checkpoint %d (step %d)", plan.to.Seq, plan.to.Step)
	}
	ev := history.EventRecord{Seq: r.events + 1, Attempt: n, Type: EventRollback, Virtual: r.clock.now, Wall: rb.Wall,
		Message: fmt.Sprintf("checkpoint %d (step %d) is poisoned: %s; attempt %d resumes from %s, as checkpoint %d",
			plan.poisoned.Seq, plan.poisoned.Step, plan.poisoned.Consistency.Reason, n, from, rb.Seq)}
	data, err := json.Marshal(map[string]any{"seq": rb.Seq, "rollback_of": rb.RollbackOf, "rollback_from": rb.RollbackFrom, "rolled_past": rb.RolledPast})
	if err != nil {
		return nil, nil, err
	}
	ev.Data = data
	return &rb, &ev, nil
}
