package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/chaos"
)

// ErrNotFailing is returned by Shrink for a run that did not fail (or whose
// failure does not come back when its schedule is run again).
var ErrNotFailing = errors.New("nothing to shrink")

// ShrinkResult is the smallest fault schedule found that still fails the
// way the original run failed, with the command that reproduces it.
type ShrinkResult struct {
	RunID     string   `json:"run_id"`     // the run of the smallest reproducer
	Original  string   `json:"original"`   // the run shrunk
	Faults    []string `json:"faults"`     // the smallest schedule
	Invariant string   `json:"invariant"`  // what fails: an invariant, or "limit: ..." when a limit ended the run
	Command   string   `json:"command"`    // reproduces it
	RunsTried int      `json:"runs_tried"` // runs made while shrinking
}

// ShrinkRequest says which run to shrink.
type ShrinkRequest struct {
	RunID   string
	MaxRuns int // default 60
	// Progress, if set, hears one line per candidate run.
	Progress func(line string)
}

// failureOf is what a failed result fails on: its first failing invariant,
// else the limit that ended it.
func failureOf(res *Result) string {
	for _, ir := range res.Invariants {
		if ir.Verdict == VerdictFail {
			return ir.Name
		}
	}
	if res.Verdict == VerdictFail {
		kind, _, _ := strings.Cut(res.Reason, ":")
		return "limit: " + kind
	}
	return ""
}

// failsOn reports whether res fails on the given failure.
func failsOn(res *Result, failure string) bool {
	if res.Verdict != VerdictFail {
		return false
	}
	if lim, ok := strings.CutPrefix(failure, "limit: "); ok {
		return strings.HasPrefix(res.Reason, lim)
	}
	for _, ir := range res.Invariants {
		if ir.Name == failure && ir.Verdict == VerdictFail {
			return true
		}
	}
	return false
}

// Shrink delta-debugs a failed run's fault log — dropping faults, then
// shortening and moving the rest earlier — to the smallest schedule that
// still fails the same way, running each candidate as a real run of the
// same scenario, agent and seed.
func (h *Harness) Shrink(ctx context.Context, req ShrinkRequest) (*ShrinkResult, error) {
	if req.MaxRuns <= 0 {
		req.MaxRuns = 60
	}
	rec, err := h.runRecord(req.RunID)
	if err != nil {
		return nil, err
	}
	if rec.Status != StatusFinished || rec.Result == nil {
		return nil, fmt.Errorf("run %s has not finished (status %s): resume it first", rec.ID, rec.Status)
	}
	failure := failureOf(rec.Result)
	if failure == "" {
		return nil, fmt.Errorf("%w: run %s ended %s", ErrNotFailing, rec.ID, rec.Result.Verdict)
	}
	scen, err := h.history.Scenario(rec)
	if err != nil {
		return nil, err
	}
	recs, err := h.history.Faults(rec.ID)
	if err != nil {
		return nil, err
	}
	var schedule []chaos.Spec
	for _, fr := range recs {
		s, err := chaos.ParseSpec(fr.Spec)
		if err != nil {
			return nil, fmt.Errorf("fault log of run %s: %w", rec.ID, err)
		}
		schedule = append(schedule, s)
	}
	seed := rec.Seed
	runs := 0
	var last struct {
		id     string
		faults []chaos.Spec
	}
	best := map[string]string{} // schedule key -> failing run id
	oracle := func(ctx context.Context, faults []chaos.Spec) (bool, error) {
		runs++
		var id string
		res, err := h.Run(ctx, RunRequest{Scenario: scen, Agent: rec.Agent, Seed: &seed, Faults: append([]chaos.Spec{}, faults...),
			Timeout: time.Duration(rec.Timeout), MaxAttempts: rec.MaxAttempts, LLM: rec.LLM,
			Started: func(runID string) { id = runID }})
		if err != nil {
			return false, err
		}
		fails := failsOn(res, failure)
		if req.Progress != nil {
			req.Progress(fmt.Sprintf("shrink: run %d (%s): %d faults %v -> %s", runs, id, len(faults), specTexts(faults), map[bool]string{true: "fails on " + failure, false: "does not fail that way"}[fails]))
		}
		if fails {
			best[strings.Join(specTexts(faults), " ")] = id
			last.id, last.faults = id, faults
		}
		return fails, nil
	}
	// The failure must come back before anything is shrunk.
	fails, err := oracle(ctx, schedule)
	if err != nil {
		return nil, err
	}
	if !fails {
		return nil, fmt.Errorf("%w: run %s failed on %s, but running its fault log again does not (the failure depends on more than the schedule)", ErrNotFailing, rec.ID, failure)
	}
	out, err := chaos.Shrink(ctx, schedule, oracle, req.MaxRuns-1)
	if err != nil && !errors.Is(err, chaos.ErrShrinkBudget) {
		return nil, err
	}
	res := &ShrinkResult{Original: rec.ID, Faults: specTexts(out.Faults), Invariant: failure, RunsTried: runs}
	res.RunID = best[strings.Join(res.Faults, " ")]
	if res.RunID == "" {
		res.RunID = last.id
	}
	var extra []string
	if time.Duration(rec.Timeout) != scen.Limits.Timeout {
		extra = append(extra, "--timeout", time.Duration(rec.Timeout).String())
	}
	if rec.MaxAttempts != scen.Limits.MaxAttempts {
		extra = append(extra, "--max-attempts", fmt.Sprint(rec.MaxAttempts))
	}
	if rec.LLM != "" {
		extra = append(extra, "--llm", shellQuote(rec.LLM))
	}
	res.Command = reproduceCommand(scen.Source, rec.Agent, seed, res.Faults, extra...)
	return res, nil
}

func specTexts(specs []chaos.Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.String()
	}
	return out
}

// ReproduceCommand is the overnight command line that runs rec's scenario
// again with its agent, seed, model and fault schedule (as recorded: a
// drawn schedule is written out). It names the scenario as the run did: a
// scenario file's path is the one the run was given.
func ReproduceCommand(rec RunRecord) string {
	var extra []string
	if rec.LLM != "" {
		extra = append(extra, "--llm", shellQuote(rec.LLM))
	}
	return reproduceCommand(rec.Source, rec.Agent, rec.Seed, rec.Faults, extra...)
}

// reproduceCommand is the overnight command line that runs a schedule.
func reproduceCommand(source, agent string, seed int64, faults []string, extra ...string) string {
	scenario := strings.TrimPrefix(source, "builtin:")
	parts := []string{"overnight", "run", shellQuote(scenario), "--seed", fmt.Sprint(seed)}
	if agent != "" {
		parts = append(parts, "--agent", shellQuote(agent))
	}
	parts = append(parts, extra...)
	if len(faults) == 0 {
		parts = append(parts, "--fault", "''")
	}
	for _, f := range faults {
		parts = append(parts, "--fault", shellQuote(f))
	}
	return strings.Join(parts, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@+=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
