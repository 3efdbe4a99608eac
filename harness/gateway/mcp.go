package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// MCPPathPrefix starts the path of the gateway's MCP endpoint: /v1/mcp/<token>
// ($OVERNIGHT_MCP_URL) serves MCP over streamable HTTP — stateless, every
// answer a JSON body — fronting the scenario's MCP servers. The attempt's
// token travels in the path, so an MCP client needs no header of its own.
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
// vanished (an mcp-tool-gone fault): tools/list omits it, and a call to it
// still reaches MCPCall, which answers that it is gone. Without a session
// (the endpoint is stateless) no notifications/tools/list_changed can be
// sent: the agent's next tools/list shows the change.
const MCPMetaGone = "overnight.dev/gone"

// The _meta field of a tools/call holding the agent's idempotency key
// (scenarios.MCPMetaIdempotencyKey; the gateway does not import scenarios).
const metaIdempotencyKey = "overnight.dev/idempotency-key"

// mcpOptions: stateless streamable HTTP, JSON answers; the socket is
// behind the token, never reached by a browser.
var mcpOptions = &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, DisableLocalhostProtection: true, MaxRequestBodyBytes: MaxBodyBytes}

// mcpEndpoint serves MCPPathPrefix+"{token}": the token authenticates, the
// official SDK's streamable HTTP handler speaks MCP, and a server made for
// the request lists the caller's tools and sends each call to the backend.
func (s *Server) mcpEndpoint(w http.ResponseWriter, r *http.Request) {
	c, ok := s.backend.Authenticate(r.PathValue("token"))
	if !ok {
		writeError(w, Errorf(http.StatusUnauthorized, protocol.CodeUnauthorized,
			"unknown token in the path: it was not minted for this run's attempt (use $OVERNIGHT_MCP_URL as it is given)"))
		return
	}
	if hb, ok := s.backend.(Holder); ok {
		w = &heldWriter{ResponseWriter: w, hold: func() { hb.HoldReply(r.Context(), c) }}
	}
	b, ok := s.backend.(MCPBackend)
	if !ok {
		writeError(w, Errorf(http.StatusNotImplemented, protocol.CodeNotImplemented, "this gateway fronts no MCP servers"))
		return
	}
	s.mcpOnce.Do(func() {
		s.mcpHandler = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
			c, ok := s.backend.Authenticate(r.PathValue("token"))
			if !ok {
				return nil
			}
			return s.mcpServer(r.Context(), b, c)
		}, mcpOptions)
	})
	s.mcpHandler.ServeHTTP(w, r)
}

// mcpServer is the MCP server a request of c is answered by: c's tools,
// each call sent to b. It is made once per attempt and list of tools.
func (s *Server) mcpServer(ctx context.Context, b MCPBackend, c Caller) *mcp.Server {
	tools, err := b.MCPTools(ctx, c)
	if err != nil {
		s.log.Error("MCP: list the tools", "err", err)
		return nil
	}
	var id strings.Builder
	fmt.Fprintf(&id, "%d", c.Attempt)
	hidden := map[string]bool{}
	for _, t := range tools {
		id.WriteString("\x00" + t.Name)
		if t.Meta[MCPMetaGone] == true {
			hidden[t.Name] = true
			id.WriteString("\x00gone")
		}
		schema, _ := json.Marshal(t.InputSchema) // a changed schema is another server
		id.Write(schema)
	}
	s.mcpMu.Lock()
	defer s.mcpMu.Unlock()
	if srv := s.mcpServers[id.String()]; srv != nil {
		return srv
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "overnight", Version: "v1"}, &mcp.ServerOptions{Logger: s.log})
	if len(hidden) > 0 {
		srv.AddReceivingMiddleware(hideTools(hidden))
	}
	for _, t := range tools {
		name := t.Name
		srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			call := MCPCall{Tool: name, Arguments: req.Params.Arguments}
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
				return nil, mcpError(s, name, err)
			}
			return res, nil
		})
	}
	if s.mcpServers == nil || len(s.mcpServers) >= 64 {
		s.mcpServers = map[string]*mcp.Server{} // a few attempts' worth; older attempts are fenced anyway
	}
	s.mcpServers[id.String()] = srv
	return srv
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

// hideTools is middleware that leaves the hidden tools out of tools/list.
func hideTools(hidden map[string]bool) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if lt, ok := res.(*mcp.ListToolsResult); ok && err == nil && method == "tools/list" {
				kept := make([]*mcp.Tool, 0, len(lt.Tools))
				for _, t := range lt.Tools {
					if !hidden[t.Name] {
						kept = append(kept, t)
					}
				}
				lt.Tools = kept
			}
			return res, err
		}
	}
}
