package fleet_test

import (
	"context"
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/fleet"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// fire makes a dependency update happen to w.
func fire(w world.World, library string) (map[string]any, error) {
	var args json.RawMessage
	if library != "" {
		args = json.RawMessage(`{"library":"` + library + `"}`)
	}
	ew, ok := w.(world.Eventful)
	ExpectWithOffset(1, ok).To(BeTrue(), "the fleet world is Eventful")
	o, err := ew.FireEvent(context.Background(), world.Event{Kind: fleet.EventDepUpdate, Args: args, Now: now})
	if err != nil {
		return nil, err
	}
	return result(o), nil
}

var _ = Describe("a dependency update", func() {
	var w world.World
	BeforeEach(func() { w = fresh() })

	It("is a world event the fleet declares", func() {
		Expect(world.EventsOf(w)).To(HaveLen(1))
		Expect(world.EventsOf(w)[0].Name).To(Equal(fleet.EventDepUpdate))
		Expect(world.EventsOf(w)[0].Fault).To(Equal("dep-update"))
	})

	It("changes the library's default on the services that do not pin it, and is recorded in the ledger", func() {
		before := describe(w)
		r, err := fire(w, "")
		Expect(err).NotTo(HaveOccurred())
		Expect(r).To(HaveKeyWithValue("library", "logkit"), "the first library in name order with a release left")
		Expect(r).To(HaveKeyWithValue("version", "2.0.0"))
		Expect(r["services"]).To(ConsistOf("api", "checkout"))
		after := describe(w)
		Expect(after.Libraries["logkit"]).To(Equal("2.0.0"))
		api, f := service(after, "api")
		Expect(api.Config.Format).To(Equal(fleet.FormatECS))
		Expect(api.Staging.Format).To(Equal(fleet.FormatECS))
		_, f0 := service(before, "api")
		Expect(f.CostPerDay).To(BeNumerically(">", f0.CostPerDay), "ecs events are bigger")

		// zlog 1.0 makes debug the default: search pins its level, billing and worker do not.
		r, err = fire(w, "zlog")
		Expect(err).NotTo(HaveOccurred())
		Expect(r["services"]).To(ConsistOf("billing", "worker"))
		search, _ := service(describe(w), "search")
		Expect(search.Config.Level).To(Equal(fleet.LevelDebug))
		worker, _ := service(describe(w), "worker")
		Expect(worker.Config.Level).To(Equal(fleet.LevelDebug))

		ledger, err := w.Ledger(context.Background())
		Expect(err).NotTo(HaveOccurred())
		var evs []world.LedgerEntry
		for _, e := range ledger {
			if e.IsEvent() {
				evs = append(evs, e)
			}
		}
		Expect(evs).To(HaveLen(2))
		Expect(evs[1].Kind).To(Equal(fleet.EventDepUpdate))
		Expect(string(evs[1].Args)).To(Equal(`{"library":"zlog"}`))

		_, err = fire(w, "")
		Expect(err).To(MatchError(ContainSubstring("no library has a release left")))
		_, err = fire(w, "log4j")
		Expect(err).To(MatchError(ContainSubstring(`no logging library "log4j"`)))
		ledger2, _ := w.Ledger(context.Background())
		Expect(ledger2).To(HaveLen(len(ledger)), "an update that cannot happen records nothing")
	})

	It("makes a candidate written for the old default fail its trial, and leaves a pinned field alone", func() {
		result(do(w, "k1", fleet.KindProposeCandidate, `{"id":"api-warn","service":"api","change":{"level":"warn"}}`))
		result(do(w, "k2", fleet.KindProposeCandidate, `{"id":"checkout-text","service":"checkout","change":{"format":"text"}}`))
		result(do(w, "k3", fleet.KindTryCandidate, `{"id":"checkout-text"}`))
		result(do(w, "k4", fleet.KindApplyCandidate, `{"id":"checkout-text"}`))
		_, err := fire(w, "logkit")
		Expect(err).NotTo(HaveOccurred())

		t := result(do(w, "k5", fleet.KindTryCandidate, `{"id":"api-warn"}`))
		Expect(t["passed"]).To(BeFalse())
		Expect(t["reason"]).To(ContainSubstring("format json -> ecs"))
		checkout, _ := service(describe(w), "checkout")
		Expect(checkout.Config.Format).To(Equal(fleet.FormatText), "checkout pinned its format when the candidate was applied")

		// Proposed again against the configuration now, it passes.
		result(do(w, "k6", fleet.KindRollbackCandidate, `{"id":"api-warn"}`))
		result(do(w, "k7", fleet.KindProposeCandidate, `{"id":"api-warn-2","service":"api","change":{"level":"warn"}}`))
		Expect(result(do(w, "k8", fleet.KindTryCandidate, `{"id":"api-warn-2"}`))["passed"]).To(BeTrue())
	})

	It("is replayed when the world is rebuilt from its ledger, which must answer it as recorded", func(ctx SpecContext) {
		result(do(w, "k1", fleet.KindProposeCandidate, `{"id":"api-warn","service":"api","change":{"level":"warn"}}`))
		_, err := fire(w, "")
		Expect(err).NotTo(HaveOccurred())
		result(do(w, "k2", fleet.KindTryCandidate, `{"id":"api-warn"}`))
		reg := world.NewRegistry()
		fleet.Register(reg)
		st, err := reg.StateAt(ctx, fleet.Name, nil, w, 1<<40)
		Expect(err).NotTo(HaveOccurred(), "the stale trial after the update replays as recorded")
		snap, _ := w.Snapshot(ctx)
		Expect(st.Snapshot).To(MatchJSON(snap))

		// A doctored ledger whose event answered otherwise is refused.
		for i, e := range st.Ledger {
			if e.IsEvent() {
				st.Ledger[i].Outcome.Result = json.RawMessage(`{"library":"zlog"}`)
			}
		}
		fresh, err := reg.Open(ctx, fleet.Name, world.NewMemStore(), []byte("x/"), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(world.Restore(ctx, fresh, st)).To(MatchError(world.ErrNotReplayable))
	})
})
