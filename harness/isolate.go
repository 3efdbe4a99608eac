package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// IsolatedRequest says what to re-run in isolation: the parent run's agent,
// started from one of its checkpoints, in a fresh sandbox, against a shadow
// world — the parent world's state at a point of its ledger, restored into
// a key space of its own — with a given fault schedule and LLM source. The
// isolated run is a run of its own (its record names the parent); nothing
// it does reaches the parent's world.
type IsolatedRequest struct {
	// Parent is the run re-run.
	Parent string
	// FromCheckpoint is the parent's checkpoint seq the agent starts from:
	// its checkpoints up to that one, and the effects the world had received
	// by then, are the isolated run's history before its first attempt
	// (0: from the beginning).
	FromCheckpoint int64
	// WorldSeq is the point of the parent world's ledger the shadow world
	// is rebuilt at; nil: where the checkpoint says the ledger stood when it
	// was written.
	WorldSeq *int64
	// Faults is the schedule (nil or empty: none).
	Faults []chaos.Spec
	// LLM is the model ("" : the parent's); "replay:" + Parent serves the
	// parent's recording, its attempt ReplayAttempt matched to the isolated
	// run's first.
	LLM           string
	ReplayAttempt int
	// Lessons are handed to every attempt.
	Lessons []protocol.Lesson
	// MaxAttempts bounds the isolated run (default 1: one attempt).
	MaxAttempts int
	// Timeout bounds its wall time (default: the parent's).
	Timeout time.Duration
	// Purpose says why it runs, for the record.
	Purpose string
	// Started, if set, is called with the isolated run's id once it is
	// durable.
	Started func(runID string)
	// Standby, if set, is a run reserved ahead (StandbyIsolated) of the
	// same parent: the isolated run takes its id, and its first attempt
	// takes over the sandbox started for it. The caller still releases it.
	Standby *IsolatedStandby
}

// ErrIsolated is returned when an isolated run is asked to be the parent
// of another: shadows are forked from real runs only.
var ErrIsolated = errors.New("an isolated run cannot be re-run in isolation")

// ErrNotResumable is returned by Resume for an isolated run its harness
// left unfinished: its writes were not synced, and the reflection that
// started it redoes it with a new one when its parent is resumed.
var ErrNotResumable = errors.New("an isolated run is not resumable")

// Isolated runs IsolatedRequest to its verdict, judged by the scenario's
// invariants over the shadow world.
func (h *Harness) Isolated(ctx context.Context, req IsolatedRequest) (*Result, error) {
	parent, err := h.runRecord(req.Parent)
	if err != nil {
		return nil, err
	}
	if parent.Isolated != nil {
		return nil, fmt.Errorf("%w: %s re-runs %s", ErrIsolated, parent.ID, parent.Isolated.Parent)
	}
	scen, err := h.history.Scenario(parent)
	if err != nil {
		return nil, err
	}
	var from history.CheckpointRecord
	var cps []history.CheckpointRecord
	if req.FromCheckpoint > 0 {
		all, err := h.history.Checkpoints(parent.ID)
		if err != nil {
			return nil, err
		}
		for _, c := range all {
			if c.Seq <= req.FromCheckpoint {
				cps = append(cps, c)
				from = c
			}
		}
		if from.Seq != req.FromCheckpoint {
			return nil, fmt.Errorf("run %s has no checkpoint %d (it has %d)", parent.ID, req.FromCheckpoint, len(all))
		}
	}
	worldSeq := from.WorldSeq
	if req.WorldSeq != nil {
		worldSeq = *req.WorldSeq
	}
	llmSpec := req.LLM
	if llmSpec == "" {
		llmSpec = parent.LLM
	}
	maxAttempts := req.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = 1
	}
	faults := req.Faults
	if faults == nil {
		faults = []chaos.Spec{}
	}
	for _, f := range faults {
		if k, _ := h.opts.Faults.Lookup(f.Kind); k.EndsHarness {
			return nil, fmt.Errorf("fault %s: an isolated run shares the harness's process, which this fault would end: leave it out", f.String())
		}
	}
	if s := req.Standby; s != nil {
		if s.h != h || s.parent != parent.ID {
			return nil, fmt.Errorf("isolated run of %s: the standby reserved for run %s belongs to another parent or harness", parent.ID, s.id)
		}
		if err := s.claim(); err != nil {
			return nil, err
		}
	}
	seed := parent.Seed
	rr := RunRequest{standby: req.Standby,
		Scenario: scen, Agent: parent.Agent, Seed: &seed, Faults: faults, LLM: llmSpec,
		MaxAttempts: maxAttempts, Timeout: req.Timeout, Started: req.Started, World: parent.WorldURL,
		isolation: &history.Isolation{Parent: parent.ID, FromCheckpoint: req.FromCheckpoint, WorldSeq: worldSeq,
			Purpose: req.Purpose, Lessons: req.Lessons, ReplayAttempt: req.ReplayAttempt},
	}
	if rr.Timeout <= 0 {
		rr.Timeout = time.Duration(parent.Timeout)
	}
	rr.prepare = func(ctx context.Context, id string) ([]history.Entry, error) {
		entries, forked, err := h.fork(ctx, parent, id, from, cps, worldSeq)
		rr.isolation.ForkedOrder = forked
		return entries, err
	}
	return h.start(ctx, rr)
}

