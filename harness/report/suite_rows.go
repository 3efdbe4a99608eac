package report

import (
	"strings"

	"github.com/overnight-dev/overnight/harness/suite"
)

// corpusNote explains, under a suite's table of runs, what a row marked
// as a corpus case is: the Markdown and HTML reports both carry it.
const corpusNote = "Corpus case: re-run first from the failing-seed corpus — the cases (scenario, agent, seed) " +
	"that an earlier suite with the same run flags saw fail or end unknown, kept in the state dir and run before the others " +
	"(a corpus case that passes is marked fixed; --no-corpus neither re-runs nor records them). " +
	"One outside this suite's seeds is run and reported, but not counted in its group's pass^k."

// corpusMark is how a run's row says it is a corpus case ("" when it is
// not); corpusNote explains it.
func corpusMark(r suite.RunResult) string {
	switch {
	case !r.FromCorpus:
		return ""
	case !r.Counted:
		return "corpus case, not counted †"
	}
	return "corpus case †"
}

// anyFromCorpus reports whether a row of runs is a corpus case.
func anyFromCorpus(runs []suite.RunResult) bool {
	for _, r := range runs {
		if r.FromCorpus {
			return true
		}
	}
	return false
}

// faultItem is one fault of a run as a suite's row lists it: the canonical
// spec (a drawn fault as drawn), and whether it fired.
type faultItem struct {
	Spec  string
	Fired bool
}

// faultItems lists a run's faults (its schedule as run: given, expanded or
// drawn) for its row.
func faultItems(r suite.RunResult) []faultItem {
	out := make([]faultItem, 0, len(r.Faults))
	for _, f := range r.Faults {
		out = append(out, faultItem{Spec: f.Spec, Fired: f.Applied})
	}
	return out
}

// faultsText is a run's faults on one line, for Markdown and JUnit, each
// spec between quote: "kill@step:3, api-version:v2@effect:3 (never
// fired)"; "none" for a run without any, "–" for one the harness could
// not run.
func faultsText(r suite.RunResult, quote string) string {
	if r.Error != "" && len(r.Faults) == 0 {
		return "–"
	}
	if len(r.Faults) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(r.Faults))
	for _, f := range faultItems(r) {
		s := quote + f.Spec + quote
		if !f.Fired {
			s += " (never fired)"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}
