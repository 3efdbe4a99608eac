package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/scenarios"
)

// mcpRow is one tools/call of the agent, as the run's report shows it.
type mcpRow struct {
	Call, Tool, Key, KeyBy, Status, Replayed, Gate string
	// Reconciled: the call was in doubt (the server's answer lost) and
	// its tool's lookup found it done; the result is the lookup's, marked
	// _meta["overnight.dev/reconciled"].
	Reconciled bool
}

// StatusText is the call's status for people, "done (reconciled by
// lookup)" for a call its lookup found done.
func (r mcpRow) StatusText() string {
	if r.Reconciled {
		return r.Status + " (reconciled by lookup)"
	}
	return r.Status
}

// mcpServerRow is an MCP server and the tools of it the run called.
type mcpServerRow struct {
	Server string
	Tools  string
}

// mcpCalls are a run's tools/calls (its effects of kind
// mcp.<server>.<tool>), in order, and each server with the tools called.
func mcpCalls(effects []history.EffectRecord, gate []history.GateRecord) ([]mcpRow, []mcpServerRow) {
	decided := map[string]history.GateRecord{}
	for _, g := range gate {
		decided[g.EffectID] = g // the last decision of each effect wins
	}
	var rows []mcpRow
	for _, e := range effects {
		server, tool, key, ok := harness.MCPCallOf(e)
		if !ok {
			continue
		}
		row := mcpRow{Call: history.EffectLabel(e.ID), Tool: server + "__" + tool, Key: e.Key, KeyBy: string(key), Status: e.Status, Replayed: "no", Gate: "not held",
			Reconciled: e.Reconciled && scenarios.MCPReconciled(e.Result)}
		if key == harness.MCPUnkeyed {
			row.Key, row.KeyBy = "unkeyed", "–"
		}
		if e.Replays > 0 {
			row.Replayed = fmt.Sprintf("yes (%s)", history.Count(e.Replays, "time"))
		}
		if g, ok := decided[e.ID]; ok {
			row.Gate = g.Policy + ": " + g.Decision
			if g.By != "" {
				row.Gate += " by " + g.By
			}
		}
		rows = append(rows, row)
	}
	var servers []mcpServerRow
	for _, s := range harness.MCPServersCalled(effects) {
		servers = append(servers, mcpServerRow{Server: s.Server, Tools: strings.Join(s.Tools, ", ")})
	}
	return rows, servers
}

// mcpRefusedRow is a tools/call the gateway refused before it became an
// effect (an mcp-tool-gone or mcp-schema fault had changed its tool).
type mcpRefusedRow struct {
	When, Tool, Key, Fault, Told string
	Attempt                      int
}

// mcpRefused are a run's refused tools/calls, as its report shows them;
// virtual writes a virtual instant.
func mcpRefused(refusals []history.MCPRefusal, virtual func(time.Time) string) []mcpRefusedRow {
	var rows []mcpRefusedRow
	for _, r := range refusals {
		row := mcpRefusedRow{When: virtual(r.Virtual) + " virtual", Tool: r.Tool, Key: r.Key, Fault: r.Fault, Told: r.Reason, Attempt: r.Attempt}
		if row.Key == "" {
			row.Key = "unkeyed"
		}
		rows = append(rows, row)
	}
	return rows
}

// mcpRefusedText introduces the refused calls.
const mcpRefusedText = "Calls the gateway refused before they became effects: the tool had vanished (mcp-tool-gone) or its input schema had changed and the call was in the old shape (mcp-schema). The server never saw them; the agent got the tool error shown."

// mcpMarkdown writes the MCP section of a run's Markdown report (nothing
// for a run that made no tools/call).
func mcpMarkdown(b *strings.Builder, m *runModel) {
	if len(m.MCP) == 0 && len(m.MCPRefused) == 0 {
		return
	}
	var rows [][]string
	for _, s := range m.MCPServers {
		rows = append(rows, []string{s.Server, s.Tools})
	}
	mdSection(b, "MCP tool calls", "The MCP servers the agent called through the gateway, and each tools/call: its key (given by the agent, derived by the harness, or none), its status (reconciled by lookup: in doubt, then found done by its tool's lookup), whether the journal answered it, and the gate's decision.",
		"No tools/call became an effect.", "| server | tools called |\n|---|---|", rows)
	if len(m.MCP) > 0 {
		rows = nil
		for _, c := range m.MCP {
			rows = append(rows, []string{c.Call, c.Tool, c.Key, c.KeyBy, c.StatusText(), c.Replayed, c.Gate})
		}
		mdTable(b, "| call | tool | key | key by | status | replayed | gate |\n|---|---|---|---|---|---|---|", rows)
	}
	if len(m.MCPRefused) > 0 {
		rows = nil
		for _, r := range m.MCPRefused {
			rows = append(rows, []string{r.When, r.Tool, fmt.Sprint(r.Attempt), r.Key, r.Fault, r.Told})
		}
		mdSection(b, "MCP calls refused", mcpRefusedText, "", "| when | tool | attempt | key | fault | what the agent was told |\n|---|---|--:|---|---|---|", rows)
	}
}

// MCPRefusedText introduces the refused calls in the HTML report.
func (m *runModel) MCPRefusedText() string { return mcpRefusedText }
