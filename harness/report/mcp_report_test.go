package report_test

import (
	"bytes"
	"encoding/json"
	stdhtml "html"
	"strings"
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
	// Two calls the gateway refused: one in the old shape of a tool an
	// mcp-schema fault changed, one of a tool an mcp-tool-gone fault took away.
	refused := func(seq int64, at time.Duration, r history.MCPRefusal) history.EventRecord {
		data, err := json.Marshal(r)
		Expect(err).NotTo(HaveOccurred())
		return history.EventRecord{Seq: seq, Attempt: r.Attempt, Type: history.EventMCPRefused, Message: "refused " + r.Tool + ": " + r.Reason, Data: data, Virtual: virtual.Add(at)}
	}
	events := []history.EventRecord{
		{Seq: 1, Attempt: 1, Type: "progress", Message: "step 1", Virtual: virtual},
		refused(2, 3*time.Minute, history.MCPRefusal{Tool: "tickets__create_ticket", Key: "ticket-5", ArgsDigest: "9f2c", Fault: "mcp-schema:tickets__create_ticket:rename=title>summary@step:2", Attempt: 2,
			Reason: `tool tickets__create_ticket's input schema changed: argument "title" is now "summary". This call sends "title"; list the tools again and send it in the new shape`}),
		refused(3, 5*time.Minute, history.MCPRefusal{Tool: "tickets__close_ticket", ArgsDigest: "77aa", Fault: "mcp-tool-gone:tickets__close_ticket@step:3", Attempt: 2,
			Reason: "tool tickets__close_ticket is gone: MCP server tickets no longer offers it (an mcp-tool-gone fault); list the tools again"}),
	}
	return &history.Full{Run: &history.Run{Record: rec, Clock: virtual, Effects: effects, Events: events,
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
		Expect(page).To(ContainSubstring("<h2>MCP calls refused</h2>"))
		for _, row := range []string{
			`<tr><td>+3m virtual</td><td><code>tickets__create_ticket</code></td><td class="n">2</td><td>ticket-5</td><td><code>mcp-schema:tickets__create_ticket:rename=title>summary@step:2</code></td><td class="bad">tool tickets__create_ticket's input schema changed: argument "title" is now "summary".`,
			`<tr><td>+5m virtual</td><td><code>tickets__close_ticket</code></td><td class="n">2</td><td>unkeyed</td><td><code>mcp-tool-gone:tickets__close_ticket@step:3</code></td><td class="bad">tool tickets__close_ticket is gone`,
		} {
			Expect(page).To(ContainSubstring(row))
		}
		Expect(md.String()).To(ContainSubstring("## MCP calls refused"))
		Expect(md.String()).To(ContainSubstring("| +5m virtual | tickets__close_ticket | 2 | unkeyed | mcp-tool-gone:tickets__close_ticket@step:3 | tool tickets__close_ticket is gone"))
	})

	It("show the refused calls of a run whose every tools/call was refused", func() {
		f := mcpFixture()
		var effects []history.EffectRecord
		for _, e := range f.Run.Effects {
			if !strings.HasPrefix(e.Kind, "mcp.") {
				effects = append(effects, e)
			}
		}
		f.Run.Effects, f.Gate = effects, nil
		var html, md bytes.Buffer
		Expect(report.RunHTML(&html, f, report.RunOptions{})).To(Succeed())
		Expect(report.RunMarkdown(&md, f)).To(Succeed())
		for _, page := range []string{stdhtml.UnescapeString(html.String()), md.String()} {
			Expect(page).To(ContainSubstring("MCP tool calls"))
			Expect(page).To(ContainSubstring("No tools/call became an effect."))
			Expect(page).To(ContainSubstring("MCP calls refused"))
			Expect(page).To(ContainSubstring("tool tickets__close_ticket is gone"))
		}
	})

	It("count them in the result, its text and its JSON", func() {
		res := &history.Result{RunID: "20261203-100000-mcp001", Scenario: "mcp-tickets", Seed: 1, Verdict: "pass", Reason: "all 1 invariants hold", Outcome: "success",
			Attempts: 2, StepsCompleted: 3, Effects: history.EffectCounts{Executed: 4, Deduplicated: 1, Unkeyed: 1},
			MCP: &history.MCPCounts{Calls: 4, AgentKeyed: 2, Derived: 1, Unkeyed: 1, Replayed: 1, Refused: 1,
				Refusals: []history.MCPRefusal{{Tool: "tickets__close_ticket", ArgsDigest: "77aa", Fault: "mcp-tool-gone:tickets__close_ticket@step:3", Attempt: 2, Seq: 3,
					Virtual: time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC), Reason: "tool tickets__close_ticket is gone: MCP server tickets no longer offers it (an mcp-tool-gone fault); list the tools again"}},
				Servers: []history.MCPServerCalls{{Server: "notes", Tools: []string{"add_note"}}, {Server: "tickets", Tools: []string{"create_ticket", "list_tickets"}}}},
			HistoryDigest: "c0ffee"}
		var text, js bytes.Buffer
		Expect(res.WriteText(&text)).To(Succeed())
		Expect(report.RunJSON(&js, &history.Full{Run: &history.Run{Record: history.RunRecord{ID: res.RunID, Result: res}}})).To(Succeed())
		golden("run-mcp.txt", text.Bytes())
		golden("run-mcp.json", js.Bytes())
		Expect(text.String()).To(ContainSubstring("MCP: 4 calls to notes (add_note), tickets (create_ticket, list_tickets): 2 keyed by the agent, 1 derived, 1 unkeyed, 1 replayed; 1 refused before they became effects\n"))
		Expect(text.String()).To(ContainSubstring("MCP refused: tickets__close_ticket (attempt 2, fault mcp-tool-gone:tickets__close_ticket@step:3): tool tickets__close_ticket is gone"))
		Expect(js.String()).To(ContainSubstring(`"mcp": {`))
		var back history.Result
		Expect(json.Unmarshal(js.Bytes(), &back)).To(Succeed())
		Expect(back.MCP.Refusals).To(Equal(res.MCP.Refusals), "each refused call is in the JSON: tool, when, attempt, fault, what the agent was told")
	})

	It("have no MCP section for a run that made no tools/call", func() {
		var html, md bytes.Buffer
		Expect(report.RunHTML(&html, runFixture(), report.RunOptions{})).To(Succeed())
		Expect(report.RunMarkdown(&md, runFixture())).To(Succeed())
		Expect(html.String()).NotTo(ContainSubstring("MCP tool calls"))
		Expect(md.String()).NotTo(ContainSubstring("MCP tool calls"))
	})
})
