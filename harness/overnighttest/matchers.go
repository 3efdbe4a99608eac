package overnighttest

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/onsi/gomega/types"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/suite"
	"github.com/overnight-dev/overnight/scenarios"
)

// Each matcher takes what Run and RunTrials return — *Result and *Trials —
// and the harness's and harness/suite's own results: *harness.Result (a
// run of harness.Harness.Run, or one read back from `overnight run
// --output json`), suite.RunResult (one run of a suite) and *suite.Result
// (a suite's, e.g. read back with suite.ReadResult). Given trials or a
// suite, Pass, HoldInvariant and SurviveFaults ask it of every run.

// Pass succeeds when the run passed: its verdict is pass (an unknown
// verdict is never a pass). Its message shows the verdict and reason, the
// invariants that did not hold, the faults not met and the command that
// reproduces the run.
func Pass() types.GomegaMatcher { return &passMatcher{} }

type passMatcher struct {
	set    runSet
	failed []runView
}

func (m *passMatcher) Match(actual any) (bool, error) {
	set, err := runsOf("Pass()", actual)
	if err != nil {
		return false, err
	}
	m.set, m.failed = set, nil
	for _, r := range set.runs {
		if r.verdict != history.VerdictPass {
			m.failed = append(m.failed, r)
		}
	}
	return len(m.failed) == 0, nil
}

func (m *passMatcher) FailureMessage(any) string {
	if !m.set.many() {
		return fmt.Sprintf("Expected %s to pass, but its verdict is %s\n%s", m.set.label(), m.set.runs[0].verdict, m.set.explain(m.set.runs))
	}
	return fmt.Sprintf("Expected every one of %s to pass, but %d did not:\n%s", m.set.label(), len(m.failed), m.set.explain(m.failed))
}

func (m *passMatcher) NegatedFailureMessage(any) string {
	if !m.set.many() {
		return fmt.Sprintf("Expected %s not to pass, but it passed\n%s", m.set.label(), m.set.explain(m.set.runs))
	}
	return fmt.Sprintf("Expected some of %s not to pass, but every one passed:\n%s", m.set.label(), m.set.explain(m.set.runs))
}

// HoldInvariant succeeds when the run judged the invariant name (e.g.
// "no-duplicate-effects") and it held. An invariant the run did not
// judge, or judged unknown — neither held nor violated — is an error, so
// that Not(HoldInvariant(...)) asserts a real violation.
func HoldInvariant(name string) types.GomegaMatcher { return &invariantMatcher{name: name} }

type invariantMatcher struct {
	name           string
	set            runSet
	violated, held []runView
}

func (m *invariantMatcher) Match(actual any) (bool, error) {
	call := fmt.Sprintf("HoldInvariant(%q)", m.name)
	if known := scenarios.KnownInvariants(); !slices.Contains(known, m.name) {
		return false, fmt.Errorf("%s: there is no invariant %q; the invariants are %s", call, m.name, strings.Join(known, ", "))
	}
	set, err := runsOf(call, actual)
	if err != nil {
		return false, err
	}
	m.set, m.violated, m.held = set, nil, nil
	for _, r := range set.runs {
		inv, ok := invariantOf(r, m.name)
		switch {
		case !ok:
			var names []string
			for _, i := range r.invariants {
				names = append(names, i.Name)
			}
			return false, fmt.Errorf("%s: %s judged no invariant %q (it judged: %s); name it in the scenario's invariants:\n%s",
				call, r.label(), m.name, strings.Join(names, ", "), set.explain([]runView{r}))
		case inv.Verdict == history.VerdictPass:
			m.held = append(m.held, r)
		case inv.Verdict == history.VerdictFail:
			m.violated = append(m.violated, r)
		default:
			return false, fmt.Errorf("%s: in %s the invariant is %s — neither held nor violated: %s\n%s",
				call, r.label(), inv.Verdict, inv.Detail, set.explain([]runView{r}))
		}
	}
	return len(m.violated) == 0, nil
}

