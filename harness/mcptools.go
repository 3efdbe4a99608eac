package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/scenarios"
)

// ChangeMCPTool implements chaos.MCP: the gateway serves the tool changed
// from now on (MCPTools, MCPCall), and notifies the agent's MCP sessions
// (notifications/tools/list_changed).
func (t runTarget) ChangeMCPTool(c chaos.MCPToolChange) {
	if t.r.mcpChanged == nil {
		t.r.mcpChanged = map[string]mcpChange{}
	}
	ch := mcpChange{MCPToolChange: c}
	if f := t.r.faults.firing; f != nil {
		ch.by = f.rec.Spec
	}
	t.r.mcpChanged[c.Tool.String()] = ch
	t.r.mcpToolsChangedLocked()
}

// mcpChange is a tool change and the spec of the fault that made it.
type mcpChange struct {
	chaos.MCPToolChange
	by string
}

// RestoreMCPTool implements chaos.MCP.
func (t runTarget) RestoreMCPTool(tool chaos.MCPScope) {
	delete(t.r.mcpChanged, tool.String())
	t.r.mcpToolsChangedLocked()
}

// mcpChanges are the tools changed now, by <server>__<tool>.
func (r *run) mcpChanges() map[string]mcpChange {
	r.mu.Lock()
	defer r.unlock()
	return maps.Clone(r.mcpChanged)
}

// changeTool makes t (a copy, named as the agent sees it) what the agent
// is served under change ch: hidden from tools/list, or with its input
// schema changed.
func changeTool(t *mcp.Tool, ch chaos.MCPToolChange) {
	if ch.Gone {
		meta := maps.Clone(t.Meta)
		if meta == nil {
			meta = mcp.Meta{}
		}
		meta[gateway.MCPMetaGone] = true
		t.Meta = meta
		return
	}
	schema := schemaMap(t.InputSchema)
	props, _ := schema["properties"].(map[string]any)
	props = maps.Clone(props)
	if props == nil {
		props = map[string]any{}
	}
	var required []any
	if r, ok := schema["required"].([]any); ok {
		required = slices.Clone(r)
	}
	for _, rn := range ch.Renames {
		if p, ok := props[rn.Old]; ok {
			props[rn.New] = p
			delete(props, rn.Old)
		}
		for i, name := range required {
			if name == rn.Old {
				required[i] = rn.New
			}
		}
	}
	for _, name := range ch.Require {
		if _, ok := props[name]; !ok {
			props[name] = map[string]any{"type": "string", "description": "required since the tool's input schema changed"}
		}
		if !slices.Contains(required, any(name)) {
			required = append(required, name)
		}
	}
	schema["properties"], schema["required"] = props, required
	t.InputSchema = schema
}

// schemaMap is a copy of an input schema as a JSON object.
func schemaMap(s any) map[string]any {
	raw, _ := json.Marshal(s)
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || m == nil {
		m = map[string]any{"type": "object"}
	}
	return m
}

// changedCall checks a call of tool (as the agent sees it), changed by ch,
// against the changed tool: a gone tool, or arguments in the old shape,
// are refused with a tool error saying what changed; arguments in the new
// shape are translated to the real server's (a renamed argument back to
// its old name, a required one the server does not know dropped).
func changedCall(tool string, ch chaos.MCPToolChange, args []byte, serverTools []*mcp.Tool) ([]byte, *mcp.CallToolResult) {
	refuse := func(format string, a ...any) ([]byte, *mcp.CallToolResult) {
		return nil, &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, a...)}}}
	}
	if ch.Gone {
		return refuse("tool %s is gone: MCP server %s no longer offers it (an mcp-tool-gone fault); list the tools again", tool, ch.Tool.Server)
	}
	var m map[string]any
	if err := json.Unmarshal(args, &m); err != nil || m == nil {
		return args, nil // not an object: the server says what is wrong with it
	}
	var what []string
	for _, rn := range ch.Renames {
		what = append(what, fmt.Sprintf("argument %q is now %q", rn.Old, rn.New))
	}
	for _, name := range ch.Require {
		what = append(what, fmt.Sprintf("%q is now required", name))
	}
	changed := strings.Join(what, "; ")
	for _, rn := range ch.Renames {
		if _, old := m[rn.Old]; old {
			return refuse("tool %s's input schema changed: %s. This call sends %q; list the tools again and send it in the new shape", tool, changed, rn.Old)
		}
	}
	for _, name := range ch.Require {
		if _, ok := m[name]; !ok {
			return refuse("tool %s's input schema changed: %s. This call lacks %q; list the tools again and send it in the new shape", tool, changed, name)
		}
	}
	var known map[string]any
	_, name, _ := strings.Cut(tool, scenarios.MCPToolSeparator)
	for _, t := range serverTools {
		if t.Name == name {
			known, _ = schemaMap(t.InputSchema)["properties"].(map[string]any)
		}
	}
	for _, rn := range ch.Renames {
		if v, ok := m[rn.New]; ok {
			m[rn.Old] = v
			delete(m, rn.New)
		}
	}
	for _, name := range ch.Require {
		if _, ok := known[name]; !ok {
			delete(m, name)
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return args, nil
	}
	return out, nil
}

// refuseChangedCall journals a tools/call the gateway refused because of
// change ch (an EventMCPRefused event: which tool, the args digest, why,
// the fault) and answers the refusal. It is no effect. A call of an
// attempt that does not own the run is fenced instead, as its effect
// would be.
func (r *run) refuseChangedCall(ctx context.Context, c gateway.Caller, call gateway.MCPCall, ch mcpChange, args []byte, refused *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	ref := history.MCPRefusal{Tool: call.Tool, Key: call.Key, ArgsDigest: hashHex(args), Reason: text(refused), Fault: ch.by, Attempt: c.Attempt}
	r.mu.Lock()
	defer r.unlock()
	if err := r.writable(c); err != nil {
		return nil, err
	}
	if err := r.appendEventLocked(context.WithoutCancel(ctx), history.EventMCPRefused, "refused "+call.Tool+": "+ref.Reason, ref); err != nil {
		return nil, fmt.Errorf("journal the refused call of %s: %w", call.Tool, err)
	}
	return refused, nil
}

// text is the text of a tool result's first content.
func text(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if t, ok := res.Content[0].(*mcp.TextContent); ok {
		return t.Text
	}
	return ""
}
