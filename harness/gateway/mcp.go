package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// MCPPathPrefix starts the path of the gateway's MCP endpoint: /v1/mcp/<token>
// ($OVERNIGHT_MCP_URL) serves MCP over streamable HTTP — every answer a
// JSON body — fronting the scenario's MCP servers. The attempt's token
// travels in the path, so an MCP client needs no header of its own.
const MCPPathPrefix = "/v1/mcp/"

// CodeMCPRefused is the JSON-RPC error code of the harness's own refusals
// of a tools/call (fenced, key_reused, in doubt, a fault): its data is
// {"code": "...", "retry_after_ms": N}, code the gateway protocol's.
const CodeMCPRefused = -32000

// MCPCall is one tools/call of the agent, as the gateway read it.
type MCPCall struct {
	Tool      string          // as the agent sees it: <server>__<tool>
	Key       string          // from _meta["overnight.dev/idempotency-key"] ("" : unkeyed)
	Arguments json.RawMessage // the call's arguments (null: none)
}

// MCPBackend is implemented by a Backend that serves MCP. A Backend
// without it answers 501.
type MCPBackend interface {
	// MCPTools lists the tools the caller sees, named <server>__<tool>.
	MCPTools(ctx context.Context, c Caller) ([]*mcp.Tool, error)
	// MCPCall runs one tools/call. An *Error is the harness's refusal, a
	// JSON-RPC error to the agent; a result with isError is the tool's.
	MCPCall(ctx context.Context, c Caller, call MCPCall) (*mcp.CallToolResult, error)
}

// MCPMetaGone in the _meta of a tool MCPTools returns marks a tool that
// vanished (an mcp-tool-gone fault): the endpoint stops listing it, which
// sends notifications/tools/list_changed, and a call to it still reaches
// MCPCall, which answers that it is gone.
const MCPMetaGone = "overnight.dev/gone"

// MCPWatcher may be implemented by an MCPBackend whose tools change while
// an attempt runs, or that ends attempts: the gateway hands it a listener
// when its MCP endpoint is first used, and stops listening when it closes.
type MCPWatcher interface {
	WatchMCP(l MCPListener) (stop func())
	// MCPNotified is told of each notification the endpoint delivered to a
	// client of c, after it was written to the client's stream.
	MCPNotified(ctx context.Context, c Caller, n MCPNotice)
}

// MCPListener is the gateway's MCP endpoint as a backend tells it what
// changed. Its methods never block and take no lock a backend holds: a
// backend may call them under its own lock.
type MCPListener interface {
	// MCPToolsChanged says the tools MCPTools lists may have changed: the
	// endpoint lists them again before it answers anything else, and the
	// sessions of each attempt get notifications/tools/list_changed.
	MCPToolsChanged()
	// MCPAttemptEnded says attempt n, and every one before it, is over:
	// their sessions are closed, and no new one is opened for them.
	MCPAttemptEnded(n int)
}

// MCPNotice is a notification the MCP endpoint delivered.
type MCPNotice struct {
	Method  string // notifications/tools/list_changed
	Session string // the session's Mcp-Session-Id ("": a subscriptions/listen stream, which has none)
	Stream  string // "GET" (a session's standalone stream) or "subscriptions/listen"
}

// The _meta field of a tools/call holding the agent's idempotency key
// (scenarios.MCPMetaIdempotencyKey; the gateway does not import scenarios).
const metaIdempotencyKey = "overnight.dev/idempotency-key"

// toolHandler sends the agent's tools/call of tool to b as c's call.
func (s *Server) toolHandler(b MCPBackend, c Caller, tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		call := MCPCall{Tool: tool, Arguments: req.Params.Arguments}
		if v, ok := req.Params.Meta[metaIdempotencyKey]; ok {
			key, isString := v.(string)
			if !isString || len(key) > maxHTTPKeyBytes {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
					Message: fmt.Sprintf("_meta[%q]: want a string of at most %d bytes", metaIdempotencyKey, maxHTTPKeyBytes)}
			}
			call.Key = key
		}
		if len(call.Arguments) > MaxEffectArgsBytes {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("arguments are %d bytes; at most %d", len(call.Arguments), MaxEffectArgsBytes)}
		}
		res, err := b.MCPCall(ctx, c, call)
		if hb, ok := s.backend.(Holder); ok {
			// Held here, before the SDK writes a byte of the answer
			// (whatever it wrote before the call): an attempt a fault
			// of this call is ending never hears it.
			hb.HoldReply(ctx, c)
		}
		if err != nil {
			return nil, mcpError(s, tool, err)
		}
		return res, nil
	}
}

// mcpError is a backend's error as the JSON-RPC error the agent gets.
func mcpError(s *Server, tool string, err error) error {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		return rpc
	}
	var pe *Error
	if !errors.As(err, &pe) {
		s.log.Error("MCP tools/call failed", "tool", tool, "err", err)
		pe = Errorf(http.StatusInternalServerError, protocol.CodeInternal, "%v", err)
	}
	data := map[string]any{"code": pe.Code}
	if pe.RetryAfter > 0 {
		data["retry_after_ms"] = RetryAfterSent(pe.RetryAfter).Milliseconds()
	}
	raw, _ := json.Marshal(data)
	return &jsonrpc.Error{Code: CodeMCPRefused, Message: pe.Code + ": " + pe.Message, Data: raw}
}
