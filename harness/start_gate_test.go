package harness

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// lateBackend is the unit-test fake for an engine whose answer to a start
// comes late: Start hands the test the attempt's token (the agent runs
// from then on, played by the test), and returns only once released.
type lateBackend struct {
	sandbox.Backend
	tokens  chan string
	release chan struct{}
	box     *killableBox
}

func (b *lateBackend) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	b.tokens <- spec.Env[protocol.EnvToken]
	<-b.release
	return b.box, nil
}

// killableBox is a sandbox that runs until it is SIGKILLed, and records
// the signals it was sent.
type killableBox struct {
	signals chan string
	dead    chan struct{}
}

func (s *killableBox) ID() string { return "the-late-one" }

func (s *killableBox) Signal(_ context.Context, sig string) error {
	s.signals <- sig
	if sig == "SIGKILL" {
		close(s.dead)
	}
	return nil
}

func (s *killableBox) Wait(ctx context.Context) (int, error) {
	select {
	case <-s.dead:
		return 137, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (s *killableBox) Logs(context.Context) ([]byte, []byte, error) { return nil, nil, nil }
func (s *killableBox) Remove(context.Context) error                 { return nil }

var _ = Describe("an attempt whose sandbox's start the engine answers late", func() {
	It("holds the agent's requests until the harness knows its sandbox, so a kill they trigger lands on it", func(ctx SpecContext) {
		lr := startLiveRunFaults("kill@step:1")
		box := &killableBox{signals: make(chan string, 4), dead: make(chan struct{})}
		b := &lateBackend{tokens: make(chan string, 1), release: make(chan struct{}), box: box}

		ended := make(chan error, 1)
		go func() { ended <- lr.r.attempt(context.Background(), b, 1, false, sandboxPlan{}) }()
		var token string
		Eventually(b.tokens).WithTimeout(10 * time.Second).Should(Receive(&token))

		// The agent is at work; the engine has not said its sandbox started.
		replied := make(chan error, 1)
		go func() {
			_, err := lr.sdk(token).Checkpoint(context.Background(), 1, map[string]int{"x": 1})
			replied <- err
		}()
		Consistently(replied).WithTimeout(300*time.Millisecond).ShouldNot(Receive(), "the request waits for the sandbox to be known")
		lr.r.mu.Lock()
		Expect(lr.r.cp.Seq).To(BeZero(), "nothing of it was taken yet")
		lr.r.mu.Unlock()

		close(b.release)
		Eventually(box.signals).WithTimeout(10*time.Second).Should(Receive(Equal("SIGKILL")), "the kill landed on the sandbox")
		Eventually(ended).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
		Eventually(replied).WithTimeout(10 * time.Second).Should(Receive())

		lr.r.mu.Lock()
		defer lr.r.mu.Unlock()
		f := lr.r.faults.faults[0].rec
		Expect(f.Error).To(BeEmpty())
		Expect(f.Met).To(BeTrue(), f.MetDetail)
		Expect(f.MetDetail).To(Equal("attempt 1's sandbox was killed"))
		Expect(lr.r.sup.list[0].End).To(Equal("killed by fault kill@step:1"))
		Expect(lr.r.sup.list[0].ExitCode).To(HaveValue(Equal(137)))
		Expect(lr.r.cp.Step).To(Equal(1), "the checkpoint was durable before the kill")
	}, SpecTimeout(time.Minute))
})
