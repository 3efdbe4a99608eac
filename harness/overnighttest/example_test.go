package overnighttest_test

import (
	"context"
	"fmt"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/overnighttest"
	"github.com/overnight-dev/overnight/harness/suite"
)

// The naive deployer, killed after step 3, starts over and creates the
// network twice: the run fails, and the message says why and how to run it
// again. (A result made by hand here; in a suite it is Run's.)
func ExamplePass() {
	res := &harness.Result{RunID: "20260101-120000-ab12cd", Scenario: "deploy", Agent: "naive", Seed: 7,
		Verdict: "fail", Reason: "the agent reported done; no-duplicate-effects fail", Attempts: 2, StepsCompleted: 5,
		Faults: []harness.FaultResult{{Kind: "kill", Spec: "kill@step:3", Applied: true, Met: true}},
		Invariants: []harness.InvariantResult{
			{Name: "no-duplicate-effects", Kind: "always", Verdict: "fail", Detail: `network "prod-net" created 2 times (net-1, net-2)`},
			{Name: "goal-reached", Kind: "eventually", Verdict: "pass", Detail: "api.example.com -> svc-1"},
		}}
	pass := overnighttest.Pass()
	ok, _ := pass.Match(res) // what Expect(res).To(Pass()) does
	fmt.Println(ok)
	fmt.Println(pass.FailureMessage(res))
	// Output:
	// false
	// Expected run 20260101-120000-ab12cd (deploy, seed 7, agent naive) to pass, but its verdict is fail
	//   verdict: fail after 2 attempts, 5 steps done: the agent reported done; no-duplicate-effects fail
	//   invariant no-duplicate-effects (always) fail: network "prod-net" created 2 times (net-1, net-2)
	//   reproduce: overnight run deploy --seed 7 --agent naive --fault kill@step:3
}

// A negative example: the naive agent must be caught creating duplicates.
// Expect(res).NotTo(HoldInvariant(...)) succeeds only on a real violation;
// when the invariant held, the message says so with its detail.
func ExampleHoldInvariant() {
	res := &harness.Result{Scenario: "deploy", Agent: "naive", Seed: 1, Verdict: "pass", Reason: "the agent reported done; all 2 invariants hold",
		Invariants: []harness.InvariantResult{
			{Name: "no-duplicate-effects", Kind: "always", Verdict: "pass", Detail: "no resource was created twice"},
			{Name: "goal-reached", Kind: "eventually", Verdict: "pass", Detail: "api.example.com -> svc-1"},
		}}
	held := overnighttest.HoldInvariant("no-duplicate-effects")
	ok, _ := held.Match(res)
	fmt.Println(ok)
	fmt.Println(held.NegatedFailureMessage(res))
	// Output:
	// true
	// Expected invariant no-duplicate-effects to be violated in the run of deploy, seed 1, agent naive, but it held: no resource was created twice
	//   verdict: pass: the agent reported done; all 2 invariants hold
	//   reproduce: overnight run deploy --seed 1 --agent naive
}

// A run survives its faults when it passed and each fault was applied and
// met: here the API moved to v2, and the agent never sent a request under
// it.
func ExampleSurviveFaults() {
	res := &overnighttest.Result{
		Result: &harness.Result{RunID: "20260101-120000-ef34ab", Scenario: "deploy", Seed: 3, Verdict: "pass",
			Reason: "the agent reported done; all 4 invariants hold", Attempts: 1, StepsCompleted: 5,
			Faults: []harness.FaultResult{{Kind: "api-version", Spec: "api-version:v2@effect:5", Applied: true, Met: false,
				MetDetail: "no effect was sent under the new API"}}},
		Reproduce: "overnight run deploy --seed 3 --fault api-version:v2@effect:5 --lessons none",
	}
	survive := overnighttest.SurviveFaults()
	ok, _ := survive.Match(res)
	fmt.Println(ok)
	fmt.Println(survive.FailureMessage(res))
	// Output:
	// false
	// Expected run 20260101-120000-ef34ab (deploy, seed 3) to survive its faults (pass, with each applied and met), but its fault was not met
	//   verdict: pass after 1 attempt, 5 steps done: the agent reported done; all 4 invariants hold
	//   fault api-version:v2@effect:5 applied, not met: no effect was sent under the new API
	//   reproduce: overnight run deploy --seed 3 --fault api-version:v2@effect:5 --lessons none
}

// pass^k over trials (RunTrials, or a suite's result): 4 of 5 seeds
// passed, so pass^3 = C(4,3)/C(5,3) = 0.4, below the 0.9 asked for.
func ExampleHavePassK() {
	res := &suite.Result{}
	for seed := int64(1); seed <= 5; seed++ {
		run := suite.RunResult{Scenario: "deploy", Agent: "default", Seed: seed, Verdict: "pass", Counted: true,
			Reproduce: fmt.Sprintf("overnight run deploy --seed %d --chaos random --chaos-faults 3 --lessons none", seed)}
		if seed == 4 {
			run.Verdict, run.Reason = "fail", "crash loop: 10 attempts ended without progress"
		}
		res.Runs = append(res.Runs, run)
	}
	passK := overnighttest.HavePassK(3, 0.9)
	ok, _ := passK.Match(res)
	fmt.Println(ok)
	fmt.Println(passK.FailureMessage(res))
	// Output:
	// false
	// Expected pass^3 >= 0.9 over the 5 runs of deploy (agent default), seeds 1-5, but pass^3 is 0.4000
	//   deploy/default: pass^3 0.4000 (4 of 5 passed, 1 failed, 0 unknown)
	// the runs that did not pass:
	//   - the run of deploy, seed 4
	//       verdict: fail: crash loop: 10 attempts ended without progress
	//       reproduce: overnight run deploy --seed 4 --chaos random --chaos-faults 3 --lessons none
}

// Run the built-in deploy scenario with its agent SIGKILLed once step 3 is
// durable. It needs a Docker engine, and an overnight-sandbox binary for
// the sandboxes (make build's bin/overnight-sandbox): in a suite, BuildInitBinary(ctx, GinkgoT()) in BeforeSuite.
// In a Ginkgo spec the checks read
//
//	Expect(res).To(overnighttest.SurviveFaults())
//	Expect(res).To(overnighttest.HoldInvariant("no-duplicate-effects"))
func ExampleRun() {
	ctx := context.Background()
	res, err := overnighttest.Run(ctx, "deploy", overnighttest.Seed(1), overnighttest.Faults("kill@step:3"),
		overnighttest.InitBinary("bin/overnight-sandbox"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Verdict, "after", res.Attempts, "attempts; the world received", len(res.History.Ledger), "requests")
	fmt.Println(res.Reproduce)
}

// Five seeds of deploy under three faults drawn from each seed, run two at
// a time; the trials are judged by pass^k. It needs a Docker engine and an
// overnight binary, as Run does.
func ExampleRunTrials() {
	ctx := context.Background()
	trials, err := overnighttest.RunTrials(ctx, "deploy", overnighttest.Seeds(5),
		overnighttest.ChaosRandom(3), overnighttest.Parallel(2))
	if err != nil {
		fmt.Println(err)
		return
	}
	passK, _ := trials.PassK(3)
	fmt.Printf("pass^3 = %.2f over %d runs\n", passK, trials.Summary.Runs)
	for _, r := range trials.Failed() {
		fmt.Println(r.Verdict, r.Reason, r.Reproduce)
	}
}
