// Command mcpcounters is a stdio MCP server for the harness's specs,
// written with the official Go SDK: named counters persisted to the JSON
// file $COUNTERS_STATE after every call, with every call it executed (tool,
// arguments, the key in _meta) — so a call executed twice shows in the
// server's own state, not only in the harness's journal.
//
// Tools: add {name, n} (mutating, not idempotent, not destructive), get
// {name} (readOnlyHint), set {name, value} (idempotentHint), pay {to,
// amount} (no annotations: destructive by the spec's default) and calls {}
// (readOnlyHint: every call it executed, each with its key — what a
// scenario's lookup reads). A counter
// whose name starts with "die:" makes the server exit once, after it acted
// and before it answers: the call is in doubt.
//
// Over stdio by default; with $OVERNIGHT_MCP_ADDR set (as the harness sets
// it in an image server's container), over streamable HTTP at /mcp on that
// address.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type call struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
	Key  any             `json:"key,omitempty"`
}

type state struct {
	Counters map[string]int `json:"counters"`
	Calls    []call         `json:"calls"`
}

var (
	mu   sync.Mutex
	path = os.Getenv("COUNTERS_STATE")
)

func load() state {
	st := state{Counters: map[string]int{}}
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &st)
	}
	if st.Counters == nil {
		st.Counters = map[string]int{}
	}
	return st
}

func save(st state) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

type args struct {
	Name   string `json:"name,omitempty"`
	N      int    `json:"n,omitempty"`
	Value  int    `json:"value,omitempty"`
	To     string `json:"to,omitempty"`
	Amount int    `json:"amount,omitempty"`
}

// handle runs one tool on the state and persists it.
func handle(tool string, apply func(st *state, a args) int) mcp.ToolHandler {
	return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a args
		if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
		}
		mu.Lock()
		defer mu.Unlock()
		st := load()
		v := apply(&st, a)
		if tool != "get" {
			st.Calls = append(st.Calls, call{Tool: tool, Args: req.Params.Arguments, Key: req.Params.Meta["overnight.dev/idempotency-key"]})
			if err := save(st); err != nil {
				return nil, err
			}
			if marker := path + "." + a.Name; strings.HasPrefix(a.Name, "die:") {
				if _, err := os.Stat(marker); os.IsNotExist(err) {
					_ = os.WriteFile(marker, nil, 0o644)
					os.Exit(1)
				}
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(v)}},
			StructuredContent: map[string]any{"value": v}}, nil
	}
}

func schema(props ...string) map[string]any {
	p := map[string]any{}
	for i := 0; i+1 < len(props); i += 2 {
		p[props[i]] = map[string]any{"type": props[i+1]}
	}
	return map[string]any{"type": "object", "properties": p}
}

func main() {
	if path == "" {
		log.Fatal("set COUNTERS_STATE to the state file")
	}
	no := false
	s := mcp.NewServer(&mcp.Implementation{Name: "counters", Version: "v1"}, nil)
	s.AddTool(&mcp.Tool{Name: "add", Description: "add n to a counter", InputSchema: schema("name", "string", "n", "integer"),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no}},
		handle("add", func(st *state, a args) int { st.Counters[a.Name] += a.N; return st.Counters[a.Name] }))
	s.AddTool(&mcp.Tool{Name: "get", Description: "read a counter", InputSchema: schema("name", "string"),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		handle("get", func(st *state, a args) int { return st.Counters[a.Name] }))
	s.AddTool(&mcp.Tool{Name: "set", Description: "set a counter", InputSchema: schema("name", "string", "value", "integer"),
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &no}},
		handle("set", func(st *state, a args) int { st.Counters[a.Name] = a.Value; return a.Value }))
	s.AddTool(&mcp.Tool{Name: "pay", Description: "pay an amount", InputSchema: schema("to", "string", "amount", "integer")},
		handle("pay", func(st *state, a args) int { st.Counters["paid:"+a.To] += a.Amount; return st.Counters["paid:"+a.To] }))
	s.AddTool(&mcp.Tool{Name: "calls", Description: "every call executed, with its key", InputSchema: schema(),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			defer mu.Unlock()
			st := load()
			b, err := json.Marshal(st.Calls)
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}},
				StructuredContent: map[string]any{"calls": st.Calls}}, nil
		})
	if addr := os.Getenv("OVERNIGHT_MCP_ADDR"); addr != "" {
		mux := http.NewServeMux()
		mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
		log.Printf("counters: serving MCP on http://%s/mcp, state in %s", addr, path)
		log.Fatal(http.ListenAndServe(addr, mux))
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
