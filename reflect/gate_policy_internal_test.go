package reflect

import (
	"github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
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
