package fleet_test

import (
	"context"
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/fleet"
	"github.com/overnight-dev/overnight/scenarios/world"
)

const task = `{"goal":{"cost_cut":0.3,"visibility_floor":0.9}}`

var _ = Describe("the fleet's goal", func() {
	var w world.World
	BeforeEach(func() { w = fresh() })
	check := func() world.Check {
		c, err := w.CheckGoal(context.Background(), json.RawMessage(task))
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		return c
	}
	// keep proposes, tries and applies a candidate.
	keep := func(id, svc, change string) {
		result(do(w, id+"/p", fleet.KindProposeCandidate, `{"id":"`+id+`","service":"`+svc+`","change":`+change+`}`))
		ExpectWithOffset(1, result(do(w, id+"/t", fleet.KindTryCandidate, `{"id":"`+id+`"}`))["passed"]).To(BeTrue())
		result(do(w, id+"/a", fleet.KindApplyCandidate, `{"id":"`+id+`"}`))
	}

	It("does not hold at the start: the cost has not come down", func() {
		c := check()
		Expect(c.OK).To(BeFalse())
		Expect(c.Detail).To(MatchRegexp(`^log cost [0-9.]+ \$/day is down 0\.0% from [0-9.]+, want at least 30\.0%`))
	})

	It("holds once the cost is down by the cut with every service's errors still visible", func() {
		keep("search-info", "search", `{"level":"info"}`)
		keep("api-warn", "api", `{"level":"warn"}`)
		c := check()
		Expect(c.OK).To(BeTrue(), c.Detail)
		Expect(c.Detail).To(ContainSubstring("candidates: 2 applied, 0 rolled back, 0 only proposed"))
	})

	It("fails a service blinded to its errors, naming it", func() {
		keep("search-info", "search", `{"level":"info"}`)
		keep("api-warn", "api", `{"level":"warn"}`)
		keep("worker-sampled", "worker", `{"sampling":0.5}`)
		c := check()
		Expect(c.OK).To(BeFalse())
		Expect(c.Detail).To(Equal("worker sees 0.5 of its errors, below the floor 0.9 (level info, sampling 0.5, exempt_errors false)"))

		keep("worker-exempt", "worker", `{"exempt_errors":true}`)
		Expect(check().OK).To(BeTrue())
		keep("billing-off", "billing", `{"level":"off"}`)
		Expect(check().Detail).To(ContainSubstring("billing sees 0 of its errors"))
	})

	It("fails a tried candidate left half-applied, until it is rolled back", func() {
		keep("search-info", "search", `{"level":"info"}`)
		keep("api-warn", "api", `{"level":"warn"}`)
		result(do(w, "k1", fleet.KindProposeCandidate, `{"id":"checkout-text","service":"checkout","change":{"format":"text"}}`))
		result(do(w, "k2", fleet.KindTryCandidate, `{"id":"checkout-text"}`))
		Expect(check().Detail).To(Equal("candidate checkout-text (checkout) was tried and neither applied nor rolled back: half-applied"))
		result(do(w, "k3", fleet.KindRollbackCandidate, `{"id":"checkout-text"}`))
		Expect(check().OK).To(BeTrue())
	})

	It("refuses a task it cannot judge, before a run and when judging", func() {
		check := fleet.Definition().CheckTask
		Expect(check(nil, json.RawMessage(task))).To(BeEmpty())
		Expect(check(nil, json.RawMessage(`{"description":"cut costs"}`))).To(ConsistOf(world.Problem{Pointer: "/goal",
			Message: `missing: the fleet world's goal needs goal: {cost_cut, visibility_floor}, e.g. {"goal":{"cost_cut":0.3,"visibility_floor":0.9}}`}))
		Expect(check(nil, json.RawMessage(`{"goal":{"cost_cut":"a lot"}}`))).To(HaveLen(2))
		Expect(check(nil, json.RawMessage(`{"goal":{"cost_cut":1.5,"visibility_floor":0.9}}`))).To(ConsistOf(world.Problem{Pointer: "/goal/cost_cut",
			Message: "want the share the log cost must come down by, in (0, 1), got 1.5"}))
		_, err := w.CheckGoal(context.Background(), json.RawMessage(`{}`))
		Expect(err).To(MatchError(ContainSubstring("cannot judge the goal")))
	})
})