func invariantOf(r runView, name string) (history.InvariantResult, bool) {
	for _, inv := range r.invariants {
		if inv.Name == name {
			return inv, true
		}
	}
	return history.InvariantResult{}, false
}

func (m *invariantMatcher) FailureMessage(any) string {
	if !m.set.many() {
		return fmt.Sprintf("Expected invariant %s to hold in %s, but it failed\n%s", m.name, m.set.label(), m.set.explain(m.set.runs))
	}
	return fmt.Sprintf("Expected invariant %s to hold in every one of %s, but it failed in %d:\n%s", m.name, m.set.label(), len(m.violated), m.set.explain(m.violated))
}

func (m *invariantMatcher) NegatedFailureMessage(any) string {
	if !m.set.many() {
		inv, _ := invariantOf(m.set.runs[0], m.name)
		return fmt.Sprintf("Expected invariant %s to be violated in %s, but it held: %s\n%s", m.name, m.set.label(), inv.Detail, m.set.explain(m.set.runs))
	}
	return fmt.Sprintf("Expected invariant %s to be violated in some of %s, but it held in every one:\n%s", m.name, m.set.label(), m.set.explain(m.held))
}

// SurviveFaults succeeds when the run passed and every fault scheduled in
// it was applied and met (the agent really went through it: a kill was
// followed by a new attempt that resumed, an outage by a retry, ...). A
// run with no fault scheduled is an error: there is nothing to survive.
func SurviveFaults() types.GomegaMatcher { return &faultsMatcher{} }

type faultsMatcher struct {
	set            runSet
	fell, survived []runView
}

func (m *faultsMatcher) Match(actual any) (bool, error) {
	set, err := runsOf("SurviveFaults()", actual)
	if err != nil {
		return false, err
	}
	m.set, m.fell, m.survived = set, nil, nil
	for _, r := range set.runs {
		if len(r.faults) == 0 {
			return false, fmt.Errorf("SurviveFaults(): %s had no fault scheduled, so there is nothing to survive; give it Faults(...) or ChaosRandom(n):\n%s",
				r.label(), set.explain([]runView{r}))
		}
		if r.verdict == history.VerdictPass && len(unmet(r)) == 0 {
			m.survived = append(m.survived, r)
		} else {
			m.fell = append(m.fell, r)
		}
	}
	return len(m.fell) == 0, nil
}

func unmet(r runView) []history.FaultResult {
	var out []history.FaultResult
	for _, f := range r.faults {
		if !met(f) {
			out = append(out, f)
		}
	}
	return out
}

func (m *faultsMatcher) FailureMessage(any) string {
	if !m.set.many() {
		r := m.set.runs[0]
		var why []string
		if r.verdict != history.VerdictPass {
			why = append(why, "its verdict is "+r.verdict)
		}
		if n := len(unmet(r)); n == 1 && len(r.faults) == 1 {
			why = append(why, "its fault was not met")
		} else if n == 1 {
			why = append(why, fmt.Sprintf("1 of its %d faults was not met", len(r.faults)))
		} else if n > 1 {
			why = append(why, fmt.Sprintf("%d of its %d faults were not met", n, len(r.faults)))
		}
		return fmt.Sprintf("Expected %s to survive its faults (pass, with each applied and met), but %s\n%s",
			m.set.label(), strings.Join(why, " and "), m.set.explain(m.set.runs))
	}
	return fmt.Sprintf("Expected every one of %s to survive its faults (pass, with each applied and met), but %d did not:\n%s",
		m.set.label(), len(m.fell), m.set.explain(m.fell))
}

func (m *faultsMatcher) NegatedFailureMessage(any) string {
	if !m.set.many() {
		r := m.set.runs[0]
		var specs []string
		for _, f := range r.faults {
			specs = append(specs, f.Spec)
		}
		return fmt.Sprintf("Expected %s not to survive its faults, but it passed and met every one: %s\n%s",
			m.set.label(), strings.Join(specs, ", "), m.set.explain(m.set.runs))
	}
	return fmt.Sprintf("Expected some of %s not to survive its faults, but every one passed and met them all:\n%s",
		m.set.label(), m.set.explain(m.survived))
}

