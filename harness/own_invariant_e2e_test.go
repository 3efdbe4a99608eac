package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/builtin"
	"github.com/overnight-dev/overnight/scenarios/cloud"
	inv "github.com/overnight-dev/overnight/scenarios/invariant"
)

// snapshotNamedDaily is the name of an invariant of these specs' own,
// as a user would write one.
const snapshotNamedDaily = "snapshot-named-daily"

// withSnapshotNamedDaily returns the built-in invariants and
// snapshot-named-daily: every snapshot the world took is named after the
// virtual day it was taken on (the task's snapshot_prefix and the day,
// counted from the run's start), judged from the world's own ledger.
func withSnapshotNamedDaily() *inv.Registry {
	reg := inv.Default()
	reg.Register(inv.Invariant{Name: snapshotNamedDaily, Kind: inv.Always,
		Doc: "the world's ledger: every snapshot is named after the virtual day it was taken on",
		Judge: func(ctx context.Context, ev *inv.Evidence) (inv.Judgement, error) {
			var task cloud.MaintenanceGoal
			if err := json.Unmarshal(ev.Task, &task); err != nil || task.SnapshotPrefix == "" {
				return inv.Judgement{Verdict: inv.Unknown, Detail: "the task names no snapshot_prefix"}, nil
			}
			ledger, err := ev.World.Ledger(ctx)
			if err != nil {
				return inv.Judgement{}, err
			}
			var taken int
			var wrong []string
			for _, e := range ledger {
				if e.Kind != cloud.KindCreateSnapshot || e.Outcome.Status != protocol.StatusDone {
					continue
				}
				var args struct {
					Name string `json:"name"`
				}
				if err := json.Unmarshal(e.Args, &args); err != nil {
					return inv.Judgement{}, fmt.Errorf("ledger entry %d: %w", e.Seq, err)
				}
				taken++
				day := int(e.At.Sub(ev.VirtualStart) / (24 * time.Hour))
				if want := task.SnapshotName(day); args.Name != want {
					wrong = append(wrong, fmt.Sprintf("%s taken on day %d, whose snapshot is %s", args.Name, day, want))
				}
			}
			switch {
			case len(wrong) > 0:
				return inv.Judgement{Verdict: inv.Fail, Detail: strings.Join(wrong, "; ")}, nil
			case taken == 0:
				return inv.Judgement{Verdict: inv.Unknown, Detail: "the world took no snapshot"}, nil
			}
			return inv.Judgement{Verdict: inv.Pass, Detail: fmt.Sprintf("all %d snapshots are named after their day", taken)}, nil
		}})
	return reg
}

// weekJudgedBy is the built-in week scenario whose invariants: also list
// name.
func weekJudgedBy(name string) *scenarios.Scenario {
	raw, ok := builtin.Lookup("week")
	Expect(ok).To(BeTrue())
	const line = "invariants: [no-duplicate-effects, no-lost-progress, effects-resolved, goal-reached]"
	text := strings.Replace(string(raw), line, "invariants: [no-duplicate-effects, no-lost-progress, effects-resolved, goal-reached, "+name+"]", 1)
	Expect(text).NotTo(Equal(string(raw)), "the week scenario's invariants: line moved")
	s, err := scenarios.Parse("week-judged.yaml", []byte(text))
	Expect(err).NotTo(HaveOccurred())
	return s
}

var _ = Describe("an invariant of the user's own, given in Options.Invariants", func() {
	It("judges every run, and an isolated re-run, of a scenario that lists it: pass when it holds, fail when the world shows it broken", func(ctx SpecContext) {
		h := newHarnessWith(ctx, dockerCli, nil, harness.Options{Invariants: withSnapshotNamedDaily()})
		scen := weekJudgedBy(snapshotNamedDaily)

		By("the maintainer, killed after day 2, resumes and takes each day's snapshot on its day")
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, Faults: faults("kill@step:3")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v", res.Reason, res.Invariants)
		own := invariant(res, snapshotNamedDaily)
		Expect(own).To(Equal(harness.InvariantResult{Name: snapshotNamedDaily, Kind: harness.KindAlways, Verdict: harness.VerdictPass,
			Detail: "all 7 snapshots are named after their day"}))
		Expect(res.Reason).To(HaveSuffix("; all 6 invariants hold"), "faults-fired joins the scenario's five")

		By("the naive maintainer, killed after day 2, starts its week over: its day-1 snapshot is taken on a later day")
		naive, err := h.Run(ctx, harness.RunRequest{Scenario: scen, Agent: "naive", Faults: faults("kill@step:3")})
		Expect(err).NotTo(HaveOccurred())
		Expect(naive.Verdict).To(Equal(harness.VerdictFail))
		own = invariant(naive, snapshotNamedDaily)
		Expect(own.Verdict).To(Equal(harness.VerdictFail), own.Detail)
		Expect(own.Detail).To(MatchRegexp(`^daily-1 taken on day [3-9], whose snapshot is daily-[3-9];`))

		By("an isolated re-run of the naive agent from its start, with no fault, is judged by the same registry")
		iso, err := h.Isolated(ctx, harness.IsolatedRequest{Parent: naive.RunID, Purpose: "own invariant"})
		Expect(err).NotTo(HaveOccurred())
		own = invariant(iso, snapshotNamedDaily)
		Expect(own.Verdict).To(Equal(harness.VerdictPass), own.Detail)
		Expect(own.Detail).To(Equal("all 7 snapshots are named after their day"))
	}, SpecTimeout(4*time.Minute))
})
