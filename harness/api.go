package harness

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/builtin"
)

// RunRequest says what to run.
type RunRequest struct {
	Scenario *scenarios.Scenario
	// Agent names a variant from the scenario's agents ("" = the default).
	Agent string
	// Seed drives every random choice. Nil: the scenario's seed, else 1.
	Seed *int64
	// Faults replaces the scenario's fault list when non-nil. Faults,
	// RandomFaults and ReplayFaults each give the whole schedule: a request
	// that sets more than one is refused (ErrFaultSources).
	Faults []chaos.Spec
	// Timeout overrides the scenario's wall-clock limit when > 0.
	Timeout time.Duration
	// MaxAttempts overrides the scenario's limit when > 0.
	MaxAttempts int
	// RandomFaults > 0 draws that many faults from the seed instead
	// (--chaos random): kinds that can be drawn, with triggers the
	// scenario's reach: block says a run can reach; never harness-crash.
	RandomFaults int
	// RandomKinds, when not empty, are the only fault kinds RandomFaults
	// draws (--chaos-kinds), overriding the scenario's reach.kinds; empty:
	// the scenario's reach.kinds, else every kind random draws. Each must
	// be one random draws at a trigger the scenario's reach: allows (see
	// chaos.Registry.CheckDrawable). Only with RandomFaults.
	RandomKinds []string
	// ReplayFaults names an earlier run whose fault log is re-applied
	// exactly instead of drawing again (--replay-faults).
	ReplayFaults string
	// LLM picks the model behind the gateway's LLM endpoint: "scripted"
	// (the deterministic test double, driven by the scenario's rules),
	// "openai:MODEL", "anthropic:MODEL", "ollama:MODEL", or "replay:RUN"
	// (serve that run's recorded exchanges). Default: the scenario's
	// llm.model, else none.
	LLM string
	// World, when set, is the base URL of a world served over the world
	// protocol that the run acts on instead of the scenario's (--world):
	// the scenario's world name, if it has one, is what that world must
	// describe itself as. Journaled with the run, so a resume finds it.
	World string
	// HTTPReplay, when set, names an earlier run whose exchanges with the
	// scenario's HTTP APIs answer this run's requests: every API replays
	// (--http-replay), nothing is sent upstream. Journaled with the run.
	HTTPReplay string
	// MCPReplay, when set, names an earlier run whose recording of the
	// scenario's MCP servers (tools/list and every answer) answers this
	// run's tool calls (--mcp-replay): no server is started or reached.
	// Journaled with the run.
	MCPReplay string
	// Started, if set, is called with the run id once the run is durable,
	// before any container starts.
	Started func(runID string)
	// Extras are options for the run's extension (Options.Extension), such
	// as the reflection loop's "lessons" mode; journaled with the run.
	Extras map[string]string

	// Set by Isolated for an isolated run.
	isolation *history.Isolation
	prepare   func(ctx context.Context, id string) ([]history.Entry, error)
	standby   *IsolatedStandby // the run reserved ahead it becomes (nil: a new one)
}

// LoadScenario finds a scenario by what a user would type: the name of a
// built-in scenario (deploy, week, ...) or the path of a scenario file.
// Errors name file:line:column. A scenario made of Go values is
// scenarios.FromValue.
func LoadScenario(nameOrPath string) (*scenarios.Scenario, error) {
	return scenarios.Resolve(nameOrPath, builtin.Lookup, builtin.Names())
}

// Check validates a scenario against what this harness offers: its world
// exists and can judge the scenario's task, its built-in agents are ones
// the init binary serves, and its invariants are registered
// (Options.Invariants). Errors name file:line:column and the shape
// expected. Run checks every scenario it is given.
func (h *Harness) Check(scen *scenarios.Scenario) error {
	return CheckScenario(scen, CheckOptions{Worlds: h.opts.Worlds, BuiltinAgents: h.opts.BuiltinAgents, Invariants: h.opts.Invariants, Backend: h.opts.Sandbox})
}

// dotted turns a JSON pointer (/service/name) into a dotted path (.service.name).
func dotted(pointer string) string {
	out := []byte{}
	for i := 0; i < len(pointer); i++ {
		if pointer[i] == '/' {
			out = append(out, '.')
		} else {
			out = append(out, pointer[i])
		}
	}
	return string(out)
}

// Run starts a run and drives it to its verdict.
func (h *Harness) Run(ctx context.Context, req RunRequest) (*Result, error) {
	if req.Scenario == nil {
		return nil, errors.New("run: no scenario")
	}
	return h.start(ctx, req)
}

// start checks a request, prepares its sandbox image, records the run and
// drives it.
func (h *Harness) start(ctx context.Context, req RunRequest) (*Result, error) {
	if err := h.Check(req.Scenario); err != nil {
		return nil, err
	}
	if req.World != "" {
		if err := checkWorldURL(req.World); err != nil {
			return nil, err
		}
		s := *req.Scenario
		s.World = scenarios.World{Name: s.World.Name, URL: req.World, Options: s.World.Options}
		req.Scenario = &s
	}
	req.Scenario = req.Scenario.ReplayingHTTP(req.HTTPReplay).ReplayingMCP(req.MCPReplay)
	if err := h.checkHTTP(req.Scenario); err != nil {
		return nil, err
	}
	agentSpec, err := req.Scenario.SelectAgent(req.Agent)
	if err != nil {
		return nil, err
	}
	if _, _, err := h.schedule(req, seedOf(req.Scenario, req.Seed)); err != nil {
		return nil, err
	}
	if _, err := h.model(req.Scenario, req.LLM); err != nil {
		return nil, err
	}
	// The image comes first, so that an unreachable engine or a bad agent
	// binary fails before any run is recorded.
	plan, err := h.plan(ctx, agentSpec)
	if err != nil {
		return nil, err
	}
	id, err := h.create(ctx, req)
	if err != nil {
		return nil, err
	}
	return h.drive(ctx, id, plan)
}

