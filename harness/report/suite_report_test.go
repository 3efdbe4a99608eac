package report_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/report"
	"github.com/overnight-dev/overnight/harness/suite"
)

var update = flag.Bool("update", false, "rewrite the golden files of the report formats")

func golden(name string, got []byte) {
	GinkgoHelper()
	path := filepath.Join("testdata", name)
	if *update {
		Expect(os.WriteFile(path, got, 0o644)).To(Succeed())
	}
	want, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred(), "no golden file: run go test ./harness/report -update")
	Expect(string(got)).To(Equal(string(want)), "the %s format changed: if on purpose, rewrite it with -update", name)
}

// fixture is a suite result with every kind of run: passes, a failure with
// its evidence, an unknown one, one the harness could not run, a corpus
// case outside the seeds, and a failed requirement.
func fixture() *suite.Result {
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	inv := func(name, kind, verdict, detail string) history.InvariantResult {
		return history.InvariantResult{Name: name, Kind: kind, Verdict: verdict, Detail: detail}
	}
	ok := []history.InvariantResult{inv("no-duplicate-effects", "always", "pass", "the world shows every resource of a non-idempotent kind created once")}
	killedAt := int64(0)
	kill := history.FaultResult{Kind: "kill", Spec: "kill@step:3", At: "step:3", Applied: true, AppliedVirtualMS: &killedAt, Attempt: 1, Met: true}
	run := func(agent string, seed int64, verdict, reason string) suite.RunResult {
		return suite.RunResult{Scenario: "deploy", Agent: agent, Seed: seed, RunID: "20261202-0900" + string(rune('0'+seed)) + "-" + agent,
			Verdict: verdict, Reason: reason, Attempts: 2, StepsCompleted: 5, WallMS: 900 + seed, VirtualMS: 0,
			HistoryDigest: "d1g35t", Faults: []history.FaultResult{kill}, Invariants: ok, Counted: true,
			Reproduce: "overnight run deploy --seed " + string(rune('0'+seed)) + " --agent " + agent + " --fault kill@step:3"}
	}
	res := &suite.Result{Suite: suite.Header{ID: "suite-20261202-090000-abcdef", StartedAt: at, WallMS: 4321, Parallel: 4,
		Config:    suite.Config{Faults: []string{"kill@step:3"}, Extras: map[string]string{"lessons": "none"}},
		Scenarios: []suite.ScenarioRef{{Name: "deploy", Source: "deploy", SHA256: "5ca1ab1e", Agents: []string{"default", "naive"}}},
		Seeds:     []int64{1, 2, 3}, Plan: "0123456789abcdef", Cases: 6}}
	timedOut := run("default", 3, "unknown", "timeout: the run did not end within 2m0s")
	timedOut.Faults = []history.FaultResult{{Kind: "kill", Spec: "kill@step:3", At: "step:3"}}
	res.Runs = []suite.RunResult{run("default", 1, "pass", "the agent reported done; all 4 invariants hold"),
		run("default", 2, "pass", "the agent reported done; all 4 invariants hold"), timedOut}
	bad := run("naive", 1, "fail", "invariant no-duplicate-effects failed")
	bad.Invariants = []history.InvariantResult{inv("no-duplicate-effects", "always", "fail", "cloud.create_network prod-net created 2 times (keys step-1/0, step-1/0 again after the kill) <&>")}
	applied := int64(0)
	bad.Faults = []history.FaultResult{{Kind: "kill", Spec: "kill@step:3", At: "step:3", Applied: true, AppliedVirtualMS: &applied, Met: true, MetDetail: "the agent was killed after step 3 and a new attempt resumed"}}
	errRun := run("naive", 2, "unknown", "the harness could not run it: cannot reach the Docker engine")
	errRun.Error, errRun.RunID, errRun.Attempts, errRun.Faults = "cannot reach the Docker engine", "", 0, []history.FaultResult{}
	corpus := run("naive", 9, "fail", "invariant no-duplicate-effects failed")
	corpus.Counted, corpus.FromCorpus = false, true
	res.Runs = append(res.Runs, bad, errRun, run("naive", 3, "pass", "the agent reported done; all 4 invariants hold"), corpus)
	res.Errors = []string{"deploy/naive/2: cannot reach the Docker engine"}
	res.Corpus = &suite.CorpusSummary{Rerun: 1, StillFail: 1, Added: 3}
	return judged(res, "pass^2>=0.5 && unknown==0")
}

// judged tallies res and judges it by the requirement expr.
func judged(res *suite.Result, expr string) *suite.Result {
	GinkgoHelper()
	res.Tally()
	q, err := suite.ParseRequirement(expr)
	Expect(err).NotTo(HaveOccurred())
	j := q.Judge(res)
	res.Requirement = &j
	return res
}

