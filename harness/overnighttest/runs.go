package overnighttest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/onsi/gomega/format"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/suite"
	"github.com/overnight-dev/overnight/scenarios"
)

// listed is how many runs a message shows in full; the rest are counted.
const listed = 10

// runView is one run as the matchers explain it, whatever type it came in.
type runView struct {
	id, scenario, agent string
	seed                int64
	verdict, reason     string
	attempts, steps     int
	faults              []history.FaultResult
	invariants          []history.InvariantResult
	reproduce           string
	harnessErr          string // the harness could not run it (a suite's run)
}

// runSet is a matcher's actual value: one run, or the runs of trials or of
// a suite.
type runSet struct {
	runs  []runView
	suite *suite.Result // the trials' or the suite's result; nil for one run
	note  string        // about the reproducing commands
}

// many reports whether the set holds trials' or a suite's runs.
func (s runSet) many() bool { return s.suite != nil }

// accepted names the types the matchers take, for their errors.
const accepted = "*overnighttest.Result, *overnighttest.Trials, *harness.Result, suite.RunResult or *suite.Result"

// runsOf reads a matcher's actual value.
func runsOf(matcher string, actual any) (runSet, error) {
	switch a := actual.(type) {
	case *Result:
		if a == nil || a.Result == nil {
			break
		}
		return runsOf(matcher, *a)
	case Result:
		if a.Result == nil {
			break
		}
		v := fromResult(a.Result)
		v.reproduce = a.Reproduce
		if v.reproduce == "" {
			v.reproduce = reproduceOf(a.Result)
		}
		return runSet{runs: []runView{v}, note: memoryNote(a.InMemory, a.Spec)}, nil
	case *harness.Result:
		if a == nil {
			break
		}
		return runsOf(matcher, *a)
	case harness.Result:
		v := fromResult(&a)
		v.reproduce = reproduceOf(&a)
		return runSet{runs: []runView{v}}, nil
	case *suite.RunResult:
		if a == nil {
			break
		}
		return runsOf(matcher, *a)
	case suite.RunResult:
		return runSet{runs: []runView{fromSuiteRun(a)}}, nil
	case *Trials:
		if a == nil || a.Result == nil {
			break
		}
		return runsOf(matcher, *a)
	case Trials:
		if a.Result == nil {
			break
		}
		set, err := runsOf(matcher, a.Result)
		set.note = memoryNote(a.InMemory, a.Spec)
		return set, err
	case *suite.Result:
		if a == nil {
			break
		}
		set := runSet{suite: a}
		for _, r := range a.Runs {
			set.runs = append(set.runs, fromSuiteRun(r))
		}
		if len(set.runs) == 0 {
			return set, fmt.Errorf("%s: the trials hold no runs", matcher)
		}
		return set, nil
	case suite.Result:
		return runsOf(matcher, &a)
	}
	return runSet{}, fmt.Errorf("%s expects a run's or trials' result (%s), got:\n%s", matcher, accepted, format.Object(actual, 1))
}

func fromResult(r *harness.Result) runView {
	return runView{id: r.RunID, scenario: r.Scenario, agent: r.Agent, seed: r.Seed, verdict: r.Verdict, reason: r.Reason,
		attempts: r.Attempts, steps: r.StepsCompleted, faults: r.Faults, invariants: r.Invariants}
}

func fromSuiteRun(r suite.RunResult) runView {
	agent := r.Agent
	if agent == suite.AgentLabel {
		agent = ""
	}
	return runView{id: r.RunID, scenario: r.Scenario, agent: agent, seed: r.Seed, verdict: r.Verdict, reason: r.Reason,
		attempts: r.Attempts, steps: r.StepsCompleted, faults: r.Faults, invariants: r.Invariants,
		reproduce: r.Reproduce, harnessErr: r.Error}
}

// reproduceOf is the reproducing command of a harness result that came
// without one: its scenario by name, its seed and agent, and its faults as
// --fault flags (each as scheduled, before expansion), which replay the
// same schedule whether it was given or drawn.
func reproduceOf(r *harness.Result) string {
	var cfg suite.Config
	for _, f := range r.Faults {
		text := f.Spec
		if f.From != "" {
			text = f.From
		}
		if !slices.Contains(cfg.Faults, text) {
			cfg.Faults = append(cfg.Faults, text)
		}
	}
	return suite.Reproduce(suite.Command(""), r.Scenario, suite.Case{Scenario: r.Scenario, Agent: r.Agent, Seed: r.Seed}, cfg)
}

