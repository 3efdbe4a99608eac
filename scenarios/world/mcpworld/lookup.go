package mcpworld

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/expr"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// checkLookups says what is wrong with the server's lookups against the
// tools it lists: each must look up a listed tool with a listed tool that
// is read-only (readOnlyHint). The error names where the scenario
// declares the lookup.
func checkLookups(server scenarios.MCPServer, tools []*mcp.Tool) error {
	listed := map[string]*mcp.Tool{}
	var names []string
	for _, t := range tools {
		listed[t.Name] = t
		names = append(names, t.Name)
	}
	sort.Strings(names)
	var looked []string
	for tool := range server.Lookups {
		looked = append(looked, tool)
	}
	sort.Strings(looked)
	for _, tool := range looked {
		l := server.Lookups[tool]
		if _, ok := listed[tool]; !ok {
			return fmt.Errorf("%s: lookups.%s: the server lists no tool %q (it lists %s)", l.At, tool, tool, strings.Join(names, ", "))
		}
		read, ok := listed[l.Tool]
		if !ok {
			return fmt.Errorf("%s: lookups.%s.tool: the server lists no tool %q (it lists %s)", l.At, tool, l.Tool, strings.Join(names, ", "))
		}
		if ro, _, _ := Flags(read); !ro {
			return fmt.Errorf("%s: lookups.%s.tool: tool %q is not read-only (its annotations give no readOnlyHint), and a lookup must change nothing", l.At, tool, l.Tool)
		}
	}
	return nil
}

// lookUp finds out whether req, a call whose answer was lost, took
// effect, by its tool's lookup: the read-only tool called with the
// lookup's args, its answer judged by found (over args, key and
// response). Found, the call is done — its result a CallToolResult whose
// _meta says it was reconciled (scenarios.MCPMetaReconciled) — and
// journaled as the server's answer; not found, it never happened. A tool
// without a lookup, a lookup the server refuses or that cannot be
// evaluated, cannot say: an error wrapping world.ErrCannotLookup. A
// server that does not answer is a *ServerError (ask again later).
func (w *World) lookUp(ctx context.Context, req world.Request) (world.Outcome, bool, error) {
	name := strings.TrimPrefix(req.Kind, w.cfg.Server.EffectKind(""))
	l, ok := w.cfg.Server.Lookups[name]
	cannot := func(format string, args ...any) (world.Outcome, bool, error) {
		return world.Outcome{}, false, fmt.Errorf("MCP server %s: whether %s (key %q) happened: %s: %w", w.cfg.Server.Name, req.Kind, req.Key, fmt.Sprintf(format, args...), world.ErrCannotLookup)
	}
	if !ok || l.Found == nil {
		return cannot("unknown (MCP has no lookup of its own, and the scenario declares none for tool %s)", name)
	}
	if w.conn == nil {
		return world.Outcome{}, false, fmt.Errorf("MCP server %s: lookup of key %q: %w", w.cfg.Server.Name, req.Key, ErrOffline)
	}
	var args any
	if len(req.Args) > 0 {
		if err := json.Unmarshal(req.Args, &args); err != nil {
			return cannot("its args: %v", err)
		}
	}
	vars := map[string]any{string(expr.Args): args, string(scenarios.MCPVarKey): req.Key}
	readArgs := json.RawMessage(`{}`)
	if l.Args != nil {
		b, err := l.Args.EvalJSON(ctx, vars)
		if err != nil {
			return cannot("%s: lookups.%s.args: %v", l.At, name, err)
		}
		readArgs = b
	}
	cs, err := w.conn.current(ctx)
	if err != nil {
		return world.Outcome{}, false, &ServerError{Server: w.cfg.Server.Name, Tool: l.Tool, Msg: "the lookup: " + err.Error()}
	}
	cctx, cancel := context.WithTimeout(ctx, w.conn.cfg.Timeout)
	defer cancel()
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: l.Tool, Arguments: readArgs})
	if err != nil {
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) {
			return cannot("the lookup %s answered JSON-RPC %d: %s", l.Tool, rpc.Code, rpc.Message)
		}
		w.conn.drop(cs)
		return world.Outcome{}, false, &ServerError{Server: w.cfg.Server.Name, Tool: l.Tool, Msg: "the lookup: " + err.Error()}
	}
	if res.IsError {
		return cannot("the lookup %s answered an error: %s", l.Tool, toolText(res))
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return cannot("the lookup %s's answer: %v", l.Tool, err)
	}
	var response any
	if err := json.Unmarshal(raw, &response); err != nil {
		return cannot("the lookup %s's answer: %v", l.Tool, err)
	}
	vars[string(expr.Response)] = response
	found, err := l.Found.EvalBool(ctx, vars)
	if err != nil {
		return cannot("%s: lookups.%s.found: %v", l.At, name, err)
	}
	if !found {
		return world.Outcome{}, false, nil
	}
	result, err := json.Marshal(&mcp.CallToolResult{
		Meta:              mcp.Meta{scenarios.MCPMetaReconciled: true},
		Content:           []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s took effect: the server's answer was lost, and its lookup (%s) found it done", name, l.Tool)}},
		StructuredContent: map[string]any{"reconciled": true, "lookup": l.Tool, "lookup_answer": res.StructuredContent},
	})
	if err != nil {
		return world.Outcome{}, false, err
	}
	out := world.Outcome{Status: protocol.StatusDone, Result: result}
	e := world.LedgerEntry{Key: req.Key, Kind: req.Kind, Args: req.Args, Outcome: out, At: req.Now}
	if err := w.dups.Record(ctx, e); err != nil {
		return world.Outcome{}, false, fmt.Errorf("journal the reconciled answer of MCP server %s to %s (key %q): %w", w.cfg.Server.Name, name, req.Key, err)
	}
	return out, true, nil
}
