package chaos_test

import (
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/chaos"
)

var _ = Describe("the MCP faults", func() {
	reg := chaos.Default()

	DescribeTable("build with an optional scope, and mcp-slow with a delay first",
		func(text string, scope chaos.MCPScope) {
			s := mustSpec(text)
			_, err := reg.Build(s)
			Expect(err).NotTo(HaveOccurred())
			got, err := chaos.MCPScopeOf(s)
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(Equal(scope))
			Expect(s.String()).To(Equal(text), "round-trips")
		},
		Entry(nil, "mcp-error@effect:2", chaos.MCPScope{}),
		Entry(nil, "mcp-error:tickets@t:1h/30m", chaos.MCPScope{Server: "tickets"}),
		Entry(nil, "mcp-rpc-error:tickets__create_ticket@every:1d", chaos.MCPScope{Server: "tickets", Tool: "create_ticket"}),
		Entry(nil, "mcp-timeout:notes@step:2", chaos.MCPScope{Server: "notes"}),
		Entry(nil, "mcp-slow:30s@effect:1/1h", chaos.MCPScope{}),
		Entry(nil, "mcp-slow:2h:tickets__list_tickets@effect:1", chaos.MCPScope{Server: "tickets", Tool: "list_tickets"}),
		Entry(nil, "mcp-crash:tickets@effect:2", chaos.MCPScope{Server: "tickets"}),
		Entry(nil, "mcp-tool-gone:tickets__close_ticket@effect:3/2h", chaos.MCPScope{Server: "tickets", Tool: "close_ticket"}),
		Entry(nil, "mcp-schema:tickets__create_ticket:rename=title>summary,require=priority@t:1d", chaos.MCPScope{Server: "tickets", Tool: "create_ticket"}),
	)

	DescribeTable("refuse a bad scope or delay, saying what they want",
		func(text, want string) {
			_, err := reg.Build(mustSpec(text))
			Expect(err).To(MatchError(ContainSubstring(want)))
		},
		Entry(nil, "mcp-error:tickets__@effect:1", "want SERVER or SERVER__TOOL"),
		Entry(nil, "mcp-error:a.b@effect:1", "want SERVER or SERVER__TOOL"),
		Entry(nil, "mcp-slow@effect:1", "needs an argument"),
		Entry(nil, "mcp-slow:tickets@effect:1", "want DELAY[:SERVER|SERVER__TOOL] with a positive delay"),
		Entry(nil, "mcp-slow:0s@effect:1", "with a positive delay"),
		Entry(nil, "mcp-tool-gone:tickets@effect:1", "want SERVER__TOOL"),
		Entry(nil, "mcp-schema:tickets__create_ticket@effect:1", "want SERVER__TOOL:CHANGE[,CHANGE]"),
		Entry(nil, "mcp-schema:tickets__create_ticket:rename=title@effect:1", "rename=OLD>NEW"),
		Entry(nil, "mcp-schema:tickets__create_ticket:drop=title@effect:1", "rename=OLD>NEW or require=NAME"),
		Entry(nil, "mcp-schema:tickets__create_ticket:require=a@every:1d", "does not support trigger every"),
	)

	It("scope calls by server and by tool", func() {
		Expect(chaos.MCPScope{}.Matches("tickets", "x")).To(BeTrue())
		Expect(chaos.MCPScope{Server: "tickets"}.Matches("tickets", "x")).To(BeTrue())
		Expect(chaos.MCPScope{Server: "tickets"}.Matches("notes", "x")).To(BeFalse())
		Expect(chaos.MCPScope{Server: "tickets", Tool: "x"}.Matches("tickets", "y")).To(BeFalse())
	})

	It("are drawn by --chaos random only for a run that fronts MCP servers, and never mcp-crash", func() {
		reach := chaos.Reach{Steps: 5, Effects: 6, LLMCalls: 2, Virtual: 7 * 24 * time.Hour}
		without, err := reg.RandomKinds(reach)
		Expect(err).NotTo(HaveOccurred())
		for _, k := range without {
			Expect(k.MCP).To(BeFalse(), k.Name)
		}
		reach.MCP = true
		with, err := reg.RandomKinds(reach)
		Expect(err).NotTo(HaveOccurred())
		var mcpKinds []string
		for _, k := range with {
			if k.MCP {
				mcpKinds = append(mcpKinds, k.Name)
			}
		}
		Expect(mcpKinds).To(ConsistOf("mcp-error", "mcp-rpc-error", "mcp-slow", "mcp-timeout"))

		reach.MCP = false
		err = reg.CheckDrawable("mcp-error", reach)
		Expect(errors.Is(err, chaos.ErrNotDrawable)).To(BeTrue())
		Expect(err.Error()).To(ContainSubstring("the scenario has no mcp: block"))

		// A draw for an MCP run lands MCP faults at effects, and is the same for the seed.
		reach = chaos.Reach{Effects: 6, MCP: true, Kinds: []string{"mcp-error", "mcp-slow", "mcp-timeout"}}
		a, err := chaos.RandomSchedule(chaos.NewStreams(3).For("random-chaos"), reg, reach, 3)
		Expect(err).NotTo(HaveOccurred())
		b, _ := chaos.RandomSchedule(chaos.NewStreams(3).For("random-chaos"), reg, reach, 3)
		Expect(texts(a)).To(Equal(texts(b)))
		for _, s := range a {
			Expect(s.Trigger.Type).To(Equal(chaos.TriggerEffect), s.String())
		}
	})
})
