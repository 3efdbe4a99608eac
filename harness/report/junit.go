package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/suite"
)

// The JUnit XML that CI systems read (Jenkins, GitLab, the common GitHub
// actions): testsuites > testsuite > testcase, with failure, error and
// skipped children.
type (
	junitSuites struct {
		XMLName  xml.Name     `xml:"testsuites"`
		Name     string       `xml:"name,attr"`
		Tests    int          `xml:"tests,attr"`
		Failures int          `xml:"failures,attr"`
		Errors   int          `xml:"errors,attr"`
		Skipped  int          `xml:"skipped,attr"`
		Time     string       `xml:"time,attr"`
		Suites   []junitSuite `xml:"testsuite"`
	}
	junitSuite struct {
		Name       string          `xml:"name,attr"`
		Tests      int             `xml:"tests,attr"`
		Failures   int             `xml:"failures,attr"`
		Errors     int             `xml:"errors,attr"`
		Skipped    int             `xml:"skipped,attr"`
		Time       string          `xml:"time,attr"`
		Timestamp  string          `xml:"timestamp,attr,omitempty"`
		Properties *junitProps     `xml:"properties,omitempty"`
		Cases      []junitTestcase `xml:"testcase"`
	}
	junitProps struct {
		Props []junitProp `xml:"property"`
	}
	junitProp struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	}
	junitTestcase struct {
		Classname string        `xml:"classname,attr"`
		Name      string        `xml:"name,attr"`
		Time      string        `xml:"time,attr"`
		Failure   *junitProblem `xml:"failure,omitempty"`
		Error     *junitProblem `xml:"error,omitempty"`
		Skipped   *junitProblem `xml:"skipped,omitempty"`
		SystemOut string        `xml:"system-out,omitempty"`
	}
	junitProblem struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr,omitempty"`
		Body    string `xml:",chardata"`
	}
)

