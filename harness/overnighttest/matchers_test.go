package overnighttest_test

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/overnighttest"
	"github.com/overnight-dev/overnight/harness/suite"
	"github.com/overnight-dev/overnight/scenarios"
)

// Hand-made results, as the harness writes them (from real runs of deploy).

func killFault(met bool) harness.FaultResult {
	f := harness.FaultResult{Kind: "kill", Spec: "kill@step:3", At: "step:3", Applied: true, Attempt: 1, Met: met,
		MetDetail: "attempt 1's container was killed"}
	if !met {
		f.MetDetail = "attempt 1's container was killed, but no later attempt resumed from a checkpoint"
	}
	return f
}

func invariants(dupes bool) []harness.InvariantResult {
	nd := harness.InvariantResult{Name: "no-duplicate-effects", Kind: "always", Verdict: "pass", Detail: "no resource was created twice"}
	if dupes {
		nd.Verdict, nd.Detail = "fail", `network "prod-net" created 2 times (net-1, net-2, by u/1, u/4)`
	}
	return []harness.InvariantResult{nd, {Name: "goal-reached", Kind: "eventually", Verdict: "pass", Detail: "api.example.com -> svc-1"}}
}

func passing() *harness.Result {
	return &harness.Result{RunID: "r-pass", Scenario: "deploy", Seed: 1, Verdict: "pass", Reason: "the agent reported done; all 5 invariants hold",
		Attempts: 2, StepsCompleted: 5, Faults: []harness.FaultResult{killFault(true)}, Invariants: invariants(false)}
}

func naive() *harness.Result {
	return &harness.Result{RunID: "r-naive", Scenario: "deploy", Agent: "naive", Seed: 1, Verdict: "fail",
		Reason: "the agent reported done; no-duplicate-effects fail", Attempts: 2, StepsCompleted: 5,
		Faults: []harness.FaultResult{killFault(true)}, Invariants: invariants(true)}
}

func suiteRun(seed int64, verdict string) suite.RunResult {
	r := suite.RunResult{Scenario: "deploy", Agent: "default", Seed: seed, RunID: fmt.Sprintf("r-%s-%d", verdict, seed), Verdict: verdict,
		Attempts: 1, StepsCompleted: 5, Counted: true, Faults: []harness.FaultResult{killFault(verdict == "pass")}, Invariants: invariants(false),
		Reproduce: fmt.Sprintf("overnight run deploy --seed %d --chaos random --chaos-faults 3 --lessons none", seed)}
	if verdict == "pass" {
		r.Reason = "the agent reported done; all 5 invariants hold"
	} else {
		r.Reason = "the agent never finished"
	}
	return r
}

// trials: seeds 1..5, seeds 2 and 4 failing.
func trials() *suite.Result {
	return &suite.Result{Runs: []suite.RunResult{suiteRun(1, "pass"), suiteRun(2, "fail"), suiteRun(3, "pass"), suiteRun(4, "fail"), suiteRun(5, "pass")}}
}

// judge runs a matcher as Expect(actual).To(m) and NotTo(m) do, and
// returns its outcome and both messages.
func judge(m types.GomegaMatcher, actual any) (bool, string, string) {
	ok, err := m.Match(actual)
	Expect(err).NotTo(HaveOccurred())
	return ok, m.FailureMessage(actual), m.NegatedFailureMessage(actual)
}

