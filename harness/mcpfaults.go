package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/mcpworld"
)

// CodeMCPRPCError is the code of an effect an mcp-rpc-error fault failed:
// the agent gets a JSON-RPC internal error (-32603).
const CodeMCPRPCError = "mcp_rpc_error"

// mcpToxic is the MCP path's toxic (chaos.MCPToxic) and the fault that
// set it.
type mcpToxic struct {
	toxic chaos.MCPToxic
	by    *faultState
}

// SetMCPToxic implements chaos.MCP.
func (t runTarget) SetMCPToxic(tx chaos.MCPToxic) {
	t.r.fx.mcp = mcpToxic{toxic: tx, by: t.r.faults.firing}
}

// mcpHit is the MCP toxic a tools/call meets (nil: none).
type mcpHit struct {
	toxic  chaos.MCPToxic
	by     string // the fault's spec
	server string
}

// mcpKindParts splits an effect kind mcp.<server>.<tool>.
func mcpKindParts(kind string) (server, tool string, ok bool) {
	return kindParts(scenarios.MCPKindPrefix, kind)
}

// kindParts splits an effect kind <prefix><world>.<rest> (an MCP server's
// mcp.<server>.<tool>, an HTTP API's http.<api>.<route>).
func kindParts(prefix, kind string) (world, rest string, ok bool) {
	rest, ok = strings.CutPrefix(kind, prefix)
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, ".")
}

// takeMCPToxic is the MCP toxic effect e meets, if its scope takes e's
// tool: a one-shot toxic is spent by it, and its fault credited with it.
func (p *effectPath) takeMCPToxic(ctx context.Context, e *effect) *mcpHit {
	t := p.mcp
	if t.toxic.Kind == "" {
		return nil
	}
	server, tool, ok := mcpKindParts(e.req.Kind)
	if !ok || !t.toxic.Scope.Matches(server, tool) {
		return nil
	}
	if t.toxic.Once {
		p.mcp = mcpToxic{}
		p.r.faults.reapplyTop(chaos.PathMCP)
	}
	p.r.faults.hitEffect(ctx, t.by, p.intents, t.toxic.Once)
	h := &mcpHit{toxic: t.toxic, server: server}
	if t.by != nil {
		h.by = t.by.rec.Spec
	}
	return h
}

func (h *mcpHit) is(kind string) bool { return h != nil && h.toxic.Kind == kind }

// answersInstead says the toxic answers the call without the server.
func (h *mcpHit) answersInstead() bool { return h.is(chaos.MCPToolError) || h.is(chaos.MCPRPCError) }

// outcome is the answer of a toxic that answers instead of the server:
// failed and transient, so that a retry under the same key runs the call.
func (h *mcpHit) outcome() world.Outcome {
	if h.is(chaos.MCPRPCError) {
		return world.Outcome{Status: protocol.StatusFailed, Error: &protocol.EffectError{Code: CodeMCPRPCError, Status: http.StatusBadGateway, Transient: true,
			Message: fmt.Sprintf("MCP server %s answered a JSON-RPC internal error (fault %s): the call did not run; retry with the same key", h.server, h.by)}}
	}
	msg := fmt.Sprintf("MCP server %s failed the call (fault %s): the tool did not run; retry with the same key", h.server, h.by)
	raw, _ := json.Marshal(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}})
	return world.Outcome{Status: protocol.StatusFailed, Error: &protocol.EffectError{Code: mcpworld.CodeToolError, Status: http.StatusServiceUnavailable, Transient: true,
		Message: msg, Details: raw}}
}

// armMCPCrash makes the stdio server of an mcp-crash hit die as its answer
// to the call arrives; the returned func disarms it.
func (p *effectPath) armMCPCrash(h *mcpHit) func() {
	if !h.is(chaos.MCPCrash) {
		return func() {}
	}
	mc := p.r.h.mcpServers().connOf(p.r.rec.ID, h.server)
	if mc == nil || mc.pid() == 0 {
		p.r.log.Warn("mcp-crash: the MCP server has no process of the harness's to kill", "server", h.server, "fault", h.by)
		return func() {}
	}
	mc.crash.Store(true)
	return func() { mc.crash.Store(false) }
}

