package main

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/harnesstest"
)

// unguarded is a copy of the built-in scenario name with rollback: none.
func unguarded(name string) string {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join(harnesstest.ModuleRoot(), "scenarios", "builtin", name+".yaml"))
	Expect(err).NotTo(HaveOccurred())
	text := strings.Replace(string(raw), "\nrollback: consistent\n", "\nrollback: none\n", 1)
	Expect(text).NotTo(Equal(string(raw)))
	file := filepath.Join(GinkgoT().TempDir(), name+"-unguarded.yaml")
	Expect(os.WriteFile(file, []byte(text), 0o644)).To(Succeed())
	return file
}

// verdicts maps each invariant of a run's JSON result to "VERDICT: DETAIL".
func verdicts(stdout string) map[string]string {
	GinkgoHelper()
	res := decodeResult(stdout)
	out := map[string]string{}
	for _, inv := range res.Invariants {
		out[inv.Name] = inv.Verdict + ": " + inv.Detail
	}
	return out
}

// The poison scenario: the careless deployer records its failed migration
// (effect-5xx@effect:3) as done, so checkpoint 3 is poisoned; it is killed
// once step 4 is durable (kill@step:4).
var _ = Describe("overnight run poison: a failed step recorded as done", func() {

	It("fails state-consistent without rollback, naming the poisoned checkpoint", func(ctx SpecContext) {
		o := overnight(ctx, stateDir(), nil, "run", unguarded("poison"), "-o", "json", "-q")
		Expect(o.code).To(Equal(1), o.stderr)
		res := decodeResult(o.stdout)
		Expect(res.Verdict).To(Equal("fail"))
		Expect(verdicts(o.stdout)["state-consistent"]).To(HavePrefix("fail: attempt 2 resumed from state built on poisoned checkpoint 3 (step 3, attempt 1: the world contradicts migrated"))
		Expect(res.Poisoned).To(HaveLen(1))
		Expect(res.Poisoned[0].Seq).To(Equal(int64(3)))
		Expect(res.Poisoned[0].RolledBackBy).To(BeZero())
		Expect(res.Rollbacks).To(BeEmpty())
	}, SpecTimeout(3*time.Minute))

	It("recovers with rollback: consistent from the last consistent checkpoint and passes, the rollback in the report", func(ctx SpecContext) {
		state := stateDir()
		o := overnight(ctx, state, nil, "run", "poison", "-o", "json")
		Expect(o.code).To(Equal(0), o.stderr)
		Expect(o.stderr).To(ContainSubstring("attempt 2: checkpoint 3 is poisoned; rolled back to step 2 (checkpoint 5)"))
		res := decodeResult(o.stdout)
		Expect(res.Verdict).To(Equal("pass"), res.Reason)
		Expect(verdicts(o.stdout)["no-lost-progress"]).To(HavePrefix("pass"), "a rollback is not lost progress")
		Expect(res.Rollbacks).To(HaveLen(1))
		rb := res.Rollbacks[0]
		Expect([]int64{rb.Seq, rb.Of, rb.From}).To(Equal([]int64{5, 3, 2}))
		Expect(rb.RolledPast).To(Equal([]string{"step-3/0", "step-4/0"}))
		Expect(res.Effects.Duplicates).To(BeZero())

		md := overnight(ctx, state, nil, "report", res.RunID, "--format", "md")
		Expect(md.code).To(Equal(0), md.stderr)
		Expect(md.stdout).To(ContainSubstring("## Poisoned state"))
		Expect(md.stdout).To(ContainSubstring("| 5 | 2 | 3 | checkpoint 2 (step 2) | step-3/0, step-4/0 |"))
	}, SpecTimeout(3*time.Minute))

	DescribeTable("a harness SIGKILLed around the rollback resumes to the same decision",
		func(ctx SpecContext, at string) {
			state := stateDir()
			id := killAt(ctx, state, at, "run", "poison", "-o", "json")
			r := overnight(ctx, state, nil, "resume", id, "-o", "json", "-q")
			Expect(r.code).To(Equal(0), r.stderr)
			res := decodeResult(r.stdout)
			Expect(res.Verdict).To(Equal("pass"), res.Reason)
			Expect(res.Rollbacks).To(HaveLen(1), "one rollback, whichever harness wrote it")
			Expect([]int64{res.Rollbacks[0].Of, res.Rollbacks[0].From}).To(Equal([]int64{3, 2}))
		},
		Entry("before it: as the agent is killed at step 4", "fault kill@step:4 applied", SpecTimeout(3*time.Minute)),
		Entry("after it is durable, before the attempt's container starts", "attempt 2: checkpoint 3 is poisoned", SpecTimeout(3*time.Minute)),
	)
})
