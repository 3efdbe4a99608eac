package harness_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
)

var _ = Describe("warm network namespaces", func() {
	It("give the attempt after a kill a namespace the pool made ready, and go with the harness", func(ctx SpecContext) {
		// Its next attempt starts cold (no standby, which would be made
		// before the holder is ready): the pool is what serves it.
		h := newHarnessWith(ctx, dockerCli, nil, harness.Options{Standby: harness.StandbyOff}) // its cleanup checks that nothing of the state dir is left
		s := deployWith("  slow: {builtin: deployer, args: [--step-delay, 300ms]}\n")
		res, err := h.Run(ctx, harness.RunRequest{Scenario: s, Agent: "slow", Faults: faults("kill@step:3")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Attempts).To(Equal(2))
		hits, misses := harness.NetNSStats(h)
		Expect(hits).To(Equal(1), "attempt 2 joined the holder warmed when the run began")
		Expect(misses).To(Equal(1), "attempt 1 did not wait for it")
		Expect(res.Effects.Duplicates).To(BeZero())
	}, SpecTimeout(3*time.Minute))

	It("that died are given up: the sandbox that took one gets a namespace of its own", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		h.WarmSandboxes(ctx, 1)
		Eventually(h.WarmReady).WithTimeout(time.Minute).Should(Equal(1))
		dead := harness.NetHolders(h)
		Expect(dead).To(HaveLen(1))
		Expect(dockerCli.ContainerKill(ctx, dead[0], "SIGKILL")).To(Succeed())
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy()})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Attempts).To(Equal(1), "the failed start in the dead namespace is not an attempt")
		hits, _ := harness.NetNSStats(h)
		Expect(hits).To(Equal(1), "the run took the dead holder")
		Expect(harness.NetHolders(h)).NotTo(ContainElement(dead[0]), "and the pool gave it up")
	}, SpecTimeout(3*time.Minute))

	It("are not made for a run that starts one sandbox", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy()})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass))
		hits, misses := harness.NetNSStats(h)
		Expect(hits+misses).To(BeZero(), "no pool: nothing was warmed, nothing asked of it")
	}, SpecTimeout(3*time.Minute))
})
