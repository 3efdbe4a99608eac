package harness_test

import (
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
)

var _ = Describe("the supervisor's pacing between attempts", func() {
	It("starts the next attempt at once after a kill, even one that ended an attempt with no new checkpoint", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: week(), Faults: faults("kill@every:8h"), MaxAttempts: 100})
		Expect(err).NotTo(HaveOccurred())
		run, err := h.History().Load(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		progressed := map[int]bool{}
		for _, c := range run.Checkpoints {
			progressed[c.Attempt] = true
		}
		var stalled []history.AttemptRecord
		var gaps time.Duration
		for i, a := range run.Attempts[:len(run.Attempts)-1] {
			if strings.HasPrefix(a.End, "killed by fault kill@") && !progressed[a.N] {
				stalled = append(stalled, a)
				gaps += run.Attempts[i+1].StartedAt.Sub(a.EndedAt)
			}
		}
		Expect(len(stalled)).To(BeNumerically(">=", 3), "a kill every 8h ends attempts that only slept: %d attempts", len(run.Attempts))
		// A back-off would wait 100ms at least after each; the supervisor's
		// own work between two attempts is a few ms.
		Expect(gaps).To(BeNumerically("<", time.Duration(len(stalled))*50*time.Millisecond),
			"%d attempts a kill ended without a new checkpoint were followed after %s in all", len(stalled), gaps)
	}, SpecTimeout(3*time.Minute))

	It("still backs off a crash loop of the agent's own, standbys ahead or not, and ends it as a crash loop", func(ctx SpecContext) {
		api := &creates{API: dockerCli}
		h := newHarnessOn(ctx, api, nil)
		s := deployWith("  broken: {builtin: deployer, args: [--no-such-flag]}\n")
		// The kill never fires (the agent never reaches the gateway), but
		// it makes the run keep standbys ahead.
		res, err := h.Run(ctx, harness.RunRequest{Scenario: s, Agent: "broken", Faults: faults("kill@every:8h"), MaxAttempts: 4})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictFail))
		Expect(res.Attempts).To(Equal(4))
		Expect(res.Reason).To(ContainSubstring("crash loop: 4 attempts"))
		atts, err := h.Attempts(res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(atts).To(HaveLen(4))
		for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
			Expect(atts[i+1].StartedAt.Sub(atts[i].EndedAt)).To(BeNumerically(">=", want), "the wait before attempt %d", i+2)
			Expect(atts[i+1].Standby).To(BeTrue(), "attempt %d took over its standby", i+2)
		}
		made := api.made()
		slices.Sort(made)
		Expect(made).To(Equal([]string{"1", "2 standby", "3 standby", "4 standby"}),
			"no standby for an attempt max_attempts does not let run")
	}, SpecTimeout(3*time.Minute))
})
