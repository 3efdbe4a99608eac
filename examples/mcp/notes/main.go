// Command notes is an MCP server written with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk): a notebook over stdio, its
// notes kept in the JSON file $NOTES_DB (default ./notes.json). Like
// tickets.py it does not deduplicate by idempotency key: it records the
// key each call carried in _meta["overnight.dev/idempotency-key"] beside
// the note, so a call executed twice shows in its own file.
//
// Tools: add_note {text} (mutating, not idempotent), list_notes {} (read-only).
//
//	CGO_ENABLED=0 go build -o examples/mcp/bin/notes ./examples/mcp/notes
package main

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Note is one note.
type Note struct {
	ID   int    `json:"id"`
	Text string `json:"text"`
	Key  string `json:"key,omitempty"`
}

type book struct {
	mu   sync.Mutex
	path string
}

func (b *book) load() ([]Note, error) {
	raw, err := os.ReadFile(b.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var notes []Note
	return notes, json.Unmarshal(raw, &notes)
}

func (b *book) save(notes []Note) error {
	raw, err := json.MarshalIndent(notes, "", " ")
	if err != nil {
		return err
	}
	tmp := b.path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, b.path)
}

// AddArgs are add_note's arguments.
type AddArgs struct {
	Text string `json:"text" jsonschema:"the note's text"`
}

// ListArgs are list_notes's (none).
type ListArgs struct{}

// Notes is list_notes's answer.
type Notes struct {
	Notes []Note `json:"notes"`
}

func main() {
	b := &book{path: os.Getenv("NOTES_DB")}
	if b.path == "" {
		b.path = "notes.json"
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1"}, nil)
	no := false
	mcp.AddTool(s, &mcp.Tool{Name: "add_note", Description: "Add a note; answers it with its id.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no}},
		func(_ context.Context, req *mcp.CallToolRequest, args AddArgs) (*mcp.CallToolResult, Note, error) {
			if args.Text == "" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "text: want a non-empty string"}}}, Note{}, nil
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			notes, err := b.load()
			if err != nil {
				return nil, Note{}, err
			}
			key, _ := req.Params.Meta["overnight.dev/idempotency-key"].(string)
			n := Note{ID: len(notes) + 1, Text: args.Text, Key: key}
			if err := b.save(append(notes, n)); err != nil {
				return nil, Note{}, err
			}
			return nil, n, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "list_notes", Description: "List every note.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, ListArgs) (*mcp.CallToolResult, Notes, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			notes, err := b.load()
			return nil, Notes{Notes: notes}, err
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
