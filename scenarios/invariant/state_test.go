package invariant_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/invariant"
)

var _ = Describe("state-consistent and no-lost-progress over poisoned checkpoints", func() {
	judge := func(name string, ev *invariant.Evidence) invariant.Judgement {
		GinkgoHelper()
		j, err := invariant.Default().Judge(context.Background(), name, ev)
		Expect(err).NotTo(HaveOccurred())
		return j
	}
	cp := func(seq int64, attempt, step int, poisoned string) invariant.Checkpoint {
		return invariant.Checkpoint{Seq: seq, Attempt: attempt, Step: step, Poisoned: poisoned}
	}

	It("fails when a later attempt resumed from state built on a poisoned checkpoint, naming its seq", func() {
		ev := &invariant.Evidence{Checkpoints: []invariant.Checkpoint{
			cp(1, 1, 1, ""), cp(2, 1, 2, ""), cp(3, 1, 3, "no migration"), cp(4, 1, 4, ""), cp(5, 2, 5, ""),
		}}
		j := judge(invariant.StateConsistent, ev)
		Expect(j.Verdict).To(Equal(invariant.Fail))
		Expect(j.Detail).To(Equal("attempt 2 resumed from state built on poisoned checkpoint 3 (step 3, attempt 1: no migration)"))
		Expect(judge(invariant.NoLostProgress, ev).Verdict).To(Equal(invariant.Pass))
	})

	It("passes a poisoned checkpoint no attempt resumed from, and fails a done the world contradicts", func() {
		ev := &invariant.Evidence{Checkpoints: []invariant.Checkpoint{cp(1, 1, 1, "wrong"), cp(2, 1, 2, "")}}
		j := judge(invariant.StateConsistent, ev)
		Expect(j.Verdict).To(Equal(invariant.Pass))
		Expect(j.Detail).To(ContainSubstring("1 checkpoint poisoned, but no later attempt resumed from it"))
		ev.Done = &invariant.Done{Outcome: "success", Poisoned: `no service "api"`}
		j = judge(invariant.StateConsistent, ev)
		Expect(j.Verdict).To(Equal(invariant.Fail))
		Expect(j.Detail).To(Equal(`the claims sent with done: no service "api"`))
	})

	It("passes a run whose rollback replaced the poisoned checkpoint, and counts progress from the rollback", func() {
		rollback := invariant.Checkpoint{Seq: 5, Attempt: 2, Step: 2, RollbackOf: 3}
		ev := &invariant.Evidence{Checkpoints: []invariant.Checkpoint{
			cp(1, 1, 1, ""), cp(2, 1, 2, ""), cp(3, 1, 3, "no migration"), cp(4, 1, 4, ""), rollback, cp(6, 2, 3, ""), cp(7, 2, 4, ""),
		}}
		j := judge(invariant.StateConsistent, ev)
		Expect(j.Verdict).To(Equal(invariant.Pass))
		Expect(j.Detail).To(Equal("1 checkpoint poisoned, 1 rollback back to a consistent state before any attempt resumed from it"))
		Expect(judge(invariant.NoLostProgress, ev).Verdict).To(Equal(invariant.Pass), "a rollback is not lost progress")

		ev.Checkpoints = append(ev.Checkpoints, cp(8, 3, 1, ""))
		Expect(judge(invariant.NoLostProgress, ev).Verdict).To(Equal(invariant.Fail), "going back behind the rollback's progress still is")
	})
})