var _ = Describe("the matchers", func() {
	Describe("Pass", func() {
		It("says why a run did not pass: verdict and reason, the failing invariant's detail, how to reproduce it", func() {
			ok, msg, _ := judge(overnighttest.Pass(), naive())
			Expect(ok).To(BeFalse())
			Expect(msg).To(Equal(`Expected run r-naive (deploy, seed 1, agent naive) to pass, but its verdict is fail
  verdict: fail after 2 attempts, 5 steps done: the agent reported done; no-duplicate-effects fail
  invariant no-duplicate-effects (always) fail: network "prod-net" created 2 times (net-1, net-2, by u/1, u/4)
  reproduce: overnight run deploy --seed 1 --agent naive --fault kill@step:3`))
		})

		It("says, negated, that the run passed, and how to run it again", func() {
			ok, _, neg := judge(overnighttest.Pass(), passing())
			Expect(ok).To(BeTrue())
			Expect(neg).To(Equal(`Expected run r-pass (deploy, seed 1) not to pass, but it passed
  verdict: pass after 2 attempts, 5 steps done: the agent reported done; all 5 invariants hold
  reproduce: overnight run deploy --seed 1 --fault kill@step:3`))
		})

		It("never counts an unknown verdict as a pass", func() {
			r := passing()
			r.Verdict, r.Reason = "unknown", "the run hit its wall-clock limit (2m)"
			Expect(r).NotTo(overnighttest.Pass())
		})

		It("uses the reproducing command the helper built, and says how to reproduce a scenario given in Go", func() {
			scen, err := scenarios.FromValue(map[string]any{"apiVersion": "overnight/v1", "kind": "Scenario", "name": "mine",
				"world": "cloud", "agent": map[string]any{"builtin": "deployer"}})
			Expect(err).NotTo(HaveOccurred())
			res := &overnighttest.Result{Result: naive(), Spec: scen, InMemory: true,
				Reproduce: "overnight run mine.yaml --seed 1 --agent naive --fault kill@step:3 --lessons none"}
			ok, msg, _ := judge(overnighttest.Pass(), res)
			Expect(ok).To(BeFalse())
			Expect(msg).To(HaveSuffix(`
  reproduce: overnight run mine.yaml --seed 1 --agent naive --fault kill@step:3 --lessons none
  (scenario mine was given in Go: save its YAML, Spec.Raw, as mine.yaml to reproduce)`))
		})

		It("asks it of every run of trials, and lists those that did not pass", func() {
			ok, msg, _ := judge(overnighttest.Pass(), trials())
			Expect(ok).To(BeFalse())
			Expect(msg).To(Equal(`Expected every one of the 5 runs of deploy (agent default), seeds 1-5 to pass, but 2 did not:
  - run r-fail-2 (deploy, seed 2)
      verdict: fail after 1 attempt, 5 steps done: the agent never finished
      fault kill@step:3 applied, not met: attempt 1's container was killed, but no later attempt resumed from a checkpoint
      reproduce: overnight run deploy --seed 2 --chaos random --chaos-faults 3 --lessons none
  - run r-fail-4 (deploy, seed 4)
      verdict: fail after 1 attempt, 5 steps done: the agent never finished
      fault kill@step:3 applied, not met: attempt 1's container was killed, but no later attempt resumed from a checkpoint
      reproduce: overnight run deploy --seed 4 --chaos random --chaos-faults 3 --lessons none`))
		})

		It("lists ten runs in full and counts the rest", func() {
			res := &suite.Result{}
			for seed := int64(1); seed <= 13; seed++ {
				r := suiteRun(seed, "fail")
				r.Reproduce = "overnight run deploy"
				res.Runs = append(res.Runs, r)
			}
			_, msg, _ := judge(overnighttest.Pass(), res)
			Expect(strings.Count(msg, "  - run ")).To(Equal(10))
			Expect(msg).To(HaveSuffix("  (and 3 more: seeds 11-13)"))
		})

		It("is what Expect reports", func() {
			failure := InterceptGomegaFailure(func() { Expect(naive()).To(overnighttest.Pass()) })
			Expect(failure).To(MatchError(ContainSubstring("reproduce: overnight run deploy --seed 1 --agent naive")))
		})

		It("refuses what is not a run's result", func() {
			_, err := overnighttest.Pass().Match("deploy")
			Expect(err).To(MatchError(ContainSubstring("Pass() expects a run's or trials' result (*overnighttest.Result, *overnighttest.Trials, *harness.Result, suite.RunResult or *suite.Result), got:\n    <string>: deploy")))
			_, err = overnighttest.Pass().Match((*overnighttest.Result)(nil))
			Expect(err).To(MatchError(ContainSubstring("Pass() expects")))
			_, err = overnighttest.Pass().Match(&suite.Result{})
			Expect(err).To(MatchError("Pass(): the trials hold no runs"))
		})
	})

	Describe("HoldInvariant", func() {
		It("says where the invariant failed and why", func() {
			ok, msg, _ := judge(overnighttest.HoldInvariant("no-duplicate-effects"), naive())
			Expect(ok).To(BeFalse())
			Expect(msg).To(Equal(`Expected invariant no-duplicate-effects to hold in run r-naive (deploy, seed 1, agent naive), but it failed
  verdict: fail after 2 attempts, 5 steps done: the agent reported done; no-duplicate-effects fail
  invariant no-duplicate-effects (always) fail: network "prod-net" created 2 times (net-1, net-2, by u/1, u/4)
  reproduce: overnight run deploy --seed 1 --agent naive --fault kill@step:3`))
		})

		It("says, negated, that it held, with its detail", func() {
			ok, _, neg := judge(overnighttest.HoldInvariant("no-duplicate-effects"), passing())
			Expect(ok).To(BeTrue())
			Expect(neg).To(HavePrefix("Expected invariant no-duplicate-effects to be violated in run r-pass (deploy, seed 1), but it held: no resource was created twice\n  verdict: pass"))
			Expect(neg).To(ContainSubstring("reproduce: overnight run deploy --seed 1 --fault kill@step:3"))
		})

		It("asks it of every run of trials", func() {
			res := trials()
			res.Runs[3].Invariants = invariants(true)
			ok, msg, _ := judge(overnighttest.HoldInvariant("no-duplicate-effects"), res)
			Expect(ok).To(BeFalse())
			Expect(msg).To(HavePrefix("Expected invariant no-duplicate-effects to hold in every one of the 5 runs of deploy (agent default), seeds 1-5, but it failed in 1:\n  - run r-fail-4 (deploy, seed 4)\n"))
			Expect(msg).To(ContainSubstring(`      invariant no-duplicate-effects (always) fail: network "prod-net" created 2 times`))
		})

		It("is neither held nor violated when it was judged unknown, or not at all: an error either way", func() {
			r := passing()
			r.Invariants[0].Verdict, r.Invariants[0].Detail = "unknown", "effect 3's outcome is unknown"
			_, err := overnighttest.HoldInvariant("no-duplicate-effects").Match(r)
			Expect(err).To(MatchError(HavePrefix(`HoldInvariant("no-duplicate-effects"): in run r-pass (deploy, seed 1) the invariant is unknown — neither held nor violated: effect 3's outcome is unknown`)))

			_, err = overnighttest.HoldInvariant("effects-resolved").Match(passing())
			Expect(err).To(MatchError(HavePrefix(`HoldInvariant("effects-resolved"): run r-pass (deploy, seed 1) judged no invariant "effects-resolved" (it judged: no-duplicate-effects, goal-reached)`)))
		})

		It("refuses an invariant that does not exist", func() {
			_, err := overnighttest.HoldInvariant("no-duplicates").Match(passing())
			Expect(err).To(MatchError(And(ContainSubstring(`there is no invariant "no-duplicates"`), ContainSubstring("no-duplicate-effects"))))
		})
	})

	Describe("SurviveFaults", func() {
		It("succeeds when the run passed and met every fault", func() {
			ok, _, neg := judge(overnighttest.SurviveFaults(), passing())
			Expect(ok).To(BeTrue())
			Expect(neg).To(HavePrefix("Expected run r-pass (deploy, seed 1) not to survive its faults, but it passed and met every one: kill@step:3\n"))
		})

		It("names the faults not met and why", func() {
			r := passing()
			r.Verdict, r.Reason = "fail", "the agent never finished"
			r.Faults = append(r.Faults, harness.FaultResult{Kind: "api-version", Spec: "api-version:v2@effect:9", Applied: false},
				harness.FaultResult{Kind: "partition", Spec: "partition@step:2/1m", Applied: false, Error: "the sandbox has no network to cut"})
			ok, msg, _ := judge(overnighttest.SurviveFaults(), r)
			Expect(ok).To(BeFalse())
			Expect(msg).To(Equal(`Expected run r-pass (deploy, seed 1) to survive its faults (pass, with each applied and met), but its verdict is fail and 2 of its 3 faults were not met
  verdict: fail after 2 attempts, 5 steps done: the agent never finished
  fault api-version:v2@effect:9 never fired (the run ended before its trigger)
  fault partition@step:2/1m fired but could not be injected: the sandbox has no network to cut
  reproduce: overnight run deploy --seed 1 --fault kill@step:3 --fault api-version:v2@effect:9 --fault partition@step:2/1m`))
		})

		It("fails a passing run whose fault was not met", func() {
			r := passing()
			r.Faults = []harness.FaultResult{killFault(false)}
			ok, msg, _ := judge(overnighttest.SurviveFaults(), r)
			Expect(ok).To(BeFalse())
			Expect(msg).To(ContainSubstring("but its fault was not met\n"))
			Expect(msg).To(ContainSubstring("fault kill@step:3 applied, not met: attempt 1's container was killed, but no later attempt resumed"))
		})

		It("is an error for a run with no fault: nothing was survived", func() {
			r := passing()
			r.Faults = nil
			_, err := overnighttest.SurviveFaults().Match(r)
			Expect(err).To(MatchError(HavePrefix("SurviveFaults(): run r-pass (deploy, seed 1) had no fault scheduled, so there is nothing to survive")))
		})

		It("rebuilds the faults of an expanded schedule as they were given", func() {
			r := passing()
			r.Faults = []harness.FaultResult{
				{Kind: "kill", Spec: "kill@t:1h", From: "kill@every:1h", Applied: true, Met: true},
				{Kind: "kill", Spec: "kill@t:2h", From: "kill@every:1h", Applied: false},
			}
			_, msg, _ := judge(overnighttest.SurviveFaults(), r)
			Expect(msg).To(HaveSuffix("reproduce: overnight run deploy --seed 1 --fault kill@every:1h"))
		})
	})

	Describe("HavePassK", func() {
		It("judges pass^k exactly, as a suite's requirement does", func() {
			// 3 of 5: pass^2 = C(3,2)/C(5,2) = 0.3 exactly.
			Expect(trials()).To(overnighttest.HavePassK(2, 0.3))
			Expect(trials()).NotTo(overnighttest.HavePassK(2, 0.31))
			Expect(trials()).To(overnighttest.HavePassK(1, 0.6))
		})

		It("shows pass^k, each group's tally, and the runs that did not pass", func() {
			ok, msg, _ := judge(overnighttest.HavePassK(3, 0.9), trials())
			Expect(ok).To(BeFalse())
			Expect(msg).To(HavePrefix(`Expected pass^3 >= 0.9 over the 5 runs of deploy (agent default), seeds 1-5, but pass^3 is 0.1000
  deploy/default: pass^3 0.1000 (3 of 5 passed, 2 failed, 0 unknown)
the runs that did not pass:
  - run r-fail-2 (deploy, seed 2)
      verdict: fail after 1 attempt, 5 steps done: the agent never finished
`))
			Expect(msg).To(HaveSuffix("      reproduce: overnight run deploy --seed 4 --chaos random --chaos-faults 3 --lessons none"))
		})

		It("says, negated, what pass^k is", func() {
			ok, _, neg := judge(overnighttest.HavePassK(1, 0.5), trials())
			Expect(ok).To(BeTrue())
			Expect(neg).To(Equal(`Expected pass^1 < 0.5 over the 5 runs of deploy (agent default), seeds 1-5, but pass^1 is 0.6000
  deploy/default: pass^1 0.6000 (3 of 5 passed, 2 failed, 0 unknown)`))
		})

		It("takes the helper's trials", func() {
			t := &overnighttest.Trials{Result: trials()}
			Expect(t).To(overnighttest.HavePassK(1, 0.6))
			Expect(t).NotTo(overnighttest.Pass())
		})

		It("counts an unknown run as a trial, never as a pass", func() {
			res := trials()
			res.Runs[0].Verdict = "unknown"
			Expect(res).To(overnighttest.HavePassK(1, 0.4))
			Expect(res).NotTo(overnighttest.HavePassK(1, 0.41))
		})

		It("leaves the result it judged as it was", func() {
			res := trials()
			Expect(res).NotTo(overnighttest.HavePassK(2, 0.9))
			Expect(res.Groups).To(BeNil())
			Expect(res.Summary).To(Equal(suite.Summary{}))
		})

		It("cannot judge k above the number of trials, one run, or a minimum that is no probability", func() {
			_, err := overnighttest.HavePassK(6, 0.9).Match(trials())
			Expect(err).To(MatchError(ContainSubstring("HavePassK(6, 0.9) cannot judge the 5 runs of deploy (agent default), seeds 1-5: pass^6>=0.9: needs at least 6 trials (seeds) per group, and deploy/default has 5")))
			_, err = overnighttest.HavePassK(1, 0.9).Match(passing())
			Expect(err).To(MatchError(HavePrefix("HavePassK(1, 0.9) judges trials, not one run")))
			_, err = overnighttest.HavePassK(1, 1.5).Match(trials())
			Expect(err).To(MatchError(ContainSubstring("want a minimum between 0 and 1")))
			_, err = overnighttest.HavePassK(0, 0.5).Match(trials())
			Expect(err).To(MatchError(ContainSubstring("at least 1")))
		})
	})
})
