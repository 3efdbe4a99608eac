package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/overnight-dev/overnight/harness/suite"
)

// maxMarkdownRuns bounds the table of runs that did not pass: a step
// summary is read by a person (the JSON and JUnit keep every run).
const maxMarkdownRuns = 50

// Markdown writes a suite's result as a Markdown summary fit for a CI step
// summary ($GITHUB_STEP_SUMMARY): the requirement's outcome, a table of the
// groups with pass^k and pass@k, and the runs that did not pass with the
// command that reproduces each.
func Markdown(w io.Writer, res *suite.Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## overnight suite: %s\n\n", headline(res))
	if q := res.Requirement; q != nil {
		fmt.Fprintf(&b, "Requirement `%s`: **%s**. %s\n\n", q.Expression, q.Outcome, mdEscape(q.Detail))
	}
	s := res.Summary
	fmt.Fprintf(&b, "%d runs in %d groups: %d passed, %d failed, %d unknown", s.Runs, s.Groups, s.Passes, s.Fails, s.Unknown)
	if res.Suite.Interrupted {
		b.WriteString(" (**interrupted**: not every run ran; those stopped are resumable)")
	}
	fmt.Fprintf(&b, ". Suite %s, %s, parallel %d", res.Suite.ID, seconds(res.Suite.WallMS)+" s", res.Suite.Parallel)
	if res.Suite.Shard != nil {
		fmt.Fprintf(&b, ", shard %s", res.Suite.Shard)
	}
	if len(res.Merged) > 0 {
		fmt.Fprintf(&b, ", merged from %d shards", len(res.Merged))
	}
	b.WriteString(".\n\n")

	maxK := 0
	for _, g := range res.Groups {
		maxK = max(maxK, len(g.PassK))
	}
	shown := min(maxK, 5)
	b.WriteString("| scenario | agent | runs | pass | fail | unknown |")
	for k := 1; k <= shown; k++ {
		fmt.Fprintf(&b, " pass^%d |", k)
	}
	if maxK > 0 {
		fmt.Fprintf(&b, " pass@%d |", shown)
	}
	b.WriteString("\n|---|---|--:|--:|--:|--:|")
	for k := 0; k <= shown && maxK > 0; k++ {
		b.WriteString("--:|")
	}
	b.WriteString("\n")
	row := func(scenario, agent string, n, p, f, u int, passK, passAtK suite.KValues) {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d |", mdEscape(scenario), mdEscape(agent), n, p, f, u)
		for k := 1; k <= shown; k++ {
			if v, ok := passK.At(k); ok {
				fmt.Fprintf(&b, " %s |", ratio(v))
			} else {
				b.WriteString(" – |")
			}
		}
		if maxK > 0 {
			if v, ok := passAtK.At(shown); ok {
				fmt.Fprintf(&b, " %s |", ratio(v))
			} else {
				b.WriteString(" – |")
			}
		}
		b.WriteString("\n")
	}
	for _, g := range res.Groups {
		row(g.Scenario, g.Agent, g.N, g.Passes, g.Fails, g.Unknown, g.PassK, g.PassAtK)
	}
	if len(res.Groups) > 1 {
		row("**all**", "", s.Runs, s.Passes, s.Fails, s.Unknown, s.PassK, s.PassAtK)
	}
	b.WriteString("\n")

	if failed := res.Failed(); len(failed) > 0 {
		fmt.Fprintf(&b, "### Runs that did not pass (%d)\n\n", len(failed))
		b.WriteString("| scenario | agent | seed | verdict | faults | reason | reproduce |\n|---|---|--:|---|---|---|---|\n")
		shown := failed[:min(len(failed), maxMarkdownRuns)]
		for _, r := range shown {
			verdict := r.Verdict
			if mark := corpusMark(r); mark != "" {
				verdict += " (" + mark + ")"
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | `%s` |\n", mdEscape(r.Scenario), mdEscape(r.Agent), r.Seed, verdict,
				mdEscape(faultsText(r, "`")), mdEscape(r.Reason), strings.ReplaceAll(r.Reproduce, "`", "'"))
		}
		if more := len(failed) - len(shown); more > 0 {
			fmt.Fprintf(&b, "\n… and %d more: see the JSON or JUnit report.\n", more)
		}
		if anyFromCorpus(shown) {
			fmt.Fprintf(&b, "\n† %s\n", mdEscape(corpusNote))
		}
		b.WriteString("\n")
	}
	if c := res.Corpus; c != nil && (c.Rerun > 0 || c.Added > 0) {
		fmt.Fprintf(&b, "Failing-seed corpus: %d re-run first (%d fixed, %d still failing), %d added.\n\n", c.Rerun, c.Fixed, c.StillFail, c.Added)
	}
	if len(res.Errors) > 0 {
		fmt.Fprintf(&b, "### Harness errors (%d)\n\n", len(res.Errors))
		for _, e := range res.Errors {
			fmt.Fprintf(&b, "- %s\n", mdEscape(e))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// headline is the suite's outcome in a few words.
func headline(res *suite.Result) string {
	if q := res.Requirement; q != nil {
		switch q.Outcome {
		case suite.Met:
			return "PASS (requirement met)"
		case suite.Failed:
			return "FAIL (requirement not met)"
		default:
			return "UNKNOWN (requirement could not be judged)"
		}
	}
	switch s := res.Summary; {
	case s.Fails > 0:
		return "FAIL"
	case s.Unknown > 0 || s.Runs == 0:
		return "UNKNOWN"
	default:
		return "PASS"
	}
}

var mdReplacer = strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ", "<", "&lt;", ">", "&gt;")

func mdEscape(s string) string { return mdReplacer.Replace(s) }
