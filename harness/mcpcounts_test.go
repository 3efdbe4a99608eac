package harness

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/history"
)

var _ = Describe("a run's result counts its MCP tool calls", func() {
	It("by who keyed them and whether the journal answered them again, with the servers and tools called", func() {
		effects := []history.EffectRecord{
			{ID: "k/ticket-1", Key: "ticket-1", Kind: "mcp.tickets.create_ticket", Replays: 2},
			{ID: "u/1", Kind: "mcp.tickets.list_tickets", Unkeyed: true},
			{ID: "k/mcp-cp1/0/notes__add_note/0011", Key: "mcp-cp1/0/notes__add_note/0011", Kind: "mcp.notes.add_note"},
			{ID: "k/ticket-2", Key: "ticket-2", Kind: "mcp.tickets.create_ticket"},
			{ID: "k/deploy", Key: "deploy", Kind: "cloud.deploy_service"},
			{ID: "k/put", Key: "put", Kind: "http.etcd.put"},
		}
		Expect(mcpCounts(effects)).To(Equal(&history.MCPCounts{Calls: 4, AgentKeyed: 2, Derived: 1, Unkeyed: 1, Replayed: 1,
			Servers: []history.MCPServerCalls{{Server: "notes", Tools: []string{"add_note"}}, {Server: "tickets", Tools: []string{"create_ticket", "list_tickets"}}}}))
		Expect(mcpCounts(effects[4:])).To(BeNil(), "a run without tools/calls has no mcp in its result")
	})
})
