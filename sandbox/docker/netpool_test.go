package docker_test

import (
	"github.com/overnight-dev/overnight/sandbox/docker"

	"context"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox"
)

var _ = Describe("network namespace holders", func() {
	// warmOne warms pool to one holder and takes it.
	warmOne := func(pool *docker.NetPool) string {
		GinkgoHelper()
		pool.Warm(1)
		var h string
		Eventually(func() string { h = pool.Take(); return h }).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).ShouldNot(BeEmpty())
		return h
	}
	gone := func(ctx context.Context, id string) bool {
		_, err := cli.ContainerInspect(ctx, id)
		return cerrdefs.IsNotFound(err)
	}

	It("lend sandboxes a warm namespace, one at a time — loopback only, nothing the last one left listening — and leave nothing behind", func(ctx SpecContext) {
		e := newEngine()
		pool := e.NewNetPool(image)
		DeferCleanup(func(ctx context.Context) { Expect(pool.Close(ctx)).To(Succeed()) })
		Expect(pool.Take()).To(BeEmpty(), "nothing is warm until asked")

		h := warmOne(pool)
		info, err := cli.ContainerInspect(ctx, h)
		Expect(err).NotTo(HaveOccurred())
		Expect(info.State.Running).To(BeTrue())
		Expect(info.Config.Labels).To(HaveKeyWithValue(docker.LabelRole, docker.RoleNetNS))
		Expect(info.Config.Labels).NotTo(HaveKey(sandbox.LabelRun), "no run's: the run reaper never takes it")
		Expect(string(info.HostConfig.NetworkMode)).To(Equal("none"))
		Expect(info.HostConfig.CapDrop).To(ContainElement("ALL"))

		// A sandbox that joins it sees loopback only, and listens there.
		spec := agentSpec("listen", "7071")
		spec.NetNS = h
		first := start(ctx, e, spec)
		joined, err := cli.ContainerInspect(ctx, first.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(joined.HostConfig.NetworkMode)).To(Equal("container:" + h))
		Eventually(func() string { return stdoutOf(ctx, e, first.ID) }).WithTimeout(30 * time.Second).Should(Equal("listening\n"))
		probe := agentSpec("netns")
		probe.RunID = first.RunID
		probe.Attempt = 2
		probe.NetNS = h
		code, out, _ := runToEnd(ctx, e, probe)
		Expect(code).To(Equal(0))
		ns, ifaces, _ := strings.Cut(strings.TrimSpace(out), " ")
		Expect(ifaces).To(Equal("lo"), "no network but loopback")
		Expect(ns).To(HavePrefix("net:["))

		// Gone with the sandbox: what it listened on.
		Expect(e.Remove(ctx, first.ID)).To(Succeed())
		Expect(e.Remove(ctx, docker.ContainerName(probe.RunID, probe.Attempt))).To(Succeed())
		pool.Return(h)
		again := pool.Take()
		Expect(again).To(Equal(h), "the holder went back to the pool and serves the next sandbox")
		next := agentSpec("dial", "7071")
		next.NetNS = again
		code, out, _ = runToEnd(ctx, e, next)
		Expect(code).To(Equal(0))
		Expect(out).To(Equal("closed\n"), "nothing the last sandbox left listening")
		code, out, _ = runToEnd(ctx, e, func() docker.ContainerSpec { s := agentSpec("netns"); s.NetNS = again; return s }())
		Expect(code).To(Equal(0))
		Expect(strings.Fields(out)[0]).To(Equal(ns), "the same namespace: no new one was made")

		// A sandbox of its own gets a namespace of its own.
		code, out, _ = runToEnd(ctx, e, agentSpec("netns"))
		Expect(code).To(Equal(0))
		Expect(strings.Fields(out)[0]).NotTo(Equal(ns))

		Expect(pool.Close(ctx)).To(Succeed())
		Expect(gone(ctx, h)).To(BeTrue(), "Close removes its holders")
		Expect(pool.Take()).To(BeEmpty())
	}, SpecTimeout(3*time.Minute))

	It("refuse a sandbox that would join a network and a holder", func(ctx SpecContext) {
		spec := agentSpec("netns")
		spec.Network, spec.NetNS = "some-network", "some-holder"
		_, err := newEngine().Create(ctx, spec)
		Expect(err).To(MatchError(sandbox.ErrInvalidSpec))
	})

	It("left by a process that died are reaped by its state dir's next one, and only they", func(ctx SpecContext) {
		e := newEngine()
		dead := e.NewNetPool(image) // never closed: its process "died"
		left := warmOne(dead)
		live := e.NewNetPool(image)
		DeferCleanup(func(ctx context.Context) { Expect(live.Close(ctx)).To(Succeed()) })
		kept := warmOne(live)
		other := newEngine() // another state dir's
		theirs := other.NewNetPool(image)
		DeferCleanup(func(ctx context.Context) { Expect(theirs.Close(ctx)).To(Succeed()) })
		notMine := warmOne(theirs)

		removed, err := e.ReapNetHolders(ctx, live.ID())
		Expect(err).NotTo(HaveOccurred())
		Expect(removed).To(ConsistOf(left))
		Expect(gone(ctx, left)).To(BeTrue())
		Expect(gone(ctx, kept)).To(BeFalse())
		Expect(gone(ctx, notMine)).To(BeFalse(), "another state dir's holders are not this one's to reap")
	}, SpecTimeout(3*time.Minute))

	It("of a live pool are spared by the reaper while they are still starting", func(ctx SpecContext) {
		e := newEngine()
		pool := e.NewNetPool(image)
		DeferCleanup(func(ctx context.Context) { Expect(pool.Close(ctx)).To(Succeed()) })
		pool.Warm(3)
		// The holders exist in the engine before the pool knows their ids:
		// reap as soon as the first of them can be listed.
		Eventually(func() []string {
			ids, err := e.ReapNetHolders(ctx, pool.ID())
			Expect(err).NotTo(HaveOccurred())
			Expect(ids).To(BeEmpty(), "a live pool's holder reaped")
			return holdersOf(ctx, pool.ID())
		}).WithTimeout(time.Minute).WithPolling(10 * time.Millisecond).ShouldNot(BeEmpty())
		Eventually(pool.Idle).WithTimeout(time.Minute).Should(Equal(3))
		for _, h := range pool.Holders() {
			info, err := cli.ContainerInspect(ctx, h)
			Expect(err).NotTo(HaveOccurred())
			Expect(info.State.Running).To(BeTrue())
			Expect(info.Config.Labels).To(HaveKeyWithValue(docker.LabelPool, pool.ID()))
		}
	}, SpecTimeout(3*time.Minute))
})

// holdersOf lists the holder containers of the pool with this ID, in any state.
func holdersOf(ctx context.Context, pool string) []string {
	GinkgoHelper()
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", docker.LabelPool+"="+pool))})
	Expect(err).NotTo(HaveOccurred())
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	return ids
}
