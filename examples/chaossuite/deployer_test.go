package chaossuite_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	ot "github.com/overnight-dev/overnight/harness/overnighttest"
)

// Each Run opens a harness on a temporary state dir, runs the scenario to
// its verdict, and removes the dir and every container, volume and network
// of the run before it returns. The checks are Gomega matchers; a failure
// shows the verdict and its reason, the invariants that failed, the faults
// not met, and the `overnight run` command that reproduces the run.
var _ = Describe("the built-in deployer", func() {
	It("finishes the deployment exactly once when it is killed after step 3", func(ctx SpecContext) {
		res, err := ot.Run(ctx, "deploy", ot.Faults("kill@step:3"), ot.Progress(GinkgoWriter))
		Expect(err).NotTo(HaveOccurred())
		Expect(res).To(ot.SurviveFaults())
		Expect(res).To(ot.HoldInvariant("no-duplicate-effects"))
		Expect(res.Attempts).To(Equal(2), "the attempt killed, and one that resumed from its checkpoint")
	}, SpecTimeout(2*time.Minute))

	// A crash of the harness itself is not tested here: harness-crash
	// SIGKILLs the harness, which in this suite is the test process itself
	// (overnighttest refuses it: ErrHarnessCrash). Test it with the
	// overnight CLI as a child process — overnight run deploy --fault
	// harness-crash@step:3, then overnight resume RUN (see docs/go-api.md).

	It("corrects its requests when the cloud API moves to v2 after step 3", func(ctx SpecContext) {
		res, err := ot.Run(ctx, "deploy", ot.Faults("api-version:v2@step:3"), ot.Progress(GinkgoWriter))
		Expect(err).NotTo(HaveOccurred())
		Expect(res).To(ot.SurviveFaults())
		Expect(res).To(ot.HoldInvariant("no-duplicate-effects"))
	}, SpecTimeout(2*time.Minute))

	It("passes under random chaos: three faults drawn from each of three seeds", func(ctx SpecContext) {
		trials, err := ot.RunTrials(ctx, "deploy", ot.Seeds(3), ot.ChaosRandom(3))
		Expect(err).NotTo(HaveOccurred())
		// pass^3: the chance that three trials drawn from these all pass.
		Expect(trials).To(ot.HavePassK(3, 0.9))
		Expect(trials).To(ot.HoldInvariant("no-duplicate-effects"))
	}, SpecTimeout(3*time.Minute))

	// A negative example: a suite should prove that its checks catch a
	// broken agent. The naive variant does not resume from its checkpoint:
	// killed after step 3, it starts over and creates everything again.
	It("catches the naive variant creating resources twice after a kill", func(ctx SpecContext) {
		res, err := ot.Run(ctx, "deploy", ot.Agent("naive"), ot.Faults("kill@step:3"))
		Expect(err).NotTo(HaveOccurred())
		Expect(res).NotTo(ot.HoldInvariant("no-duplicate-effects"))
		Expect(res).NotTo(ot.Pass())
	}, SpecTimeout(2*time.Minute))
})
