package overnighttest

import (
	"context"
	"errors"
	"fmt"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/suite"
	"github.com/overnight-dev/overnight/scenarios"
)

// Trials are the runs of one scenario and agent, one per seed: a suite of
// one group, as `overnight suite SCENARIO --seeds ...` runs and judges it
// (Runs, each with its Reproduce command; Groups and Summary, with pass^k
// and pass@k for every k up to the number of seeds).
type Trials struct {
	*suite.Result
	// Spec is the scenario that ran, as loaded.
	Spec *scenarios.Scenario
	// InMemory: the scenario was given as YAML bytes or a Go value, so the
	// reproducing commands name NAME.yaml, which Spec.Raw must be
	// saved as.
	InMemory bool
	// StateDir is the absolute state dir the runs were journaled in:
	// removed after RunTrials unless it was given with StateDir.
	StateDir string
}

// PassK is pass^k over the trials (tau-bench's unbiased estimator: the
// chance that k trials drawn from them all pass), and whether k is in
// 1..the number of trials.
func (t *Trials) PassK(k int) (float64, bool) { return t.Summary.PassK.At(k) }

// Seeds returns the seeds 1..n, as `overnight suite --seeds n` does.
func Seeds(n int) []int64 {
	out := make([]int64, max(n, 0))
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

// RunTrials runs scenario (as Run takes it) once per seed — the options
// apply to every run, and Seed is refused — under a worker pool
// (Parallel), through harness/suite against one harness, and returns the
// trials. Runs the harness could not run at all are in the trials as
// unknown, with their errors joined in the error returned beside them; an
// error with no trials means nothing ran.
func RunTrials(ctx context.Context, scenario any, seeds []int64, opts ...Option) (*Trials, error) {
	cfg, err := configure(opts)
	if err != nil {
		return nil, err
	}
	if cfg.seed != nil {
		return nil, errors.New("overnighttest: RunTrials runs the seeds it is given; leave out the Seed option")
	}
	src, err := load(scenario)
	if err != nil {
		return nil, err
	}
	if err := cfg.checkSchedule(src.scen); err != nil {
		return nil, err
	}
	spec := suite.Spec{Scenarios: []string{src.name}, Seeds: seeds, Config: cfg.suiteConfig()}
	if cfg.agent != "" {
		spec.Agents = []string{cfg.agent}
	}
	plan, err := suite.Build(spec, func(string) (*scenarios.Scenario, error) { return src.scen, nil })
	if err != nil {
		return nil, err
	}
	var out *Trials
	err = cfg.withHarness(ctx, func(h *harness.Harness, command string) error {
		if err := h.Check(src.scen); err != nil {
			return err
		}
		opts := suite.Options{Parallel: cfg.parallel, Command: command}
		if cfg.progress != nil {
			opts.Progress = suite.NewProgress(cfg.progress, false, false, 0)
		}
		res, err := suite.Run(ctx, h, plan, opts)
		if res == nil {
			return err
		}
		out = &Trials{Result: res, Spec: src.scen, InMemory: src.inMemory, StateDir: h.StateDir()}
		var errs []error
		if err != nil {
			errs = append(errs, err)
		}
		if res.Suite.Interrupted {
			cause := context.Cause(ctx)
			if cause == nil {
				cause = errors.New("stopped before every seed ran")
			}
			errs = append(errs, fmt.Errorf("the trials of %s were interrupted: %w", src.scen.Name, cause))
		}
		for _, e := range res.Errors {
			errs = append(errs, errors.New(e))
		}
		return errors.Join(errs...)
	})
	return out, err
}
