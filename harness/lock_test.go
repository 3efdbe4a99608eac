package harness

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/scenarios"
)

// stuckSandbox is a sandbox whose signal hangs until released: the
// unit-test fake for a slow backend (only Signal is ever called).
type stuckSandbox struct {
	sandbox.Sandbox
	called  chan struct{}
	release chan struct{}
}

func (s *stuckSandbox) ID() string { return "the-sandbox" }

func (s *stuckSandbox) Signal(ctx context.Context, sig string) error {
	close(s.called)
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return nil
}

var _ = Describe("the run's lock", func() {
	It("is not held while a fault waits for the Docker engine: other requests of the run go on", func(ctx SpecContext) {
		eng := &stuckSandbox{called: make(chan struct{}), release: make(chan struct{})}
		lr := startLiveRunFaults("kill@step:1")
		old := lr.attempt()
		cur := lr.attempt()
		lr.r.mu.Lock()
		lr.r.sup.box = eng // attempt 2 runs (as far as the faults know)
		lr.r.mu.Unlock()

		done := make(chan error, 1)
		go func() {
			_, err := lr.sdk(cur).Checkpoint(context.Background(), 1, map[string]int{"x": 1})
			done <- err
		}()
		Eventually(eng.called).WithTimeout(10*time.Second).Should(BeClosed(), "the kill reached the engine")
		// The engine is stuck in the kill; the run answers others meanwhile.
		start := time.Now()
		cp, err := lr.sdk(old).Resume(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(cp.Step).To(Equal(1), "the checkpoint was durable before the fault fired")
		Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))
		Consistently(done).WithTimeout(200*time.Millisecond).ShouldNot(Receive(), "the killed attempt hears nothing while the kill is under way")
		close(eng.release)
		lr.r.seenDead(2) // the container is gone: held replies may go
		Eventually(done).WithTimeout(10 * time.Second).Should(Receive())
		lr.r.mu.Lock()
		defer lr.r.mu.Unlock()
		Expect(lr.r.faults.faults[0].rec.Met).To(BeTrue(), lr.r.faults.faults[0].rec.MetDetail)
	}, SpecTimeout(time.Minute))
})

// countingSandbox is a sandbox that counts its freezes and thaws.
type countingSandbox struct {
	sandbox.Sandbox
	freezes, thaws int
}

func (s *countingSandbox) ID() string                   { return "the-frozen-one" }
func (s *countingSandbox) Freeze(context.Context) error { s.freezes++; return nil }
func (s *countingSandbox) Thaw(context.Context) error   { s.thaws++; return nil }

var _ = Describe("a lasting fault", func() {
	It("re-applied to the attempt whose sandbox it holds already does nothing, and still heals it", func(ctx SpecContext) {
		h, err := Open(ctx, Options{StateDir: GinkgoT().TempDir()})
		Expect(err).NotTo(HaveOccurred())
		scen, err := scenarios.Parse("backend-test.yaml", []byte(backendScenario))
		Expect(err).NotTo(HaveOccurred())
		id, err := h.create(ctx, RunRequest{Scenario: scen})
		Expect(err).NotTo(HaveOccurred())
		lr := liveRunOf(h, id)
		lr.attempt()
		sb := &countingSandbox{}
		t := runTarget{lr.r}
		lr.r.mu.Lock()
		lr.r.sup.box = sb
		// Fired on the sandbox before its start was noted, then re-applied
		// to the attempt when it was.
		Expect(t.PauseAgent(ctx)).To(Succeed())
		Expect(t.PauseAgent(ctx)).To(Succeed())
		lr.r.unlock()
		Eventually(func() int { lr.r.mu.Lock(); defer lr.r.mu.Unlock(); return sb.freezes }).Should(Equal(1))
		lr.r.mu.Lock()
		Expect(lr.r.sup.isFrozen()).To(BeTrue(), "still known to be frozen")
		Expect(t.UnpauseAgent(ctx)).To(Succeed())
		lr.r.unlock()
		Eventually(func() int { lr.r.mu.Lock(); defer lr.r.mu.Unlock(); return sb.thaws }).Should(Equal(1), "thawed when it heals")
	})
})
