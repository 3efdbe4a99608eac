package main

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The logopt-rollback scenario: the careless optimizer takes its first
// trial's transient failure (effect-5xx@effect:3) for a pass and
// checkpoints step 2 claiming api-warn is applied, so checkpoint 2 is
// poisoned; it is killed once step 3 is durable (kill@step:3).
var _ = Describe("overnight run logopt-rollback: a candidate whose trial failed recorded as good", func() {
	It("fails state-consistent without rollback, naming the poisoned checkpoint", func(ctx SpecContext) {
		o := overnight(ctx, stateDir(), nil, "run", unguarded("logopt-rollback"), "-o", "json", "-q")
		Expect(o.code).To(Equal(1), o.stderr)
		res := decodeResult(o.stdout)
		Expect(res.Verdict).To(Equal("fail"))
		Expect(verdicts(o.stdout)["state-consistent"]).To(HavePrefix("fail: attempt 2 resumed from state built on poisoned checkpoint 2 (step 2, attempt 1: the world contradicts candidate"))
		Expect(verdicts(o.stdout)["state-consistent"]).To(ContainSubstring("candidate api-warn is proposed (never tried), not applied"))
		Expect(res.Poisoned).To(HaveLen(1))
		Expect(res.Poisoned[0].Seq).To(Equal(int64(2)))
		Expect(res.Rollbacks).To(BeEmpty())
	}, SpecTimeout(3*time.Minute))

	It("recovers with rollback: consistent from the last consistent checkpoint and passes, the rollback in the report", func(ctx SpecContext) {
		state := stateDir()
		o := overnight(ctx, state, nil, "run", "logopt-rollback", "-o", "json")
		Expect(o.code).To(Equal(0), o.stderr)
		Expect(o.stderr).To(ContainSubstring("attempt 2: checkpoint 2 is poisoned; rolled back to step 1 (checkpoint 4)"))
		res := decodeResult(o.stdout)
		Expect(res.Verdict).To(Equal("pass"), res.Reason)
		Expect(verdicts(o.stdout)["no-lost-progress"]).To(HavePrefix("pass"), "a rollback is not lost progress")
		Expect(verdicts(o.stdout)["state-consistent"]).To(HavePrefix("pass"))
		Expect(res.Rollbacks).To(HaveLen(1))
		rb := res.Rollbacks[0]
		Expect([]int64{rb.Seq, rb.Of, rb.From}).To(Equal([]int64{4, 2, 1}))
		Expect(rb.RolledPast).To(Equal([]string{"step-2/0", "step-2/1", "step-3/0", "step-3/1", "step-3/2"}), "api-warn's proposal and failed trial, api-text's three effects")
		Expect(res.Effects.Duplicates).To(BeZero(), "the trial that failed never reached the world: trying it again is its first trial")
		Expect(verdicts(o.stdout)["goal-reached"]).To(ContainSubstring("its claims agree"))

		md := overnight(ctx, state, nil, "report", res.RunID, "--format", "md")
		Expect(md.code).To(Equal(0), md.stderr)
		Expect(md.stdout).To(ContainSubstring("## Poisoned state"))
		Expect(md.stdout).To(ContainSubstring("| 4 | 2 | 2 | checkpoint 1 (step 1) | step-2/0, step-2/1, step-3/0, step-3/1, step-3/2 |"))
		f := overnight(ctx, state, nil, "report", res.RunID, "--file")
		Expect(f.code).To(Equal(0), f.stderr)
		Expect(f.stdout).To(MatchRegexp(`(?m)^\| api-warn \| api \| .* \| passed \| kept \|`))
		Expect(f.stdout).NotTo(ContainSubstring("recorded as good"), "the poisoned record was rolled back")
	}, SpecTimeout(3*time.Minute))
})
