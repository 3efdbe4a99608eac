package report_test

import (
	"bytes"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/report"
)

// poisonFixture is the history of a poison run: checkpoint 3 claims a
// migration the world does not show, and checkpoint 5 rolls attempt 2 back
// to checkpoint 2.
func poisonFixture() *history.Full {
	start := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	virtual := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	poisoned := &history.Consistency{Verdict: history.Poisoned,
		Reason: `the world contradicts migrated {"database":"prod-db","version":3}: database "prod-db" is at schema version 0, not 3`}
	ok := &history.Consistency{Verdict: history.Consistent, Reason: "the world shows its 1 claim"}
	cps := []history.CheckpointRecord{
		{Seq: 1, Step: 1, Attempt: 1, Consistency: ok}, {Seq: 2, Step: 2, Attempt: 1, Consistency: ok},
		{Seq: 3, Step: 3, Attempt: 1, Consistency: poisoned}, {Seq: 4, Step: 4, Attempt: 1, Consistency: ok},
		{Seq: 5, Step: 2, Attempt: 2, RollbackOf: 3, RollbackFrom: 2, RolledPast: []string{"k/step-3/0", "k/step-4/0"}},
		{Seq: 6, Step: 3, Attempt: 2, Consistency: ok},
	}
	res := &history.Result{RunID: "20261203-120000-0a1b2c", Scenario: "poison", Seed: 1, Verdict: "pass",
		Reason: "the agent reported done with outcome success; all 2 invariants hold", Outcome: "success", Attempts: 2, StepsCompleted: 3,
		Invariants: []history.InvariantResult{
			{Name: "state-consistent", Kind: "always", Verdict: "pass", Detail: "1 checkpoint poisoned, 1 rollback back to a consistent state before any attempt resumed from it"},
			{Name: "no-lost-progress", Kind: "always", Verdict: "pass", Detail: "6 checkpoints over 2 attempts never went back (last step 3)"},
		},
		WallMS: 3000, VirtualMS: (6 * time.Hour).Milliseconds(), HistoryDigest: "0ddba11"}
	res.Poisoned, res.Rollbacks = history.PoisonOf(cps)
	rec := history.RunRecord{ID: res.RunID, Scenario: "poison", Source: "builtin:poison", Seed: 1, Faults: []string{},
		Status: history.StatusFinished, Verdict: "pass", Reason: res.Reason, StartedAt: start, EndedAt: start.Add(3 * time.Second), Attempts: 2, VirtualStart: virtual, Result: res}
	return &history.Full{Run: &history.Run{Record: rec, Clock: virtual.Add(6 * time.Hour), Checkpoints: cps}}
}

var _ = Describe("a run's reports of poisoned state", func() {
	It("show each poisoned checkpoint (seq, step, reason) and the rollback that replaced it, with the effects since", func() {
		f := poisonFixture()
		var text, md, html bytes.Buffer
		Expect(f.Run.Record.Result.WriteText(&text)).To(Succeed())
		Expect(report.RunMarkdown(&md, f)).To(Succeed())
		Expect(report.RunHTML(&html, f, report.RunOptions{})).To(Succeed())
		golden("run-poisoned.txt", text.Bytes())
		golden("run-poisoned.md", md.Bytes())
		Expect(text.String()).To(ContainSubstring(`poisoned: checkpoint 3 (step 3, attempt 1): the world contradicts migrated`))
		Expect(text.String()).To(ContainSubstring("rollback: checkpoint 5 for attempt 2 replaced poisoned checkpoint 3 with checkpoint 2 (step 2); effects since then, kept by the world: step-3/0, step-4/0"))
		for _, want := range []string{"<h2>Poisoned state</h2>", "by checkpoint 5", "checkpoint 2 (step 2)", "step-3/0, step-4/0", "is at schema version 0, not 3"} {
			Expect(html.String()).To(ContainSubstring(want))
		}

		var plain bytes.Buffer
		Expect(report.RunMarkdown(&plain, liveFixture())).To(Succeed())
		Expect(plain.String()).NotTo(ContainSubstring("Poisoned state"), "no section for a run without poison")
	})
})