var _ = Describe("a suite's reports", func() {
	It("are pinned: JUnit XML, Markdown and JSON", func() {
		res := fixture()
		var junit, md, js bytes.Buffer
		Expect(report.JUnit(&junit, res)).To(Succeed())
		Expect(report.Markdown(&md, res)).To(Succeed())
		Expect(report.JSON(&js, res)).To(Succeed())
		golden("suite.junit.xml", junit.Bytes())
		golden("suite.md", md.Bytes())
		golden("suite.json", js.Bytes())
	})

	It("show each run's faults in its row, and say what a corpus case is where one is listed", func() {
		res := fixture()
		var junit, md, html, js bytes.Buffer
		Expect(report.JUnit(&junit, res)).To(Succeed())
		Expect(report.Markdown(&md, res)).To(Succeed())
		Expect(report.SuiteHTML(&html, res, report.SuiteOptions{})).To(Succeed())
		Expect(report.JSON(&js, res)).To(Succeed())

		Expect(md.String()).To(ContainSubstring("| deploy | default | 3 | unknown | `kill@step:3` (never fired) | timeout"))
		Expect(md.String()).To(ContainSubstring("| deploy | naive | 9 | fail (corpus case, not counted †) | `kill@step:3` |"))
		Expect(md.String()).To(ContainSubstring("\n† Corpus case: re-run first from the failing-seed corpus"))
		Expect(html.String()).To(ContainSubstring(`<td><code class="spec muted">kill@step:3</code> <small class="muted">never fired</small></td>`))
		Expect(html.String()).To(ContainSubstring(`fail<br><small class="muted">corpus case, not counted †</small>`))
		Expect(html.String()).To(ContainSubstring("† Corpus case: re-run first from the failing-seed corpus"))
		Expect(html.String()).NotTo(ContainSubstring("(corpus)"))
		Expect(junit.String()).To(ContainSubstring("faults: kill@step:3 (never fired)&#xA;"))
		Expect(junit.String()).To(ContainSubstring("re-run first from the failing-seed corpus"))
		var decoded suite.Result
		Expect(json.Unmarshal(js.Bytes(), &decoded)).To(Succeed())
		for _, r := range decoded.Runs {
			if r.Error == "" {
				Expect(r.Faults).To(HaveLen(1), "run %s", r.RunID)
				Expect(r.Faults[0].Spec).To(Equal("kill@step:3"), "the JSON's runs carry their faults' canonical specs")
			}
		}
	})

	It("give JUnit that an independent parser (Python's junitparser) reads as the suite ran", func(ctx SpecContext) {
		python := junitParser(ctx)
		var junit bytes.Buffer
		Expect(report.JUnit(&junit, fixture())).To(Succeed())
		file := filepath.Join(GinkgoT().TempDir(), "out.xml")
		Expect(os.WriteFile(file, junit.Bytes(), 0o644)).To(Succeed())
		script := `
import sys
from junitparser import JUnitXml, Failure, Error, Skipped
xml = JUnitXml.fromfile(sys.argv[1])
for s in xml:
    for c in s:
        kinds = [type(r).__name__ for r in c.result]
        msg = c.result[0].message if c.result else ""
        print("%s|%s|%s|%s|%.3f|%s" % (s.name, c.classname, c.name, ",".join(kinds) or "passed", c.time, msg))
print("totals|%d|%d|%d|%d" % (xml.tests, xml.failures, xml.errors, xml.skipped))
`
		out, err := exec.CommandContext(ctx, python, "-c", script, file).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(Equal(`deploy/default|overnight.deploy.default|seed 1|passed|0.901|
deploy/default|overnight.deploy.default|seed 2|passed|0.902|
deploy/default|overnight.deploy.default|seed 3|Skipped|0.903|unknown: timeout: the run did not end within 2m0s
deploy/naive|overnight.deploy.naive|seed 1|Failure|0.901|invariant no-duplicate-effects failed
deploy/naive|overnight.deploy.naive|seed 2|Error|0.902|the harness could not run it: cannot reach the Docker engine
deploy/naive|overnight.deploy.naive|seed 3|passed|0.903|
corpus|overnight.deploy.naive|seed 9|Failure|0.909|invariant no-duplicate-effects failed
requirement|overnight.requirement|pass^2>=0.5|Failure|0.000|pass^2>=0.5 does not hold: pass^2 is 0.1667; deploy/default: 0.3333 (2 of 3 passed, 0 failed, 1 unknown), deploy/naive: 0.0000 (1 of 3 passed, 1 failed, 1 unknown)
requirement|overnight.requirement|unknown==0|Failure|0.000|unknown==0 does not hold: unknown is 2; deploy/default: 1 (2 of 3 passed, 0 failed, 1 unknown), deploy/naive: 1 (1 of 3 passed, 1 failed, 1 unknown)
totals|9|4|1|1
`))
	}, NodeTimeout(5*time.Minute))
})

// junitParser returns a Python that has Debian's python3-junitparser,
// installing the package when it is missing and this is root (as CI is).
func junitParser(ctx context.Context) string {
	GinkgoHelper()
	const python = "/usr/bin/python3"
	has := func() bool { return exec.CommandContext(ctx, python, "-c", "import junitparser").Run() == nil }
	if has() {
		return python
	}
	if os.Geteuid() != 0 {
		Skip("python3-junitparser is not installed, and installing it (apt-get) needs root")
	}
	Expect(harnesstest.AptInstall(ctx, "python3-junitparser")).To(Succeed())
	Expect(has()).To(BeTrue(), "python3-junitparser installed, yet %s cannot import it", python)
	return python
}