// fork makes run id stand where parent stood at checkpoint from: its
// shadow world rebuilt at worldSeq in id's own key space, and the history
// before its first attempt — the parent's checkpoints up to from, the
// effects the world had received by then (with their results, so that a
// repeated key is answered from the journal as it would be in the parent),
// and the virtual clock of the checkpoint.
func (h *Harness) fork(ctx context.Context, parent history.RunRecord, id string, from history.CheckpointRecord, cps []history.CheckpointRecord, worldSeq int64) ([]history.Entry, int64, error) {
	scen, err := h.history.Scenario(parent)
	if err != nil {
		return nil, 0, err
	}
	real, err := h.history.World(ctx, parent, scen)
	if err != nil {
		return nil, 0, err
	}
	var state world.State
	if scen.HasAPIs() {
		if state, err = h.forkHTTP(ctx, parent, id, scen, real, worldSeq); err != nil {
			return nil, 0, err
		}
	} else if scen.World.Remote() {
		if state, err = h.forkRemote(ctx, parent, id, scen, real, worldSeq); err != nil {
			return nil, 0, err
		}
	} else {
		state, err = h.opts.Worlds.StateAt(ctx, scen.World.Name, scen.World.Options, real, worldSeq)
		if err != nil {
			return nil, 0, fmt.Errorf("the state of run %s's world at ledger entry %d: %w", parent.ID, worldSeq, err)
		}
		store, prefix := h.w.Scratch().WorldStore(id) // a shadow is rebuilt, never recovered
		shadow, err := h.opts.Worlds.Open(ctx, scen.World.Name, store, prefix, scen.World.Options)
		if err != nil {
			return nil, 0, err
		}
		if err := world.Restore(ctx, shadow, state); err != nil {
			return nil, 0, fmt.Errorf("restore the shadow world of run %s: %w", id, err)
		}
	}
	var entries []history.Entry
	for _, c := range cps {
		// A large state stays the same blob: blobs are content-addressed.
		entries = append(entries, history.CheckpointEntry(id, c))
	}
	// The effects the world had received by the fork, answered as the world
	// last answered them then.
	type seen struct {
		n   int
		out world.Outcome
	}
	executed := map[string]*seen{}
	for _, e := range state.Ledger {
		if e.IsEvent() {
			continue
		}
		if executed[e.Key] == nil {
			executed[e.Key] = &seen{}
		}
		executed[e.Key].n++
		executed[e.Key].out = e.Outcome
	}
	effects, err := h.history.Effects(parent.ID)
	if err != nil {
		return nil, 0, err
	}
	var forked int64
	for _, e := range effects {
		x := executed[e.ID]
		if x == nil {
			continue // the world had not received it at the fork: it has not happened
		}
		e.Intents, e.Executions, e.Replays, e.Reconciled = x.n, x.n, 0, false
		e.Status, e.Result, e.Error = x.out.Status, x.out.Result, x.out.Error
		entries = append(entries, history.EffectEntry(id, &e))
		forked = max(forked, e.Order)
	}
	if !from.Virtual.IsZero() {
		entries = append(entries, history.ClockEntry(id, history.ClockRecord{Now: from.Virtual}))
	}
	return entries, forked, nil
}
