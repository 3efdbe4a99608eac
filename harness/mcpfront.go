package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/mcpworld"
)

var _ gateway.MCPBackend = (*run)(nil)

// mcpWorlds are the run's MCP servers' worlds, by server name.
func (r *run) mcpWorlds() map[string]*mcpworld.World {
	out := map[string]*mcpworld.World{}
	if rt := world.RouterOf(r.world); rt != nil {
		for _, route := range rt.Routes() {
			if w, ok := route.World.(*mcpworld.World); ok {
				out[w.Name()] = w
			}
		}
	}
	return out
}

// MCPTools implements gateway.MCPBackend: every MCP server's tools, each
// named <server>__<tool>, with its schemas and annotations, sorted by name.
func (r *run) MCPTools(context.Context, gateway.Caller) ([]*mcp.Tool, error) {
	var out []*mcp.Tool
	changed := r.mcpChanges()
	for _, w := range r.mcpWorlds() {
		for _, t := range w.Tools() {
			c := *t
			c.Name = w.Server().ToolName(t.Name)
			if ch, ok := changed[c.Name]; ok {
				changeTool(&c, ch.MCPToolChange)
			}
			out = append(out, &c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// MCPCall implements gateway.MCPBackend: one tools/call of the agent runs
// down the effect path as an effect of kind mcp.<server>.<tool> — keyed by
// its _meta key, journaled, gated, faulted — and its result is answered as
// MCP: the server's CallToolResult (isError for the tool's own error), the
// recorded one for a repeated key (its _meta saying it was replayed), a
// JSON-RPC error for what the harness or the server refused.
func (r *run) MCPCall(ctx context.Context, c gateway.Caller, call gateway.MCPCall) (res *mcp.CallToolResult, err error) {
	server, tool, ok := strings.Cut(call.Tool, scenarios.MCPToolSeparator)
	w := r.mcpWorlds()[server]
	if !ok || w == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", call.Tool)}
	}
	args := call.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if ch, changed := r.mcpChanges()[call.Tool]; changed {
		sent := args
		var refused *mcp.CallToolResult
		if args, refused = changedCall(call.Tool, ch.MCPToolChange, args, w.Tools()); refused != nil {
			return r.refuseChangedCall(ctx, c, call, ch, sent, refused)
		}
	}
	kind := w.Server().EffectKind(tool)
	key := call.Key
	if t, known := w.Tool(kind); key == "" && known && r.scen.MCP.Keys == scenarios.MCPKeysDerived {
		if readOnly, _, _ := mcpworld.Flags(t); !readOnly {
			if key, err = r.derivedMCPKey(c, call.Tool, args); err != nil {
				return nil, err
			}
		}
	}
	answer, err := r.Effect(ctx, c, protocol.EffectRequest{Key: key, Kind: kind, Args: args})
	if err != nil {
		var ge *gateway.Error
		if errors.As(err, &ge) && ge.Status == http.StatusServiceUnavailable && ge.RetryAfter == 0 {
			ge.RetryAfter = retryInDoubt // as the HTTP pass-through: the agent may try again soon
		}
		return nil, err
	}
	return mcpAnswer(call.Tool, answer)
}

// mcpOrdinal counts an attempt's mutating MCP calls since its last
// durable checkpoint, for keys: derived. It lives in memory: each attempt
// starts from 0, and a harness that dies takes its attempt with it (the
// resumed run starts a new one).
type mcpOrdinal struct {
	attempt int
	seq     int64  // the checkpoint counted from
	n       int    // mutating calls since it
	last    string // the key derived last
	lastFor string // for which call: <tool>/<args digest>
}

// derivedMCPKey is the key of keys: derived for a mutating call of tool
// (as the agent sees it) with args that carries none: the last durable
// checkpoint's seq, the call's ordinal among the attempt's mutating calls
// since it, the tool and its arguments' digest. A resumed agent repeating
// its calls from that checkpoint meets the same keys, however many reads
// it makes between them, and gets the recorded answers. A retry — the
// same call again right after the last one, whose effect has no final
// answer (in doubt, a transient failure, denied, or still under way) —
// is that call again: it keeps its key, so it is reconciled, never run
// twice.
func (r *run) derivedMCPKey(c gateway.Caller, tool string, args json.RawMessage) (string, error) {
	canon, err := canonicalJSON(args)
	if err != nil {
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("arguments of %s: %v", tool, err)}
	}
	call := tool + "/" + hashHex(canon)[:16]
	r.mu.Lock()
	defer r.mu.Unlock()
	seq, o := r.cp.Seq, &r.mcpCalls
	if c.Attempt < o.attempt { // an earlier attempt's call: fenced on the effect path, counted nowhere
		return fmt.Sprintf("%s%d/%d/%s", derivedKeyPrefix, seq, o.n, call), nil
	}
	if c.Attempt > o.attempt || o.seq != seq {
		*o = mcpOrdinal{attempt: c.Attempt, seq: seq}
	} else if o.lastFor == call {
		if rec := r.fx.effects[history.KeyedID(o.last)]; rec == nil || !rec.Final() {
			return o.last, nil
		}
	}
	key := fmt.Sprintf("%s%d/%d/%s", derivedKeyPrefix, seq, o.n, call)
	o.n++
	o.last, o.lastFor = key, call
	return key, nil
}

// derivedKeyPrefix starts every key of keys: derived:
// mcp-cp<seq>/<ordinal>/<tool>/<args digest>.
const derivedKeyPrefix = "mcp-cp"

// DerivedMCPKey says whether an MCP call's key has the shape of the keys
// the harness derives (keys: derived), for reports.
func DerivedMCPKey(key string) bool { return strings.HasPrefix(key, derivedKeyPrefix) }

// mcpAnswer is the MCP answer to an effect's result.
func mcpAnswer(tool string, res protocol.EffectResult) (*mcp.CallToolResult, error) {
	var raw json.RawMessage
	switch {
	case res.Status == protocol.StatusDone:
		raw = res.Result
	case res.Status == protocol.StatusFailed && res.Error != nil && res.Error.Code == mcpworld.CodeToolError:
		raw = res.Error.Details // the tool's own answer, isError
	case res.Status == protocol.StatusFailed && res.Error != nil && res.Error.Code == mcpworld.CodeInvalidCall:
		var d struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(res.Error.Details, &d)
		if d.Code == 0 {
			d.Code = jsonrpc.CodeInvalidParams
		}
		return nil, &jsonrpc.Error{Code: d.Code, Message: res.Error.Message}
	case res.Status == protocol.StatusFailed && res.Error != nil && res.Error.Code == CodeMCPRPCError:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: res.Error.Message}
	case res.Status == protocol.StatusDenied:
		msg := "the gate denied it"
		if res.Error != nil && res.Error.Message != "" {
			msg = res.Error.Message
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "denied: " + msg}}}, nil
	case res.Status == protocol.StatusFailed:
		e := res.Error
		if e == nil {
			return nil, gateway.Errorf(http.StatusBadGateway, "failed", "%s failed", tool)
		}
		ge := gateway.Errorf(e.Status, e.Code, "%s: %s", tool, e.Message)
		if e.Transient {
			ge.RetryAfter = retryInDoubt
		}
		return nil, ge
	default:
		msg := "its outcome is unknown"
		if res.Error != nil {
			msg = res.Error.Message
		}
		ge := gateway.Errorf(http.StatusServiceUnavailable, protocol.StatusUnknown,
			"%s is in doubt (%s); whether it happened cannot be found out, and a retry with the same key is answered so", tool, msg)
		return nil, ge
	}
	var out mcp.CallToolResult
	if err := decodeToolResult(raw, &out); err != nil {
		return nil, fmt.Errorf("effect %s of %s has a result the MCP front cannot read: %w", res.Key, tool, err)
	}
	if res.Replayed {
		if out.Meta == nil {
			out.Meta = mcp.Meta{}
		}
		out.Meta[scenarios.MCPMetaReplayed] = true
	}
	return &out, nil
}

