package harness_test

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/container"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/docker"
)

// lateStart is the real engine whose start of attempt 1's sandbox answers
// late: the container runs at once, but the harness hears that it started
// only once released() holds (or after a minute) — as on a loaded machine,
// where the engine's answer (or the harness's goroutine reading it) can
// lag behind an agent already at work.
type lateStart struct {
	docker.API
	released func() bool
	held     *atomic.Bool // set once a start was held back
}

func (l lateStart) ContainerStart(ctx context.Context, id string, opts container.StartOptions) error {
	if err := l.API.ContainerStart(ctx, id, opts); err != nil {
		return err
	}
	info, err := l.ContainerInspect(ctx, id)
	if err != nil || info.Config == nil || info.Config.Labels[sandbox.LabelAttempt] != "1" {
		return err
	}
	l.held.Store(true)
	for deadline := time.Now().Add(time.Minute); !l.released() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

var _ = Describe("a kill that fires before the harness heard its sandbox started", func() {
	// The agent reaches step 3 while the engine's answer to the start of its
	// sandbox is still on its way: the fault fires with no sandbox known to
	// the supervisor. It must land all the same, at the same point of the
	// history as when the answer came first: the reply to the checkpoint
	// held, nothing more taken from the attempt, its sandbox SIGKILLed as
	// soon as it is known.
	It("kills the attempt all the same: the history is the one of an on-time start", func(ctx SpecContext) {
		var progress syncBuffer
		var held atomic.Bool
		fired := func() bool { return strings.Contains(progress.String(), "fault kill@step:3 ") }
		h := newHarnessOn(ctx, lateStart{API: dockerCli, released: fired, held: &held}, &progress)
		late, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults("kill@step:3")})
		Expect(err).NotTo(HaveOccurred())
		Expect(held.Load()).To(BeTrue(), "the start of attempt 1 was held back")
		Expect(progress.String()).To(ContainSubstring("fault kill@step:3 applied"))
		Expect(late.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v\n%s", late.Reason, late.Faults, progress.String())
		Expect(late.Attempts).To(Equal(2))
		Expect(late.Faults[0].Met).To(BeTrue(), late.Faults[0].MetDetail)
		logs, err := h.Logs(late.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(logs[0].End).To(Equal("killed by fault kill@step:3"))
		Expect(logs[0].ExitCode).To(HaveValue(Equal(137)))

		onTime, err := newHarness(ctx, nil).Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults("kill@step:3")})
		Expect(err).NotTo(HaveOccurred())
		Expect(late.HistoryDigest).To(Equal(onTime.HistoryDigest), "the same history as a start the harness heard of at once")
	}, SpecTimeout(3*time.Minute))
})
