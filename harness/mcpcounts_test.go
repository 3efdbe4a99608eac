package harness

import (
	"encoding/json"

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
		Expect(mcpCounts(effects, nil)).To(Equal(&history.MCPCounts{Calls: 4, AgentKeyed: 2, Derived: 1, Unkeyed: 1, Replayed: 1,
			Servers: []history.MCPServerCalls{{Server: "notes", Tools: []string{"add_note"}}, {Server: "tickets", Tools: []string{"create_ticket", "list_tickets"}}}}))
		Expect(mcpCounts(effects[4:], nil)).To(BeNil(), "a run without tools/calls has no mcp in its result")
	})

	It("counts and lists the calls refused before they became effects apart from the calls", func() {
		refusal := history.MCPRefusal{Tool: "tickets__close_ticket", ArgsDigest: "ab", Reason: "gone", Fault: "mcp-tool-gone:tickets__close_ticket@step:1"}
		refused, _ := json.Marshal(refusal)
		events := []history.EventRecord{{Seq: 1, Type: "progress"}, {Seq: 2, Type: history.EventMCPRefused, Data: refused}}
		refusal.Seq = 2 // the event's
		Expect(mcpCounts(nil, events)).To(Equal(&history.MCPCounts{Refused: 1, Refusals: []history.MCPRefusal{refusal}}), "a run whose only tools/call was refused")
		effects := []history.EffectRecord{{ID: "k/t", Key: "t", Kind: "mcp.tickets.create_ticket"}}
		Expect(mcpCounts(effects, events)).To(Equal(&history.MCPCounts{Calls: 1, AgentKeyed: 1, Refused: 1, Refusals: []history.MCPRefusal{refusal},
			Servers: []history.MCPServerCalls{{Server: "tickets", Tools: []string{"create_ticket"}}}}))
	})
})
