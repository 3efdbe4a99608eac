package overnighttest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/suite"
	"github.com/overnight-dev/overnight/scenarios"
)

// Result is one run's outcome: the harness's result (verdict, reason,
// faults, invariants, effects, history_digest, ...), what really happened
// (its history, read before the harness closed), and how to run it again.
type Result struct {
	*harness.Result
	// Spec is the scenario that ran, as loaded: its name, agents, faults,
	// limits and Raw YAML. (Scenario, of the harness's result, is its name.)
	Spec *scenarios.Scenario
	// Reproduce is the command that runs it again on its own, to the same
	// history: `overnight run SCENARIO --seed N` and the options as flags.
	Reproduce string
	// InMemory: the scenario was given as YAML bytes or a Go value, so
	// Reproduce names NAME.yaml, which Spec.Raw must be saved as.
	InMemory bool
	// StateDir is the absolute state dir the run was journaled in: removed
	// after Run unless it was given with StateDir.
	StateDir string
	// History is the run's whole history: attempts, checkpoints, effects,
	// faults with their evidence, LLM exchanges, events and the world's
	// ledger.
	History *history.Run
}

// Run runs scenario once to its verdict and returns its result; an error
// means the harness could not run it (a bad scenario or option, no Docker
// engine, ctx cancelled), never that the agent failed. scenario is one of:
//
//   - a string: a built-in scenario's name ("deploy") or a scenario file's path;
//   - []byte: a scenario file's YAML;
//   - *scenarios.Scenario: e.g. from scenarios.Parse or scenarios.FromValue.
//
// The harness is opened for the run and closed after it, on a temporary
// state dir unless StateDir says otherwise, with the reflection extension
// and the built-in agents, as the overnight CLI runs it. Runs are
// independent unless they share a StateDir (Lessons(reflect.LessonsMemory)).
// When the run ends and its cleanup fails, both the result and the error
// come back.
func Run(ctx context.Context, scenario any, opts ...Option) (*Result, error) {
	cfg, err := configure(opts)
	if err != nil {
		return nil, err
	}
	src, err := load(scenario)
	if err != nil {
		return nil, err
	}
	if err := cfg.checkSchedule(src.scen); err != nil {
		return nil, err
	}
	var out *Result
	err = cfg.withHarness(ctx, func(h *harness.Harness, command string) error {
		res, err := h.Run(ctx, cfg.request(src.scen))
		if err != nil {
			return fmt.Errorf("run scenario %s: %w", src.scen.Name, err)
		}
		run, err := h.History().Load(ctx, res.RunID)
		if err != nil {
			return fmt.Errorf("read the history of run %s: %w", res.RunID, err)
		}
		c := suite.Case{Scenario: src.scen.Name, Agent: cfg.agent, Seed: res.Seed}
		out = &Result{Result: res, Spec: src.scen, InMemory: src.inMemory, StateDir: h.StateDir(), History: run,
			Reproduce: suite.Reproduce(command, src.name, c, cfg.suiteConfig())}
		return nil
	})
	return out, err
}

// source is a loaded scenario and how a command line names it.
type source struct {
	scen *scenarios.Scenario
	// name is what `overnight run` takes: a built-in's name, a file's
	// absolute path, or NAME.yaml for a scenario given in memory.
	name     string
	inMemory bool
}

// load reads the scenario argument of Run and RunTrials.
func load(scenario any) (source, error) {
	switch s := scenario.(type) {
	case string:
		scen, err := harness.LoadScenario(s)
		if err != nil {
			return source{}, err
		}
		return named(scen), nil
	case []byte:
		scen, err := scenarios.Parse("<yaml>", s)
		if err != nil {
			return source{}, err
		}
		return source{scen: scen, name: scen.Name + ".yaml", inMemory: true}, nil
	case *scenarios.Scenario:
		if s == nil {
			return source{}, errors.New("overnighttest: the scenario is a nil *scenarios.Scenario")
		}
		return named(s), nil
	default:
		return source{}, fmt.Errorf("overnighttest: a scenario is a built-in name or a file path (string), YAML ([]byte) or a *scenarios.Scenario, not %T", scenario)
	}
}

// named names a loaded scenario as a command line does: by its built-in
// name, by its file, or — made in memory — as NAME.yaml.
func named(scen *scenarios.Scenario) source {
	if name, ok := strings.CutPrefix(scen.Source, scenarios.BuiltinPrefix); ok {
		return source{scen: scen, name: name}
	}
	if fi, err := os.Stat(scen.Source); err == nil && fi.Mode().IsRegular() {
		if abs, err := filepath.Abs(scen.Source); err == nil {
			return source{scen: scen, name: abs}
		}
	}
	return source{scen: scen, name: scen.Name + ".yaml", inMemory: true}
}