// JUnit writes a suite's result as JUnit XML: a testsuite per scenario and
// agent (named "scenario/agent", with pass^k and pass@k as properties), a
// testcase per seed (classname "overnight.scenario.agent", name "seed N",
// time in seconds; its system-out names the run, its faults — the
// schedule as run, a drawn fault as drawn — and the reproducing command); a
// run that failed has a failure (message: the verdict's reason; body: the
// invariants that failed, the faults, the reproducing command), one the
// harness could not run an error, an unknown one is skipped. Corpus cases outside the suite's seeds are a testsuite of their
// own, "corpus"; the requirement, when there is one, is a testsuite
// "requirement" with a testcase per clause.
func JUnit(w io.Writer, res *suite.Result) error {
	out := junitSuites{Name: "overnight suite " + res.Suite.ID, Time: seconds(res.Suite.WallMS)}
	var extras []suite.RunResult
	for _, g := range res.Groups {
		js := junitSuite{Name: g.Scenario + "/" + g.Agent, Timestamp: res.Suite.StartedAt.UTC().Format("2006-01-02T15:04:05")}
		var wall int64
		for _, r := range res.Runs {
			if !r.Counted || r.Scenario != g.Scenario || r.Agent != g.Agent {
				continue
			}
			js.add(testcase(r))
			wall += r.WallMS
		}
		js.Time = seconds(wall)
		props := []junitProp{{"n", strconv.Itoa(g.N)}, {"passes", strconv.Itoa(g.Passes)}, {"fails", strconv.Itoa(g.Fails)}, {"unknown", strconv.Itoa(g.Unknown)}}
		for k, v := range g.PassK {
			props = append(props, junitProp{fmt.Sprintf("pass^%d", k+1), ratio(v)})
		}
		for k, v := range g.PassAtK {
			props = append(props, junitProp{fmt.Sprintf("pass@%d", k+1), ratio(v)})
		}
		js.Properties = &junitProps{props}
		out.add(js)
	}
	for _, r := range res.Runs {
		if !r.Counted {
			extras = append(extras, r)
		}
	}
	if len(extras) > 0 {
		js := junitSuite{Name: "corpus"}
		var wall int64
		for _, r := range extras {
			js.add(testcase(r))
			wall += r.WallMS
		}
		js.Time = seconds(wall)
		out.add(js)
	}
	if q := res.Requirement; q != nil {
		js := junitSuite{Name: "requirement", Time: "0"}
		for _, c := range q.Clauses {
			tc := junitTestcase{Classname: "overnight.requirement", Name: c.Clause, Time: "0"}
			switch c.Outcome {
			case suite.Failed:
				tc.Failure = &junitProblem{Message: c.Detail, Type: "requirement", Body: c.Detail + "\nthe requirement: " + q.Expression + "\n"}
			case suite.Unjudged:
				tc.Skipped = &junitProblem{Message: c.Detail}
			}
			js.add(tc)
		}
		out.add(js)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write JUnit XML: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func (s *junitSuites) add(js junitSuite) {
	s.Suites = append(s.Suites, js)
	s.Tests += js.Tests
	s.Failures += js.Failures
	s.Errors += js.Errors
	s.Skipped += js.Skipped
}

func (s *junitSuite) add(tc junitTestcase) {
	s.Cases = append(s.Cases, tc)
	s.Tests++
	switch {
	case tc.Failure != nil:
		s.Failures++
	case tc.Error != nil:
		s.Errors++
	case tc.Skipped != nil:
		s.Skipped++
	}
}

// testcase is one run.
func testcase(r suite.RunResult) junitTestcase {
	tc := junitTestcase{Classname: "overnight." + r.Scenario + "." + r.Agent, Name: fmt.Sprintf("seed %d", r.Seed), Time: seconds(r.WallMS)}
	var out strings.Builder
	if r.RunID != "" {
		fmt.Fprintf(&out, "run %s: %s (%s)\n", r.RunID, r.Verdict, r.Reason)
	}
	if faults := faultsText(r, ""); faults != "–" {
		fmt.Fprintf(&out, "faults: %s\n", faults)
	}
	if r.FromCorpus {
		out.WriteString("re-run first from the failing-seed corpus: an earlier suite with the same run flags saw this case fail\n")
	}
	fmt.Fprintf(&out, "reproduce: %s\n", r.Reproduce)
	tc.SystemOut = out.String()
	switch {
	case r.Error != "":
		tc.Error = &junitProblem{Message: r.Reason, Type: "harness", Body: "the harness could not run this case: " + r.Error + "\nreproduce: " + r.Reproduce + "\n"}
	case r.Verdict == history.VerdictFail:
		tc.Failure = &junitProblem{Message: r.Reason, Type: history.VerdictFail, Body: details(r)}
	case r.Verdict != history.VerdictPass:
		tc.Skipped = &junitProblem{Message: "unknown: " + r.Reason}
	}
	return tc
}

// details is a failed run's evidence: the invariants that did not hold,
// the faults, and how to run it again.
func details(r suite.RunResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %s: %s\n", r.RunID, r.Reason)
	for _, inv := range r.Invariants {
		if inv.Verdict != history.VerdictPass {
			fmt.Fprintf(&b, "invariant %s (%s): %s: %s\n", inv.Name, inv.Kind, inv.Verdict, inv.Detail)
		}
	}
	for _, f := range r.Faults {
		met := "met"
		if !f.Met {
			met = "not met"
		}
		fmt.Fprintf(&b, "fault %s: applied %t, %s", f.Spec, f.Applied, met)
		if f.MetDetail != "" {
			fmt.Fprintf(&b, " (%s)", f.MetDetail)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "attempts %d, steps completed %d, history digest %s\n", r.Attempts, r.StepsCompleted, r.HistoryDigest)
	fmt.Fprintf(&b, "reproduce: %s\n", r.Reproduce)
	return b.String()
}

func seconds(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64) }

func ratio(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
