package report_test

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/report"
	"github.com/overnight-dev/overnight/harness/suite"
	"github.com/overnight-dev/overnight/reflect"
)

// windowWidth is the browser window the reports must fit: a laptop's.
const windowWidth = 1400

// nightlySuite is a suite's result as a nightly CI gate's reads: several
// scenarios given by long paths, three agents, five seeds (pass^k up to
// k=5), runs that did not pass with the faults drawn for each, corpus
// cases, and reproducing commands as long as a CI's: a state dir, a random
// schedule narrowed to some kinds, a model, limits, or several --fault
// flags.
func nightlySuite() *suite.Result {
	scenarios := []suite.ScenarioRef{
		{Name: "checkout-with-approvals-and-retries", Source: "./examples/scenarios/payments/checkout-with-approvals-and-retries.yaml"},
		{Name: "log-optimisation-across-the-microservice-fleet", Source: "./scenarios/fleet/log-optimisation-across-the-microservice-fleet.yaml"},
		{Name: "deploy-v2", Source: "deploy-v2"},
	}
	agents := []string{"default", "naive-restarter", "cautious-retrier-with-backoff"}
	for i := range scenarios {
		scenarios[i].Agents = agents
	}
	res := &suite.Result{Suite: suite.Header{ID: "suite-20261202-020000-0badc0", StartedAt: time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC), WallMS: 1_234_567,
		Parallel: 4, Config: suite.Config{RandomFaults: 3, LLM: "openai:gpt-4o-mini", Timeout: 10 * time.Minute, MaxAttempts: 5,
			Extras: map[string]string{"lessons": "none"}},
		Scenarios: scenarios, Seeds: []int64{1, 2, 3, 4, 5}, Plan: "feedfacecafebeef", Cases: 45}}
	applied := int64(97_380_000)
	drawn := []history.FaultResult{
		{Kind: "kill", Spec: "kill@step:3", At: "step:3", Applied: true, AppliedVirtualMS: &applied, Attempt: 1, Met: true},
		{Kind: "blackhole", Spec: "blackhole@t:1d2h3m/45m", At: "t:1d2h3m", Applied: true, AppliedVirtualMS: &applied, Attempt: 2, Met: true},
		{Kind: "api-version", Spec: "api-version:v2@effect:3", At: "effect:3"},
	}
	for si, s := range scenarios {
		for ai, agent := range agents {
			for seed := int64(1); seed <= 5; seed++ {
				r := suite.RunResult{Scenario: s.Name, Agent: agent, Seed: seed, RunID: fmt.Sprintf("20261202-02%02d%02d-%06x", si*3+ai, seed, seed*7919),
					Verdict: history.VerdictPass, Reason: "the agent reported done; all 6 invariants hold", Attempts: 2, StepsCompleted: 5,
					WallMS: 20_000 + seed, Faults: drawn, Invariants: []history.InvariantResult{}, Counted: true}
				switch (int(seed) + si + ai) % 4 {
				case 0:
					r.Verdict, r.Reason = history.VerdictFail, "invariant no-duplicate-effects failed: cloud.create_network prod-net-eu-west-1 created 2 times (keys step-1/0 and step-1/0 again after the kill of attempt 1)"
				case 1:
					if seed == 5 {
						r.Verdict, r.Reason = history.VerdictUnknown, "timeout: the run did not end within 10m0s (the agent was still sleeping until +3d11h43m virtual)"
					}
				}
				r.FromCorpus = r.Verdict != history.VerdictPass && seed%2 == 0
				r.Reproduce = fmt.Sprintf("overnight --state /var/lib/ci/overnight/nightly-chaos-suite-state run %s --seed %d --agent %s "+
					"--chaos random --chaos-faults 3 --chaos-kinds kill,restart,blackhole,api-version,llm-error --llm openai:gpt-4o-mini --timeout 10m0s --max-attempts 5 --lessons none",
					s.Source, seed, agent)
				if si == 2 {
					r.Faults = []history.FaultResult{drawn[0], {Kind: "restart", Spec: "restart@effect:2:after", At: "effect:2:after", Applied: true, AppliedVirtualMS: &applied, Attempt: 1, Met: true}}
					r.Reproduce = fmt.Sprintf("overnight --state /var/lib/ci/overnight/nightly-chaos-suite-state run deploy-v2 --seed %d --agent %s "+
						"--fault kill@step:3 --fault restart@effect:2:after --fault blackhole@t:1d2h3m/45m --fault 'llm-error:rate_limit@llm:2' --fault api-version:v2@effect:3 --lessons none", seed, agent)
				}
				res.Runs = append(res.Runs, r)
			}
		}
	}
	extra := res.Runs[3]
	extra.Seed, extra.RunID, extra.Counted, extra.FromCorpus, extra.Verdict = 42, "20261202-015959-00002a", false, true, history.VerdictFail
	res.Runs = append([]suite.RunResult{extra}, res.Runs...)
	res.Corpus = &suite.CorpusSummary{Rerun: 9, StillFail: 9, Added: 7}
	return judged(res, "pass^3>=0.9 && unknown==0")
}

// nightlyRun is the run fixture with what a CI's run carries: a scenario
// given by a long path, an agent variant, a model, and several faults.
func nightlyRun() *history.Full {
	f := runFixture()
	rec := &f.Run.Record
	rec.Source, rec.Agent, rec.LLM = "./examples/scenarios/payments/checkout-with-approvals-and-retries.yaml", "cautious-retrier-with-backoff", "openai:gpt-4o-mini"
	rec.Faults = []string{"kill@step:2", "api-version:v2@step:3", "blackhole@every:1h/5m", "restart@effect:2:after", "llm-error:rate_limit@llm:2", "clock-jump:1d@t:2d"}
	return f
}

var _ = Describe("the reports in a browser window 1,400 px wide", Label("browser"), func() {
	It("fit it: the page never scrolls sideways and no reproducing command wraps — the suite's report, a run's and the reflection report", func(ctx SpecContext) {
		browser := harnesstest.Chromium(ctx, GinkgoT())
		dir := GinkgoT().TempDir()
		var suitePage, runPage, reflectPage bytes.Buffer
		nightly := nightlySuite()
		Expect(report.SuiteHTML(&suitePage, nightly, report.SuiteOptions{RunLink: func(id string) string { return "report-runs/" + id + ".html" }})).To(Succeed())
		Expect(report.RunHTML(&runPage, nightlyRun(), report.RunOptions{})).To(Succeed())
		Expect(reflect.FromHistory(nightlyRun()).WriteHTML(&reflectPage)).To(Succeed())

		var problems []string
		for _, p := range []struct {
			name     string
			page     []byte
			commands int // reproducing commands it shows, at least
		}{{"the suite's report", suitePage.Bytes(), len(nightly.Failed())}, {"a run's report", runPage.Bytes(), 1}, {"the reflection report", reflectPage.Bytes(), 0}} {
			l := harnesstest.MeasureLayout(ctx, GinkgoT(), browser, dir, p.page, windowWidth)
			Expect(l.WindowWidth).To(Equal(windowWidth), "%s: the window's width", p.name)
			Expect(len(l.Commands)).To(BeNumerically(">=", p.commands), "%s: its reproducing commands are measured", p.name)
			if o := l.Overflows(); o != "" {
				problems = append(problems, p.name+":\n"+o)
			}
		}
		if len(problems) > 0 {
			Fail(strings.Join(problems, "\n\n"))
		}
	}, NodeTimeout(10*time.Minute))
})
