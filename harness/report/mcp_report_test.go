package report_test

import (
	"bytes"
	"encoding/json"
	stdhtml "html"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/report"
)

// mcpFixture is the history of an MCP run: tools/calls keyed by the agent
// (one answered again from the journal after a kill), one with a key the
// harness derived, one unkeyed, one in doubt and found done by its
// tool's lookup, one reconciled as not executed and run again, one held at the gate and approved, and an
// effect of another world beside them.
func mcpFixture() *history.Full {
	start := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	virtual := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := history.RunRecord{ID: "20261203-100000-mcp001", Scenario: "mcp-tickets", Source: "examples/mcp/scenario.yaml", Seed: 1,
		Status: history.StatusRunning, StartedAt: start, Attempts: 2, VirtualStart: virtual}
	effects := []history.EffectRecord{
		{ID: history.KeyedID("ticket-1"), Key: "ticket-1", Order: 1, Kind: "mcp.tickets.create_ticket", Status: "done", Attempt: 1, Executions: 1},
		{ID: history.KeyedID("ticket-2"), Key: "ticket-2", Order: 2, Kind: "mcp.tickets.create_ticket", Status: "done", Attempt: 1, Executions: 1, Replays: 1},
		{ID: history.UnkeyedID(1), Order: 3, Kind: "mcp.tickets.list_tickets", Status: "done", Attempt: 2, Executions: 1, Unkeyed: true},
		{ID: history.KeyedID("mcp-cp2/0/notes__add_note/0123456789abcdef"), Key: "mcp-cp2/0/notes__add_note/0123456789abcdef", Order: 4, Kind: "mcp.notes.add_note", Status: "done", Attempt: 2, Executions: 1},
		{ID: history.KeyedID("close-1"), Key: "close-1", Order: 5, Kind: "mcp.tickets.close_ticket", Status: "done", Attempt: 2, Executions: 1},
		{ID: history.KeyedID("ticket-3"), Key: "ticket-3", Order: 6, Kind: "mcp.tickets.create_ticket", Status: "done", Attempt: 2, Executions: 1, Reconciled: true,
			Result: json.RawMessage(`{"content":[{"type":"text","text":"create_ticket took effect"}],"_meta":{"overnight.dev/reconciled":true}}`)},
		{ID: history.KeyedID("ticket-4"), Key: "ticket-4", Order: 7, Kind: "mcp.tickets.create_ticket", Status: "done", Attempt: 2, Executions: 1, Reconciled: true,
			Result: json.RawMessage(`{"content":[{"type":"text","text":"ticket 4"}]}`)},
		{ID: history.KeyedID("deploy-1"), Key: "deploy-1", Order: 8, Kind: "cloud.deploy_service", Status: "done", Attempt: 2, Executions: 1},
	}
	gate := []history.GateRecord{
		{Seq: 1, EffectID: history.KeyedID("close-1"), Key: "close-1", Kind: "mcp.tickets.close_ticket", Attempt: 2, Policy: "approve", Decision: "held", By: "gate"},
		{Seq: 2, EffectID: history.KeyedID("close-1"), Key: "close-1", Kind: "mcp.tickets.close_ticket", Attempt: 2, Policy: "approve", Decision: "approved", By: "person:ana"},
	}
	return &history.Full{Run: &history.Run{Record: rec, Clock: virtual, Effects: effects,
		Attempts: []history.AttemptRecord{{N: 1, StartedAt: start.Add(50 * time.Millisecond)}, {N: 2, StartedAt: start.Add(900 * time.Millisecond)}}},
		Gate: gate}
}

var _ = Describe("a run's reports of MCP tool calls", func() {
	It("show the servers and tools called, and each call's tool, key, who keyed it, status, replay and the gate's decision", func() {
		f := mcpFixture()
		var html, md bytes.Buffer
		Expect(report.RunHTML(&html, f, report.RunOptions{})).To(Succeed())
		Expect(report.RunMarkdown(&md, f)).To(Succeed())
		golden("run-mcp.md", md.Bytes())
		page := stdhtml.UnescapeString(html.String())
		Expect(page).To(ContainSubstring("<h2>MCP tool calls</h2>"))
		for _, row := range []string{
			"<tr><td>tickets</td><td>close_ticket, create_ticket, list_tickets</td></tr>",
			"<tr><td>notes</td><td>add_note</td></tr>",
			`<td><code>tickets__create_ticket</code></td><td>ticket-2</td><td>agent</td><td class="ok">done</td><td>yes (1 time)</td><td>not held</td>`,
			`<td><code>tickets__list_tickets</code></td><td>unkeyed</td><td>–</td>`,
			`<td><code>notes__add_note</code></td><td>mcp-cp2/0/notes__add_note/0123456789abcdef</td><td>derived</td>`,
			`<td><code>tickets__create_ticket</code></td><td>ticket-3</td><td>agent</td><td class="ok">done (reconciled by lookup)</td>`,
			`<td><code>tickets__create_ticket</code></td><td>ticket-4</td><td>agent</td><td class="ok">done</td>`,
			`<td><code>tickets__close_ticket</code></td><td>close-1</td><td>agent</td><td class="ok">done</td><td>no</td><td>approve: approved by person:ana</td>`,
		} {
			Expect(page).To(ContainSubstring(row))
		}
		Expect(page).NotTo(ContainSubstring("cloud__deploy_service"), "an effect of another world is no tools/call")
	})

	It("count them in the result, its text and its JSON", func() {
		res := &history.Result{RunID: "20261203-100000-mcp001", Scenario: "mcp-tickets", Seed: 1, Verdict: "pass", Reason: "all 1 invariants hold", Outcome: "success",
			Attempts: 2, StepsCompleted: 3, Effects: history.EffectCounts{Executed: 4, Deduplicated: 1, Unkeyed: 1},
			MCP: &history.MCPCounts{Calls: 4, AgentKeyed: 2, Derived: 1, Unkeyed: 1, Replayed: 1,
				Servers: []history.MCPServerCalls{{Server: "notes", Tools: []string{"add_note"}}, {Server: "tickets", Tools: []string{"create_ticket", "list_tickets"}}}},
			HistoryDigest: "c0ffee"}
		var text, js bytes.Buffer
		Expect(res.WriteText(&text)).To(Succeed())
		Expect(report.RunJSON(&js, &history.Full{Run: &history.Run{Record: history.RunRecord{ID: res.RunID, Result: res}}})).To(Succeed())
		golden("run-mcp.txt", text.Bytes())
		golden("run-mcp.json", js.Bytes())
		Expect(text.String()).To(ContainSubstring("MCP: 4 calls to notes (add_note), tickets (create_ticket, list_tickets): 2 keyed by the agent, 1 derived, 1 unkeyed, 1 replayed\n"))
		Expect(js.String()).To(ContainSubstring(`"mcp": {`))
	})

	It("have no MCP section for a run that made no tools/call", func() {
		var html, md bytes.Buffer
		Expect(report.RunHTML(&html, runFixture(), report.RunOptions{})).To(Succeed())
		Expect(report.RunMarkdown(&md, runFixture())).To(Succeed())
		Expect(html.String()).NotTo(ContainSubstring("MCP tool calls"))
		Expect(md.String()).NotTo(ContainSubstring("MCP tool calls"))
	})
})