// MCPKeyOrigin is who gave a tools/call's idempotency key.
type MCPKeyOrigin string

// Who keys a tools/call.
const (
	MCPKeyAgent   MCPKeyOrigin = "agent"   // the agent, in the call's _meta
	MCPKeyDerived MCPKeyOrigin = "derived" // the harness (keys: derived)
	MCPUnkeyed    MCPKeyOrigin = "unkeyed" // nobody: the call ran unprotected
)

// MCPCallOf reads a run's effect as a tools/call: its server, its tool
// and who keyed it (ok false: the effect is no tools/call). The result's
// counts and the run's reports read calls through it.
func MCPCallOf(e history.EffectRecord) (server, tool string, key MCPKeyOrigin, ok bool) {
	server, tool, ok = mcpKindParts(e.Kind)
	switch {
	case !ok:
		return "", "", "", false
	case e.Unkeyed || e.Key == "":
		key = MCPUnkeyed
	case DerivedMCPKey(e.Key):
		key = MCPKeyDerived
	default:
		key = MCPKeyAgent
	}
	return server, tool, key, true
}

// MCPServersCalled are the MCP servers a run's effects called, each with
// the tools called, sorted by name (nil: none).
func MCPServersCalled(effects []history.EffectRecord) []history.MCPServerCalls {
	tools := map[string][]string{}
	for _, e := range effects {
		server, tool, _, ok := MCPCallOf(e)
		if ok && !slices.Contains(tools[server], tool) {
			tools[server] = append(tools[server], tool)
		}
	}
	var out []history.MCPServerCalls
	for _, s := range slices.Sorted(maps.Keys(tools)) {
		out = append(out, history.MCPServerCalls{Server: s, Tools: slices.Sorted(slices.Values(tools[s]))})
	}
	return out
}

// mcpCounts counts a run's tools/calls among its effects, and lists the
// calls refused before they became effects among its events (nil: none).
func mcpCounts(effects []history.EffectRecord, events []history.EventRecord) *history.MCPCounts {
	refusals := history.MCPRefusals(events)
	c := history.MCPCounts{Refused: len(refusals), Refusals: refusals}
	for _, e := range effects {
		_, _, key, ok := MCPCallOf(e)
		if !ok {
			continue
		}
		c.Calls++
		switch key {
		case MCPUnkeyed:
			c.Unkeyed++
		case MCPKeyDerived:
			c.Derived++
		default:
			c.AgentKeyed++
		}
		if e.Replays > 0 {
			c.Replayed++
		}
	}
	if c.Calls == 0 && c.Refused == 0 {
		return nil
	}
	c.Servers = MCPServersCalled(effects)
	return &c
}