// HavePassK succeeds when pass^k of trials (RunTrials) or of a suite's
// result is at least min: tau-bench's unbiased estimator C(c,k)/C(n,k),
// the chance that k trials drawn from a group's n runs, c of them passing,
// all pass, averaged over the groups — judged exactly, by harness/suite,
// as `overnight suite --require 'pass^k>=min'` judges it. An unknown run
// counts as a trial and never as a pass. The trials are the counted runs
// (suite.RunResult.Counted); fewer than k of them in a group is an error,
// as is one run on its own.
func HavePassK(k int, min float64) types.GomegaMatcher { return &passKMatcher{k: k, min: min} }

type passKMatcher struct {
	k      int
	min    float64
	set    runSet
	judged *suite.Result
	value  float64
}

func (m *passKMatcher) clause(op string) string {
	return fmt.Sprintf("pass^%d %s %s", m.k, op, strconv.FormatFloat(m.min, 'f', -1, 64))
}

func (m *passKMatcher) Match(actual any) (bool, error) {
	call := fmt.Sprintf("HavePassK(%d, %s)", m.k, strconv.FormatFloat(m.min, 'g', -1, 64))
	if m.k < 1 {
		return false, fmt.Errorf("%s: k is how many trials must all pass, at least 1", call)
	}
	if math.IsNaN(m.min) || m.min < 0 || m.min > 1 {
		return false, fmt.Errorf("%s: pass^k is a probability: want a minimum between 0 and 1", call)
	}
	set, err := runsOf(call, actual)
	if err != nil {
		return false, err
	}
	if set.suite == nil {
		return false, fmt.Errorf("%s judges trials, not one run: give it what RunTrials returns (or a *suite.Result); got %s", call, set.label())
	}
	req, err := suite.ParseRequirement(strings.ReplaceAll(m.clause(">="), " ", ""))
	if err != nil {
		return false, fmt.Errorf("%s: %w", call, err)
	}
	// Judged afresh from the runs, so that the caller's value is not touched.
	m.set, m.judged = set, &suite.Result{Suite: set.suite.Suite, Runs: set.suite.Runs}
	j := req.Judge(m.judged)
	switch j.Outcome {
	case suite.Met, suite.Failed:
		m.value = *j.Clauses[0].Value
		return j.Outcome == suite.Met, nil
	default:
		return false, fmt.Errorf("%s cannot judge %s: %s", call, set.label(), j.Detail)
	}
}

// groups lists each group's pass^k and tally.
func (m *passKMatcher) groups() string {
	var b strings.Builder
	for _, g := range m.judged.Groups {
		v, _ := g.PassK.At(m.k)
		fmt.Fprintf(&b, "  %s/%s: pass^%d %.4f (%d of %d passed, %d failed, %d unknown)\n", g.Scenario, g.Agent, m.k, v, g.Passes, g.N, g.Fails, g.Unknown)
	}
	return b.String()
}

func (m *passKMatcher) FailureMessage(any) string {
	var failed []runView
	for _, r := range m.set.runs {
		if r.verdict != history.VerdictPass {
			failed = append(failed, r)
		}
	}
	return fmt.Sprintf("Expected %s over %s, but pass^%d is %.4f\n%sthe runs that did not pass:\n%s",
		m.clause(">="), m.set.label(), m.k, m.value, m.groups(), m.set.explain(failed))
}

func (m *passKMatcher) NegatedFailureMessage(any) string {
	return fmt.Sprintf("Expected %s over %s, but pass^%d is %.4f\n%s", m.clause("<"), m.set.label(), m.k, m.value,
		strings.TrimSuffix(m.groups(), "\n"))
}
