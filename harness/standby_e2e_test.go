package harness_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/docker"
)

// creates is the real engine, noting each sandbox it is asked to create:
// its attempt label, and whether it is a standby.
type creates struct {
	docker.API
	mu       sync.Mutex
	attempts []string // "2" for a cold start of attempt 2, "2 standby" for a standby
}

func (c *creates) ContainerCreate(ctx context.Context, cfg *container.Config, host *container.HostConfig, net *network.NetworkingConfig, p *ocispec.Platform, name string) (container.CreateResponse, error) {
	if a, ok := cfg.Labels[sandbox.LabelAttempt]; ok {
		if slices.ContainsFunc(cfg.Env, func(kv string) bool { return strings.HasPrefix(kv, sandbox.EnvStandby+"=") }) {
			a += " standby"
		}
		c.mu.Lock()
		c.attempts = append(c.attempts, a)
		c.mu.Unlock()
	}
	return c.API.ContainerCreate(ctx, cfg, host, net, p, name)
}

func (c *creates) made() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.attempts)
}

var _ = Describe("standby sandboxes", func() {
	slow := "  slow: {builtin: deployer, args: [--step-delay, 300ms]}\n"

	It("serve the attempts after kills, one kept ahead, and go with the run", func(ctx SpecContext) {
		api := &creates{API: dockerCli}
		h := newHarnessOn(ctx, api, nil) // its cleanup checks that nothing of the state dir is left
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deployWith(slow), Agent: "slow", Faults: faults("kill@step:2", "kill@step:4")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Attempts).To(Equal(3))
		Expect(res.Effects.Duplicates).To(BeZero())
		atts, err := h.Attempts(res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(atts).To(HaveLen(3))
		Expect([]bool{atts[0].Standby, atts[1].Standby, atts[2].Standby}).To(Equal([]bool{false, true, true}),
			"attempt 1 starts cold; 2 and 3 take over the standby started while the one before ran")
		Expect(api.made()).To(Equal([]string{"1", "2 standby", "3 standby", "4 standby"}),
			"one standby ahead at a time; the last, never used, goes with the run")
		for _, a := range atts[1:] {
			Expect(a.FirstResumedAt).NotTo(BeZero())
		}
	}, SpecTimeout(3*time.Minute))

	It("are not started for a run whose schedule ends no attempt, nor with Options.Standby off", func(ctx SpecContext) {
		api := &creates{API: dockerCli}
		h := newHarnessOn(ctx, api, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy()})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(api.made()).To(Equal([]string{"1"}))

		off := &creates{API: dockerCli}
		h = newHarnessWith(ctx, off, nil, harness.Options{Standby: harness.StandbyOff})
		res, err = h.Run(ctx, harness.RunRequest{Scenario: deployWith(slow), Agent: "slow", Faults: faults("kill@step:2")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(off.made()).To(Equal([]string{"1", "2"}))
	}, SpecTimeout(3*time.Minute))
})
