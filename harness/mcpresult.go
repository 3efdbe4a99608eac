package harness

import (
	"bytes"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// decodeToolResult reads a CallToolResult as journaled (the server's
// answer, marshaled by the SDK). It is on every tools/call's way back to
// the agent, so the common shape — text content, structured content,
// isError, a resultType "complete", nothing else — is read with
// encoding/json, and the structured content is kept as the bytes it was
// (the SDK's server writes a json.RawMessage as it is, as its own typed
// tools do). A resultType "complete" (what the SDK's server answers a
// client of protocol 2026-07-28 or later) is the default: the gateway's
// SDK server sets it again for the agent's client if its protocol has it.
// Anything else (a result's _meta, another kind of content, annotations,
// a result that asks for input) goes through the SDK's own decoder, which
// allocates a fresh 32 KiB buffer per message.
func decodeToolResult(raw []byte, out *mcp.CallToolResult) error {
	var wire struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
		ResultType        string          `json:"resultType"`
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if d.Decode(&wire) != nil || d.More() || (wire.ResultType != "" && wire.ResultType != "complete") {
		return json.Unmarshal(raw, out)
	}
	content := make([]mcp.Content, 0, len(wire.Content))
	for _, c := range wire.Content {
		if c.Type != "text" {
			return json.Unmarshal(raw, out)
		}
		content = append(content, &mcp.TextContent{Text: c.Text})
	}
	*out = mcp.CallToolResult{Content: content, IsError: wire.IsError}
	if len(wire.StructuredContent) > 0 && string(wire.StructuredContent) != "null" {
		out.StructuredContent = wire.StructuredContent
	}
	return nil
}
