package reflect

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/scenarios"
)

// ExtraLessons is the RunRequest.Extras key that sets a run's lessons
// mode.
const ExtraLessons = "lessons"

// Lesson modes (Options.Lessons).
const (
	LessonsMemory = "memory" // hand out the lessons kept for the scenario and agent (the default for a run)
	LessonsNone   = "none"   // only lessons drawn in the run itself (trials stay independent)
)

// Options configure the Extension. Zero values take the documented
// defaults.
type Options struct {
	// Lessons is LessonsMemory (default) or LessonsNone: the mode of a run
	// whose request does not name one (RunRequest.Extras[ExtraLessons]).
	Lessons string
	// Keep is how many of the newest lessons of a scenario and agent are
	// handed out (default 3, as Reflexion keeps its last three).
	Keep int
	// Logger receives diagnostics. Default: discard.
	Logger *slog.Logger
	// ColdIsolated starts every isolated run (replay, counterfactual,
	// verification) cold. Default false: a reflection's replays and
	// counterfactual are reserved and their sandboxes started ahead
	// (harness.StandbyIsolated), where the harness keeps standbys — as a
	// run with a fault schedule begins, for its first reflection, else as
	// the reflection opens —, the verification's once those have started.
	ColdIsolated bool
	// IsolatedAtFailure reserves them as a reflection opens only, never as
	// a run begins: for a harness whose runs with faults seldom fail, where
	// the sandboxes a run starts for its first reflection and never uses
	// cost the engine's CPU. Default false.
	IsolatedAtFailure bool
}

// Extension is the reflection loop and the gate as a harness.Extension.
// It gives each run of a scenario with a gate: or reflect: block its hooks;
// an isolated run (a replay, a verification) gets none of its own.
type Extension struct {
	opts Options

	mu   sync.Mutex
	runs map[string]*runState // live runs by id
}

var (
	_ harness.Extension = (*Extension)(nil)
	_ harness.Approvals = (*Extension)(nil)
)

// New returns the Extension.
func New(opts Options) (*Extension, error) {
	switch opts.Lessons {
	case "":
		opts.Lessons = LessonsMemory
	case LessonsMemory, LessonsNone:
	default:
		return nil, fmt.Errorf("lessons %q: want %s or %s", opts.Lessons, LessonsMemory, LessonsNone)
	}
	if opts.Keep <= 0 {
		opts.Keep = 3
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Extension{opts: opts, runs: map[string]*runState{}}, nil
}

// runState is what the Extension keeps of one live run: its gate and, when
// reflection is on, its reflector.
type runState struct {
	gate *gate
	rf   *reflector
}

// Hooks implements harness.Extension.
func (x *Extension) Hooks(ctx context.Context, h *harness.Harness, rec history.RunRecord, scen *scenarios.Scenario) (harness.Hooks, error) {
	if rec.Isolated != nil || (scen.Reflect == nil && len(scen.Gate) == 0) {
		return harness.Hooks{}, nil
	}
	st := &runState{}
	var hooks harness.Hooks
	if scen.Reflect != nil {
		rf, err := newReflector(ctx, x, h, rec, scen)
		if err != nil {
			return harness.Hooks{}, err
		}
		st.rf = rf
		hooks.Failures, hooks.Next, hooks.Lessons = rf, rf, rf
	}
	g, err := newGate(h, rec, scen, st.rf, x.opts.Logger)
	if err != nil {
		return harness.Hooks{}, err
	}
	st.gate = g
	if len(scen.Gate) > 0 || (st.rf != nil && len(scen.MCPServers()) > 0) {
		hooks.Gate = g // an MCP tool's default policy may be verify
	}
	x.mu.Lock()
	x.runs[rec.ID] = st
	x.mu.Unlock()
	context.AfterFunc(ctx, func() { x.forget(rec.ID, st) })
	return hooks, nil
}

// forget drops a run whose drive ended.
func (x *Extension) forget(id string, st *runState) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.runs[id] == st {
		delete(x.runs, id)
	}
}

func (x *Extension) live(id string) *runState {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.runs[id]
}

// Held implements harness.Approvals.
func (x *Extension) Held(ctx context.Context, h *harness.Harness, runID string) ([]harness.HeldEffect, error) {
	if st := x.live(runID); st != nil {
		return st.gate.heldNow(), nil
	}
	return heldOnRecord(h, runID)
}

// Decide implements harness.Approvals.
func (x *Extension) Decide(ctx context.Context, h *harness.Harness, runID string, d harness.Decision) error {
	if st := x.live(runID); st != nil {
		return st.gate.decide(d)
	}
	return decideOnRecord(ctx, h, runID, d)
}
