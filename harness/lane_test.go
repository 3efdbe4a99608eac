package harness

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// stuckModel is a world whose every request blocks until released: the
// unit-test stand-in for a world that takes seconds to answer.
type stuckModel struct {
	entered chan struct{}
	release chan struct{}
	calls   atomic.Int32
}

func (m *stuckModel) Name() string            { return "stuck" }
func (m *stuckModel) Kinds() []world.KindInfo { return []world.KindInfo{{Name: "stuck.do"}} }

func (m *stuckModel) Apply(ctx context.Context, req world.Request) (world.Outcome, world.Change, error) {
	if m.calls.Add(1) == 1 {
		close(m.entered)
	}
	<-m.release
	out, err := world.Done(map[string]string{"key": req.Key})
	return out, world.Change{}, err
}

var _ = Describe("the effect lane", func() {
	It("calls the world outside the run's lock: a run's other requests go on while the world answers, and a repeat of the key waits for the first", func(ctx SpecContext) {
		m := &stuckModel{entered: make(chan struct{}), release: make(chan struct{})}
		worlds := world.NewRegistry()
		worlds.Register(world.Definition{Name: "stuck", Open: func(context.Context, world.Reader, map[string]any) (world.Model, error) { return m, nil }})
		h, err := Open(ctx, Options{StateDir: GinkgoT().TempDir(), Worlds: worlds})
		Expect(err).NotTo(HaveOccurred())
		scen, err := scenarios.Parse("stuck.yaml", []byte("apiVersion: overnight/v1\nkind: Scenario\nname: stuck\nworld: stuck\nagent: {builtin: deployer}\nlimits: {horizon: 10d}\n"))
		Expect(err).NotTo(HaveOccurred())
		id, err := h.create(ctx, RunRequest{Scenario: scen})
		Expect(err).NotTo(HaveOccurred())
		lr := liveRunOf(h, id)
		token := lr.attempt()

		first := make(chan string, 1)
		go func() {
			res, err := lr.sdk(token).EffectWithKey(context.Background(), "step-1/0", "stuck.do", map[string]any{})
			Expect(err).NotTo(HaveOccurred())
			first <- res.Status
		}()
		Eventually(m.entered).WithTimeout(10 * time.Second).Should(BeClosed())
		// The world is busy with the effect; the run answers the rest (a
		// bound far above what they take, so a stalled run fails the spec
		// rather than hangs it).
		busy, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		cp, err := lr.sdk(token).Checkpoint(busy, 1, map[string]int{"x": 1})
		Expect(err).NotTo(HaveOccurred(), "a checkpoint while the world answers an effect")
		Expect(cp).To(BeEquivalentTo(1))
		_, err = lr.sdk(token).Now(busy)
		Expect(err).NotTo(HaveOccurred())
		Expect(lr.sdk(token).Event(busy, "progress", "still here", nil)).To(Succeed())

		again := make(chan json.RawMessage, 1)
		go func() {
			res, err := lr.sdk(token).EffectWithKey(context.Background(), "step-1/0", "stuck.do", map[string]any{})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Replayed).To(BeTrue(), "answered from the journal once the first is recorded")
			again <- res.Result
		}()
		Consistently(again, 300*time.Millisecond).ShouldNot(Receive(), "the repeat of a key in flight waits for the first")
		Expect(first).NotTo(Receive())

		close(m.release)
		Eventually(first).WithTimeout(10 * time.Second).Should(Receive(Equal("done")))
		Eventually(again).WithTimeout(10 * time.Second).Should(Receive(MatchJSON(`{"key":"k/step-1/0"}`)))
		Expect(m.calls.Load()).To(BeEquivalentTo(1), "the world acted once")
	})
})