// Resume continues a run from the journal alone: after Ctrl-C, or after
// the harness itself died. A finished run returns its recorded result.
func (h *Harness) Resume(ctx context.Context, runID string) (*Result, error) {
	rec, err := h.runRecord(runID)
	if err != nil {
		return nil, err
	}
	if rec.Status == StatusFinished && rec.Result != nil {
		return rec.Result, nil
	}
	if iso := rec.Isolated; iso != nil {
		return nil, fmt.Errorf("run %s (%s, of run %s): %w; resume run %s", runID, iso.Purpose, iso.Parent, ErrNotResumable, iso.Parent)
	}
	_, agentSpec, err := h.agentOf(rec)
	if err != nil {
		return nil, err
	}
	plan, err := h.plan(ctx, agentSpec)
	if err != nil {
		return nil, err
	}
	h.progress("resuming run %s after attempt %d", runID, rec.Attempts)
	return h.drive(ctx, runID, plan)
}

// agentOf is run rec's scenario and the agent it runs.
func (h *Harness) agentOf(rec RunRecord) (*scenarios.Scenario, scenarios.AgentSpec, error) {
	scen, err := h.history.Scenario(rec)
	if err != nil {
		return nil, scenarios.AgentSpec{}, err
	}
	agentSpec, err := scen.SelectAgent(rec.Agent)
	return scen, agentSpec, err
}

// Lookup returns the summary of one run, or ErrRunNotFound.
func (h *Harness) Lookup(runID string) (RunSummary, error) {
	rec, err := h.runRecord(runID)
	if err != nil {
		return RunSummary{}, err
	}
	return h.summary(rec), nil
}

// runRecord reads a run's header; ErrRunNotFound names the newest run.
func (h *Harness) runRecord(runID string) (RunRecord, error) {
	rec, err := h.history.Run(runID)
	if errors.Is(err, ErrRunNotFound) {
		return rec, h.notFound(runID)
	}
	return rec, err
}

func (h *Harness) notFound(runID string) error {
	runs, _ := h.Runs()
	if len(runs) == 0 {
		return fmt.Errorf("%w %q in state dir %s (it holds no runs; wrong --state?)", ErrRunNotFound, runID, h.state)
	}
	return fmt.Errorf("%w %q in state dir %s (newest: %s; list them with `overnight runs`)", ErrRunNotFound, runID, h.state, runs[0].RunID)
}

// RunSummary is one line of Runs.
type RunSummary struct {
	RunID     string    `json:"run_id"`
	Scenario  string    `json:"scenario"`
	Seed      int64     `json:"seed"`
	Status    string    `json:"status"`
	Verdict   string    `json:"verdict"`
	StartedAt time.Time `json:"started_at"`
	Attempts  int       `json:"attempts"`
	Reason    string    `json:"reason,omitempty"`
	// Parent is set for an isolated re-run: the run it re-ran.
	Parent string `json:"parent,omitempty"`
	// Purpose says, for an isolated re-run, why it ran ("r1 replay 2/3",
	// "r1 verification").
	Purpose string `json:"purpose,omitempty"`
}

// Runs lists the state dir's runs, newest first. A run recorded as running
// that no process drives (its harness died) is reported as interrupted.
func (h *Harness) Runs() ([]RunSummary, error) {
	recs, err := h.history.Runs()
	if err != nil {
		return nil, err
	}
	out := make([]RunSummary, 0, len(recs))
	for _, r := range recs {
		out = append(out, h.summary(r))
	}
	sort.SliceStable(out, func(i, k int) bool {
		if !out[i].StartedAt.Equal(out[k].StartedAt) {
			return out[i].StartedAt.After(out[k].StartedAt)
		}
		return out[i].RunID > out[k].RunID
	})
	return out, nil
}

func (h *Harness) summary(r RunRecord) RunSummary {
	status := r.Status
	if status == StatusRunning && !h.isLive(r.ID) {
		status = StatusInterrupted
	}
	s := RunSummary{RunID: r.ID, Scenario: r.Scenario, Seed: r.Seed, Status: status,
		Verdict: r.Verdict, StartedAt: r.StartedAt, Attempts: r.Attempts, Reason: r.Reason}
	if r.Isolated != nil {
		s.Parent, s.Purpose = r.Isolated.Parent, r.Isolated.Purpose
	}
	return s
}

// Attempts returns a run's attempt records: containers, how each ended,
// and the timings of fault kills and recoveries.
func (h *Harness) Attempts(runID string) ([]AttemptRecord, error) {
	if _, err := h.runRecord(runID); err != nil {
		return nil, err
	}
	return h.history.Attempts(runID)
}

// Full reads everything a report of a run shows (history.Full): its
// history, reflections, gate decisions and each attempt's logs. A run
// recorded as running that no process drives is shown interrupted.
func (h *Harness) Full(ctx context.Context, runID string) (*history.Full, error) {
	if _, err := h.runRecord(runID); err != nil {
		return nil, err
	}
	return h.reads().Full(ctx, runID)
}

// Logs returns each attempt's stdout and stderr, kept before its container
// was removed.
func (h *Harness) Logs(runID string) ([]AttemptLog, error) {
	if _, err := h.runRecord(runID); err != nil {
		return nil, err
	}
	return h.history.Logs(runID)
}
