package harness

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
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

	It("asks a world out of process nothing under the run's lock: a checkpoint does not wait for a world that answers one call at a time", func(ctx SpecContext) {
		m := &stuckModel{entered: make(chan struct{}), release: make(chan struct{})}
		DeferCleanup(func() {
			select {
			case <-m.release:
			default:
				close(m.release)
			}
		})
		def := world.Definition{Name: "stuck", Open: func(context.Context, world.Reader, map[string]any) (world.Model, error) { return m, nil }}
		srv, err := remote.NewServer(ctx, def, world.NewMemStore(), nil)
		Expect(err).NotTo(HaveOccurred())
		var one sync.Mutex // every call waits for the one before, reads included (as examples/pyworld)
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			one.Lock()
			defer one.Unlock()
			srv.ServeHTTP(w, r)
		}))
		DeferCleanup(ts.Close)
		h, err := Open(ctx, Options{StateDir: GinkgoT().TempDir()})
		Expect(err).NotTo(HaveOccurred())
		// No goal-reached: the world judges none.
		scen, err := scenarios.Parse("stuck.yaml", []byte("apiVersion: overnight/v1\nkind: Scenario\nname: stuck\nworld: stuck\nagent: {builtin: deployer}\nlimits: {horizon: 10d}\ninvariants: [effects-resolved]\n"))
		Expect(err).NotTo(HaveOccurred())
		scen.World = scenarios.World{Name: "stuck", URL: ts.URL}
		id, err := h.create(ctx, RunRequest{Scenario: scen, World: ts.URL})
		Expect(err).NotTo(HaveOccurred())
		lr := liveRunOf(h, id)
		token := lr.attempt()

		first := make(chan string, 1)
		go func() {
			defer GinkgoRecover()
			res, err := lr.sdk(token).EffectWithKey(context.Background(), "step-1/0", "stuck.do", map[string]any{})
			Expect(err).NotTo(HaveOccurred())
			first <- res.Status
		}()
		Eventually(m.entered).WithTimeout(10 * time.Second).Should(BeClosed())
		busy, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := lr.sdk(token).Checkpoint(busy, 1, map[string]int{"x": 1})
			done <- err
		}()
		Eventually(done).WithTimeout(10*time.Second).Should(Receive(BeNil()), "a checkpoint while the world applies an effect")
		_, err = lr.sdk(token).Now(busy)
		Expect(err).NotTo(HaveOccurred())
		Expect(first).NotTo(Receive())

		close(m.release)
		Eventually(first).WithTimeout(10 * time.Second).Should(Receive(Equal("done")))
		// The next checkpoint counts the effect in its world seq, and the
		// world's own ledger (the run's view of it) agrees.
		_, err = lr.sdk(token).Checkpoint(ctx, 2, map[string]int{"x": 2})
		Expect(err).NotTo(HaveOccurred())
		lr.r.mu.Lock()
		seq := lr.r.cp.WorldSeq
		lr.r.mu.Unlock()
		Expect(seq).To(BeEquivalentTo(1))
		inWorld, err := lr.r.world.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(inWorld).To(HaveLen(1))
	}, SpecTimeout(90e9))
})