var _ = Describe("the fleet's judgement of an agent's claims", func() {
	var w world.World
	BeforeEach(func() { w = fresh() })
	judge := func(claims string) (world.Check, bool) {
		chk, judged, err := world.JudgeReport(context.Background(), w, json.RawMessage(task), json.RawMessage(claims))
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		return chk, judged
	}

	It("holds the report's figures to what the world shows, within a cent", func() {
		result(do(w, "p", fleet.KindProposeCandidate, `{"id":"api-warn","service":"api","change":{"level":"warn"}}`))
		result(do(w, "t", fleet.KindTryCandidate, `{"id":"api-warn"}`))
		result(do(w, "a", fleet.KindApplyCandidate, `{"id":"api-warn"}`))
		d := describe(w)
		before, after := d.Totals.StartCostPerDay, d.Totals.CostPerDay
		claims := func(b, a float64, kept int) string {
			raw, _ := json.Marshal(map[string]any{"cost_before": b, "cost_after": a, "kept": kept, "rolled_back": 0, "note": "free text is left alone"})
			return string(raw)
		}
		chk, judged := judge(claims(before, after+0.004, 1))
		Expect(judged).To(BeTrue())
		Expect(chk.OK).To(BeTrue(), chk.Detail)

		chk, _ = judge(claims(before, after/2, 1))
		Expect(chk.OK).To(BeFalse())
		Expect(chk.Detail).To(HavePrefix("it claims a cost_after of "))
		chk, _ = judge(claims(before, after, 3))
		Expect(chk.Detail).To(Equal("it claims 3 candidates kept, and the world shows 1"))

		_, judged = judge(``)
		Expect(judged).To(BeFalse(), "no claims: nothing to judge")
	})

	It("judges an agent's claim about a candidate (world.ClaimChecker): a trial that failed is no applied candidate", func() {
		claim := func(value string) world.ClaimResult {
			r, err := world.CheckClaim(context.Background(), w, world.Claim{Name: fleet.ClaimCandidate, Value: json.RawMessage(value)})
			ExpectWithOffset(1, err).NotTo(HaveOccurred())
			return r
		}
		result(do(w, "p", fleet.KindProposeCandidate, `{"id":"api-warn","service":"api","change":{"level":"warn"}}`))
		result(do(w, "t", fleet.KindTryCandidate, `{"id":"api-warn"}`))
		Expect(claim(`{"id":"api-warn","status":"applied"}`).Detail).To(Equal("candidate api-warn is tried (its last trial passed), not applied"))
		result(do(w, "a", fleet.KindApplyCandidate, `{"id":"api-warn"}`))
		Expect(claim(`{"id":"api-warn","status":"applied"}`)).To(HaveField("Verdict", world.ClaimHolds))
		result(do(w, "k1", fleet.KindProposeCandidate, `{"id":"api-text","service":"api","change":{"format":"text"}}`))
		result(do(w, "k2", fleet.KindTryCandidate, `{"id":"api-text"}`))
		r := claim(`{"id":"api-text","status":"applied"}`)
		Expect(r.Verdict).To(Equal(world.ClaimContradicted))
		Expect(r.Detail).To(Equal("candidate api-text is tried (its last trial failed: api's log shipper parses only json or ecs: its text logs would be dropped), not applied"))
		Expect(claim(`{"id":"api-none","status":"applied"}`).Detail).To(Equal(`the fleet has no candidate "api-none"`))
		Expect(claim(`{"id":"api-text","status":"good"}`).Verdict).To(Equal(world.ClaimUnknown))
		other, err := world.CheckClaim(context.Background(), w, world.Claim{Name: "exists", Value: json.RawMessage(`{}`)})
		Expect(err).NotTo(HaveOccurred())
		Expect(other.Verdict).To(Equal(world.ClaimUnknown))
	})
})