// memoryNote tells how to reproduce a run of a scenario given in Go.
func memoryNote(inMemory bool, scen *scenarios.Scenario) string {
	if !inMemory || scen == nil {
		return ""
	}
	return fmt.Sprintf("(scenario %s was given in Go: save its YAML, Spec.Raw, as %s.yaml to reproduce)", scen.Name, scen.Name)
}

// label names one run: `run R (deploy, seed 3, agent naive)`.
func (v runView) label() string {
	what := v.scenario + ", seed " + strconv.FormatInt(v.seed, 10)
	if v.agent != "" {
		what += ", agent " + v.agent
	}
	if v.id == "" {
		return "the run of " + what
	}
	return "run " + v.id + " (" + what + ")"
}

// describe explains a run, a line each: its verdict and reason, the
// invariants that did not hold, the faults not met, a harness error, and
// the command that reproduces it.
func (v runView) describe(indent string) string {
	var b strings.Builder
	line := func(format string, args ...any) {
		b.WriteString(indent)
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	verdict := v.verdict
	if v.attempts > 0 {
		verdict += fmt.Sprintf(" after %d attempt%s, %d step%s done", v.attempts, plural(v.attempts), v.steps, plural(v.steps))
	}
	if v.reason != "" {
		verdict += ": " + v.reason
	}
	line("verdict: %s", verdict)
	for _, inv := range v.invariants {
		if inv.Verdict != history.VerdictPass {
			line("invariant %s (%s) %s: %s", inv.Name, inv.Kind, inv.Verdict, inv.Detail)
		}
	}
	for _, f := range v.faults {
		if !met(f) {
			line("fault %s %s", f.Spec, notMet(f))
		}
	}
	if v.harnessErr != "" {
		line("harness error: %s", v.harnessErr)
	}
	if v.reproduce != "" {
		line("reproduce: %s", v.reproduce)
	}
	return b.String()
}

func met(f history.FaultResult) bool { return f.Applied && f.Met }

// notMet says why fault f was not met.
func notMet(f history.FaultResult) string {
	switch {
	case f.Error != "":
		return "fired but could not be injected: " + f.Error
	case !f.Applied && f.MetDetail != "":
		return "never fired: " + f.MetDetail
	case !f.Applied:
		return "never fired (the run ended before its trigger)"
	case f.MetDetail != "":
		return "applied, not met: " + f.MetDetail
	default:
		return "applied, not met"
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// explain is one run's explanation, or a list of runs' (the first few in
// full), with the note on reproducing commands once at the end.
func (s runSet) explain(runs []runView) string {
	var b strings.Builder
	if !s.many() {
		b.WriteString(runs[0].describe("  "))
	} else {
		for i, r := range runs {
			if i == listed {
				var seeds []int64
				for _, rest := range runs[i:] {
					seeds = append(seeds, rest.seed)
				}
				fmt.Fprintf(&b, "  (and %d more: seeds %s)\n", len(runs)-i, seedsText(seeds))
				break
			}
			fmt.Fprintf(&b, "  - %s\n%s", r.label(), r.describe("      "))
		}
	}
	if s.note != "" {
		b.WriteString("  " + s.note + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// label names the runs: `run R (deploy, seed 3)`, or `the 5 runs of deploy
// (agent default, seeds 1-5)`.
func (s runSet) label() string {
	if !s.many() {
		return s.runs[0].label()
	}
	var groups []string
	var seeds []int64
	for _, r := range s.runs {
		agent := r.agent
		if agent == "" {
			agent = suite.AgentLabel
		}
		g := r.scenario + " (agent " + agent + ")"
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
		seeds = append(seeds, r.seed)
	}
	return fmt.Sprintf("the %d run%s of %s, seeds %s", len(s.runs), plural(len(s.runs)), strings.Join(groups, " and "), seedsText(seeds))
}

// seedsText writes seeds compactly: "1-5,9".
func seedsText(seeds []int64) string {
	seeds = slices.Clone(seeds)
	slices.Sort(seeds)
	seeds = slices.Compact(seeds)
	var parts []string
	for i := 0; i < len(seeds); {
		j := i
		for j+1 < len(seeds) && seeds[j+1] == seeds[j]+1 {
			j++
		}
		part := strconv.FormatInt(seeds[i], 10)
		if j > i {
			part += "-" + strconv.FormatInt(seeds[j], 10)
		}
		parts = append(parts, part)
		i = j + 1
	}
	return strings.Join(parts, ",")
}