// lostMessage says why a call that failed on its way to the server is in
// doubt.
func (h *mcpHit) lostMessage(err error) string {
	if !h.is(chaos.MCPCrash) {
		return err.Error()
	}
	return fmt.Sprintf("MCP server %s was killed (fault %s) after it received the call, before its answer reached the harness; it is started again for the next call, "+
		"and whether it acted is found out, if at all, by the tool's lookup when the call is retried under its key: %v", h.server, h.by, err)
}

// afterMCPToxic lets a toxic that acts once the server answered act: an
// mcp-timeout holds the answer and loses it (the call is unknown: lost),
// an mcp-slow moves the run's clock on by its delay.
func (p *effectPath) afterMCPToxic(ctx context.Context, e *effect, h *mcpHit) (lost bool, err error) {
	r := p.r
	switch {
	case h.is(chaos.MCPTimeout):
		r.outside(func() { time.Sleep(chaos.MaxMCPTimeout) })
		rec := e.rec
		rec.Status, rec.Result = protocol.StatusUnknown, nil
		rec.Error = &protocol.EffectError{Code: "unknown", Status: http.StatusGatewayTimeout, Transient: true,
			Message: fmt.Sprintf("MCP server %s did not answer in time (fault %s): the call is in doubt; retry with the same key to learn what it did", h.server, h.by)}
		if err := p.put(ctx, rec); err != nil {
			return true, fmt.Errorf("journal effect %s as in doubt: %w", history.EffectLabel(rec.ID), err)
		}
		return true, nil
	case h.is(chaos.MCPSlow):
		return false, r.clock.advanceTo(ctx, r.clock.now.Add(h.toxic.Delay), &r.faults, nil)
	}
	return false, nil
}

// connOf is run runID's connection to server name (nil: none).
func (p *mcpServers) connOf(runID, name string) *mcpConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns[runID][name]
}

// errMCPCrashed is what the harness's side of a stdio server's connection
// reads once an mcp-crash fault killed it.
var errMCPCrashed = errors.New("the MCP server was killed by an mcp-crash fault")

// crashingConn is the harness's side of a stdio server's connection: when
// its server's crash is armed, the next tools/call written through it is
// marked, and the server is SIGKILLed as its answer arrives — after it
// received and acted on the call — and the answer is lost.
type crashingConn struct {
	mcp.Connection
	mc *mcpConn

	mu     sync.Mutex
	marked *jsonrpc.ID
}

func (c *crashingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/call" && req.IsCall() && c.mc.crash.CompareAndSwap(true, false) {
		id := req.ID
		c.mu.Lock()
		c.marked = &id
		c.mu.Unlock()
	}
	return c.Connection.Write(ctx, msg)
}

func (c *crashingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil {
		c.mu.Lock()
		hit := c.marked != nil && *c.marked == resp.ID
		if hit {
			c.marked = nil
		}
		c.mu.Unlock()
		if hit {
			c.mc.kill(0)
			return nil, errMCPCrashed
		}
	}
	return msg, err
}

// lacksMCPServer says what an MCP fault's spec needs of the scenario's MCP
// servers that they do not offer: the server its scope names, and, for
// mcp-crash, a stdio server to kill.
func lacksMCPServer(scen *scenarios.Scenario, spec chaos.Spec) []string {
	sc, err := chaos.MCPScopeOf(spec)
	if err != nil {
		return nil // refused by the catalog already
	}
	var names, stdio []string
	for _, s := range scen.MCPServers() {
		names = append(names, s.Name)
		if len(s.Command) > 0 {
			stdio = append(stdio, s.Name)
		}
	}
	if sc.Server != "" {
		s, ok := scen.MCPServer(sc.Server)
		if !ok {
			return []string{fmt.Sprintf("%s names MCP server %q, which this scenario does not declare (its servers: %s)", spec.Kind, sc.Server, strings.Join(names, ", "))}
		}
		if spec.Kind == "mcp-crash" && len(s.Command) == 0 {
			return []string{fmt.Sprintf("mcp-crash kills a stdio MCP server the harness starts, and %s is not one: name a server with command: (%s)", s.Label(), strings.Join(stdio, ", "))}
		}
		return nil
	}
	if spec.Kind == "mcp-crash" && len(stdio) == 0 {
		return []string{"mcp-crash kills a stdio MCP server the harness starts, and no MCP server of this scenario is one (each is reached by URL or runs as an image)"}
	}
	return nil
}
