package reflect

import (
	"context"
	"time"

	"github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/scenarios"
)

// These specs pin the policy of an effect no gate rule matches; the spec
// "MCP approvals" in harness drives the gate through the real gateway.
var _ = ginkgo.Describe("the gate's default policy", func() {
	reflecting := &reflector{}
	mcpAdd := harness.GateRequest{Kind: "mcp.counters.add"}
	mcpGet := harness.GateRequest{Kind: "mcp.counters.get", ReadOnly: true}
	cloud := harness.GateRequest{Kind: "cloud.set_dns"}

	ginkgo.It("verifies an MCP tool that is not read-only when the run reflects, and allows the rest", func() {
		g := &gate{rf: reflecting}
		Expect(g.defaultPolicy(mcpAdd)).To(Equal(scenarios.PolicyVerify))
		Expect(g.defaultPolicy(mcpGet)).To(Equal(scenarios.PolicyAllow), "readOnlyHint")
		Expect(g.defaultPolicy(cloud)).To(Equal(scenarios.PolicyAllow), "not an MCP tool")
		Expect((&gate{}).defaultPolicy(mcpAdd)).To(Equal(scenarios.PolicyAllow), "without reflect:")
	})

	ginkgo.It("gives way to the scenario's gate rules, first match wins", func() {
		rules := []scenarios.GateRule{{Kinds: "mcp.counters.pay", Policy: scenarios.PolicyApprove}, {Kinds: "mcp.*", Policy: scenarios.PolicyDeny}}
		i, p := rule(rules, "mcp.counters.pay")
		Expect([]any{i, p}).To(Equal([]any{0, scenarios.PolicyApprove}))
		i, p = rule(rules, "mcp.counters.get")
		Expect([]any{i, p}).To(Equal([]any{1, scenarios.PolicyDeny}), "a rule matches a read-only tool too")
		i, _ = rule(rules, "cloud.set_dns")
		Expect(i).To(Equal(-1), "no rule: the default policy decides")
	})
})

// A decision made while the run is not live is journaled and applies when
// the effect reaches the gate again (newGate reads it, as on resume) — to
// that call alone.
var _ = ginkgo.Describe("a person's decision while the run is not live", func() {
	ginkgo.It("is bound to the held call's arguments digest", func(ctx ginkgo.SpecContext) {
		h, err := harness.Open(ctx, harness.Options{StateDir: ginkgo.GinkgoT().TempDir()})
		Expect(err).NotTo(HaveOccurred())
		ginkgo.DeferCleanup(h.Close)
		rec := history.RunRecord{ID: "r-offline"}
		scen := &scenarios.Scenario{Gate: []scenarios.GateRule{{Kinds: "mcp.pay.*", Policy: scenarios.PolicyApprove}}}
		scen.Limits.Approval = time.Minute
		g, err := newGate(h, rec, scen, nil, nil)
		Expect(err).NotTo(HaveOccurred())
		held := harness.GateRequest{RunID: rec.ID, Attempt: 1, EffectID: "u/1", Kind: "mcp.pay.charge", Args: []byte(`{"amount":5}`), ArgsDigest: "d5"}
		_, err = g.hold(ctx, held, 0, scenarios.PolicyApprove, "a person")
		Expect(err).NotTo(HaveOccurred())

		list, err := heldOnRecord(h, rec.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(list).To(HaveLen(1))
		Expect(list[0].ID).To(Equal("u/1"))
		Expect(list[0].ArgsDigest).To(Equal("d5"))
		Expect(decideOnRecord(ctx, h, rec.ID, harness.Decision{Effect: "u/1", ArgsDigest: "d7", Approve: true, By: "alice"})).To(MatchError(harness.ErrOtherArgs))
		Expect(decideOnRecord(ctx, h, rec.ID, harness.Decision{Effect: "u/2", Approve: true, By: "alice"})).To(MatchError(harness.ErrNotHeld))
		Expect(decideOnRecord(ctx, h, rec.ID, harness.Decision{Effect: "u/1", ArgsDigest: "d5", Approve: true, By: "alice"})).To(Succeed())

		// Resumed: the same call is approved at once; the same effect with
		// other arguments (on a later resume) is held again, and waits (here
		// until ctx ends).
		g, err = newGate(h, rec, scen, nil, nil)
		Expect(err).NotTo(HaveOccurred())
		d, err := g.Admit(ctx, held)
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Allow).To(BeTrue())
		Expect(d.Reason).To(ContainSubstring("decided by person:alice while the run was not live"))
		g, err = newGate(h, rec, scen, nil, nil)
		Expect(err).NotTo(HaveOccurred())
		other := held
		other.Args, other.ArgsDigest = []byte(`{"amount":7}`), "d7"
		wait, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err = g.Admit(wait, other)
		Expect(err).To(MatchError(context.DeadlineExceeded), "held again: the decision was on other arguments")
	})
})
