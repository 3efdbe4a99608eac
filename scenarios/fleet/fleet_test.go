package fleet_test

import (
	"context"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/scenarios/fleet"
	"github.com/overnight-dev/overnight/scenarios/world"
)

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// open opens the fleet world on a real Badger journal in dir, as the
// harness does.
func open(dir string) (*journal.Journal, world.World) {
	j, err := journal.Open(dir, journal.Options{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	store, _ := history.NewWriter(j).WorldStore("")
	w, err := fleet.Instance(context.Background(), store, []byte("world/r1/"), nil)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return j, w
}

// fresh opens a new fleet world on a real journal of its own, closed
// when the spec ends.
func fresh() world.World {
	j, w := open(GinkgoT().TempDir())
	DeferCleanup(func() { _ = j.Close() })
	return w
}

func do(w world.World, key, kind, args string) world.Outcome {
	o, err := w.Execute(context.Background(), world.Request{Key: key, Kind: kind, Args: json.RawMessage(args), Now: now})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return o
}

func result(o world.Outcome) map[string]any {
	ExpectWithOffset(1, o.Status).To(Equal("done"), "%+v", o.Error)
	var m map[string]any
	ExpectWithOffset(1, json.Unmarshal(o.Result, &m)).To(Succeed())
	return m
}

func failed(o world.Outcome, code string) {
	ExpectWithOffset(1, o.Status).To(Equal("failed"), "%s", o.Result)
	ExpectWithOffset(1, o.Error.Code).To(Equal(code), o.Error.Message)
}

// describe is the fleet as fleet.describe answers it.
func describe(w world.World) fleet.Description {
	var d fleet.Description
	o := do(w, "", fleet.KindDescribe, `{}`)
	ExpectWithOffset(1, o.Status).To(Equal("done"))
	ExpectWithOffset(1, json.Unmarshal(o.Result, &d)).To(Succeed())
	return d
}

func service(d fleet.Description, name string) (fleet.Service, fleet.Figures) {
	for _, s := range d.Services {
		if s.Name == name {
			return s.Service, s.Figures
		}
	}
	Fail("no service " + name)
	return fleet.Service{}, fleet.Figures{}
}

var _ = Describe("the fleet's formula", func() {
	rates := fleet.Rates{Debug: 900e6, Info: 600e6, Warn: 30e6, Error: 2e6}
	base := fleet.Config{Level: fleet.LevelInfo, Sampling: 1, RetentionDays: 30, Format: fleet.FormatJSON}

	It("logs the events at the level and above, sized by format, priced by ingest and retention", func() {
		f := fleet.Measure(rates, base)
		// 632e6 events × 350 B = 221.2 GB/day; × (0.50 + 0.0025 × 30) $/GB.
		Expect(f).To(Equal(fleet.Figures{EventsPerDay: 632e6, VolumePerDayGB: 221.2, CostPerDay: 127.19, ErrorVisibility: 1}))

		warn := base
		warn.Level, warn.Format, warn.RetentionDays = fleet.LevelWarn, fleet.FormatText, 7
		// 32e6 × 200 B = 6.4 GB; × (0.50 + 0.0175).
		Expect(fleet.Measure(rates, warn)).To(Equal(fleet.Figures{EventsPerDay: 32e6, VolumePerDayGB: 6.4, CostPerDay: 3.312, ErrorVisibility: 1}))
	})

	It("samples errors too unless they are exempt, and sees no error above the error level", func() {
		sampled := base
		sampled.Sampling = 0.25
		f := fleet.Measure(rates, sampled)
		Expect(f.EventsPerDay).To(Equal(int64(158e6)))
		Expect(f.ErrorVisibility).To(Equal(0.25))

		sampled.ExemptErrors = true
		f = fleet.Measure(rates, sampled)
		Expect(f.EventsPerDay).To(Equal(int64(630e6/4 + 2e6)))
		Expect(f.ErrorVisibility).To(Equal(1.0))

		off := base
		off.Level = fleet.LevelOff
		Expect(fleet.Measure(rates, off)).To(Equal(fleet.Figures{}))
		errOnly := base
		errOnly.Level = fleet.LevelError
		Expect(fleet.Measure(rates, errOnly).ErrorVisibility).To(Equal(1.0))
	})
})

var _ = Describe("the fleet world", func() {
	var (
		j *journal.Journal
		w world.World
	)
	BeforeEach(func() {
		var dir = GinkgoT().TempDir()
		j, w = open(dir)
		DeferCleanup(func() { _ = j.Close() })
	})

	It("starts with five services whose figures the formula gives, and their total as the start cost", func() {
		d := describe(w)
		Expect(d.Services).To(HaveLen(5))
		var sum float64
		for _, s := range d.Services {
			Expect(s.Figures).To(Equal(fleet.Measure(s.Rates, s.Config)))
			Expect(s.Staging).To(Equal(s.Config))
			Expect(s.Deps).To(HaveLen(1))
			sum += s.Figures.CostPerDay
		}
		Expect(d.Totals.CostPerDay).To(BeNumerically("~", sum, 1e-6))
		Expect(d.Totals.StartCostPerDay).To(Equal(d.Totals.CostPerDay))
		Expect(d.Libraries).To(Equal(map[string]string{"logkit": "1.8.2", "zlog": "0.9.4"}))
	})

	It("proposes, tries on staging, and applies a passing candidate to production", func() {
		c := result(do(w, "k1", fleet.KindProposeCandidate, `{"id":"api-warn","service":"api","change":{"level":"warn","exempt_errors":true}}`))
		Expect(c["status"]).To(Equal("proposed"))
		// Proposing it again is idempotent; another change under the id is refused.
		Expect(result(do(w, "k1b", fleet.KindProposeCandidate, `{"id":"api-warn","service":"api","change":{"level":"warn","exempt_errors":true}}`))).To(Equal(c))
		failed(do(w, "k1c", fleet.KindProposeCandidate, `{"id":"api-warn","service":"api","change":{"level":"error"}}`), fleet.CodeIDInUse)
		failed(do(w, "k1d", fleet.KindApplyCandidate, `{"id":"api-warn"}`), fleet.CodeNotTried)

		t := result(do(w, "k2", fleet.KindTryCandidate, `{"id":"api-warn"}`))
		Expect(t["passed"]).To(BeTrue())
		Expect(t["trial"]).To(Equal("trial-1"))
		s, f := service(describe(w), "api")
		Expect(s.Staging.Level).To(Equal(fleet.LevelWarn))
		Expect(s.Config.Level).To(Equal(fleet.LevelInfo), "a trial touches staging only")
		before := f.CostPerDay

		a := result(do(w, "k3", fleet.KindApplyCandidate, `{"id":"api-warn"}`))
		Expect(a["config"]).To(HaveKeyWithValue("level", "warn"))
		s, f = service(describe(w), "api")
		Expect(s.Config.Level).To(Equal(fleet.LevelWarn))
		Expect(s.Pinned).To(ContainElements("level", "exempt_errors"))
		Expect(f.CostPerDay).To(BeNumerically("<", before/10))
		Expect(result(do(w, "k3b", fleet.KindApplyCandidate, `{"id":"api-warn"}`))).To(Equal(a), "applying again changes nothing")

		// Rolling back an applied candidate restores its base.
		r := result(do(w, "k4", fleet.KindRollbackCandidate, `{"id":"api-warn"}`))
		Expect(r["status"]).To(Equal("rolled_back"))
		s, f = service(describe(w), "api")
		Expect(s.Config.Level).To(Equal(fleet.LevelInfo))
		Expect(f.CostPerDay).To(Equal(before))
		failed(do(w, "k5", fleet.KindApplyCandidate, `{"id":"api-warn"}`), fleet.CodeRolledBack)
	})

	It("fails a trial the service cannot take, and refuses to apply it until it is rolled back", func() {
		result(do(w, "k1", fleet.KindProposeCandidate, `{"id":"api-text","service":"api","change":{"format":"text"}}`))
		t := result(do(w, "k2", fleet.KindTryCandidate, `{"id":"api-text"}`))
		Expect(t["passed"]).To(BeFalse())
		Expect(t["reason"]).To(ContainSubstring("parses only json or ecs"))
		failed(do(w, "k3", fleet.KindApplyCandidate, `{"id":"api-text"}`), fleet.CodeTrialFailed)

		result(do(w, "k4", fleet.KindProposeCandidate, `{"id":"billing-30","service":"billing","change":{"retention_days":30}}`))
		t = result(do(w, "k5", fleet.KindTryCandidate, `{"id":"billing-30"}`))
		Expect(t["reason"]).To(ContainSubstring("below billing's compliance minimum of 90"))

		result(do(w, "k6", fleet.KindRollbackCandidate, `{"id":"api-text"}`))
		s, _ := service(describe(w), "api")
		Expect(s.Staging).To(Equal(s.Config))
	})

	It("fails the trial of a candidate written for a configuration that has changed since", func() {
		result(do(w, "k1", fleet.KindProposeCandidate, `{"id":"a","service":"worker","change":{"level":"warn"}}`))
		result(do(w, "k2", fleet.KindProposeCandidate, `{"id":"b","service":"worker","change":{"retention_days":7}}`))
		result(do(w, "k3", fleet.KindTryCandidate, `{"id":"a"}`))
		result(do(w, "k4", fleet.KindApplyCandidate, `{"id":"a"}`))
		t := result(do(w, "k5", fleet.KindTryCandidate, `{"id":"b"}`))
		Expect(t["passed"]).To(BeFalse())
		Expect(t["reason"]).To(ContainSubstring("stale: candidate b was written for worker's configuration before level info -> warn"))
	})

	It("measures a service and a candidate without changing anything", func() {
		result(do(w, "k1", fleet.KindProposeCandidate, `{"id":"s","service":"search","change":{"level":"info","format":"text"}}`))
		seq := w.(world.Sequenced).LedgerSeq()
		before, _ := w.Snapshot(context.Background())
		m := result(do(w, "m1", fleet.KindMeasure, `{"candidate":"s"}`))
		Expect(m["figures"].(map[string]any)["cost_day"]).To(BeNumerically("<", m["production_figures"].(map[string]any)["cost_day"]))
		result(do(w, "m2", fleet.KindMeasure, `{"service":"search"}`))
		failed(do(w, "m3", fleet.KindMeasure, `{"service":"search","candidate":"s"}`), fleet.CodeInvalid)
		failed(do(w, "m4", fleet.KindMeasure, `{"service":"nope"}`), fleet.CodeNotFound)
		after, _ := w.Snapshot(context.Background())
		Expect(after).To(MatchJSON(before))
		Expect(w.(world.Sequenced).LedgerSeq()).To(Equal(seq+4), "read-only requests are in the ledger too")
	})

	It("names a candidate tried twice as a duplicate, with both keys", func() {
		result(do(w, "k1", fleet.KindProposeCandidate, `{"id":"api-warn","service":"api","change":{"level":"warn"}}`))
		result(do(w, "k2", fleet.KindTryCandidate, `{"id":"api-warn"}`))
		Expect(w.Duplicates(context.Background())).To(BeEmpty())
		result(do(w, "k2", fleet.KindTryCandidate, `{"id":"api-warn"}`))
		failed(do(w, "k9", fleet.KindTryCandidate, `{"id":"nope"}`), fleet.CodeNotFound)
		dups, err := w.Duplicates(context.Background())
		Expect(err).NotTo(HaveOccurred())
		Expect(dups).To(Equal([]world.Duplicate{{Kind: "trial", Name: "api-warn", IDs: []string{"trial-1", "trial-2"}, Keys: []string{"k2", "k2"}, Count: 2}}))
	})

	It("comes back after a restart as it was, and its ledger rebuilds it", func(ctx SpecContext) {
		result(do(w, "k1", fleet.KindProposeCandidate, `{"id":"api-warn","service":"api","change":{"level":"warn"}}`))
		result(do(w, "k2", fleet.KindTryCandidate, `{"id":"api-warn"}`))
		result(do(w, "k3", fleet.KindApplyCandidate, `{"id":"api-warn"}`))
		before, err := w.Snapshot(ctx)
		Expect(err).NotTo(HaveOccurred())
		dir := j.Dir()
		Expect(j.Close()).To(Succeed())
		j, w = open(dir)
		after, err := w.Snapshot(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(after).To(MatchJSON(before))
		o, found, err := w.Lookup(ctx, "k2")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(result(o)["passed"]).To(BeTrue())

		reg := world.NewRegistry()
		fleet.Register(reg)
		st, err := reg.StateAt(ctx, fleet.Name, nil, w, 1<<40)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Snapshot).To(MatchJSON(after))
	})

	It("describes itself truthfully: its examples succeed and every error example draws its error", func(ctx SpecContext) {
		_, err := fleet.Definition().Describe(ctx)
		Expect(err).NotTo(HaveOccurred())
	})
})
