// Package mcpworld makes an MCP server a world: the server an agent calls
// tools of through the gateway's MCP endpoint, each tools/call an effect of
// kind mcp.<server>.<tool> (scenarios.MCPServer), through the official Go
// SDK's client (github.com/modelcontextprotocol/go-sdk).
//
// Open connects (initialize) and lists the server's tools: each tool is a
// kind, its flags from its annotations — readOnlyHint is read-only (and
// idempotent), idempotentHint idempotent, and any other tool mutating,
// destructive unless destructiveHint says false (the spec's default). A
// server that does not start, does not speak MCP, or lists a tool whose
// input schema is not a JSON Schema object is an error naming the server
// and what it said.
//
// Execute sends tools/call with the effect's key in the call's _meta
// (scenarios.MCPMetaIdempotencyKey) and reads the answer: a result is done
// (its Result the server's CallToolResult as sent); a result with isError
// is a permanent failure, code tool_error, the result in its details; a
// JSON-RPC invalid params or method not found is a permanent failure, code
// invalid_call; anything else — a transport error, the server dying, a
// timeout, another JSON-RPC error — leaves the call in doubt (an error
// wrapping remote.ErrWorld), and the next call connects again (a stdio
// server is started again by its Transport).
//
// LookupRequest finds out whether a call whose answer was lost took
// effect: the journal, then the scenario's lookup for its tool (a
// read-only tool of the server and a CEL expression over its answer,
// scenarios.MCPLookup), checked against the listed tools when the server
// connects. Redo restores a fresh instance from a real run's journal.
//
// Every answer is journaled in the harness's store (world.OpenJournal), the
// world's ledger: duplicates are judged from it (a mutating,
// non-idempotent tool done more than once for the same arguments under
// different keys), and OpenJournal reads it when the server is gone.
//
// What this package must not do: know about runs, attempts, tokens or the
// gateway, or start a process itself (its Transport does).
package mcpworld

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// DefaultTimeout bounds a call to the server when Config gives none: after
// it, the call is in doubt.
const DefaultTimeout = 30 * time.Second

// Error codes of the failures the world answers with.
const (
	// CodeToolError: the tool answered with isError (permanent).
	CodeToolError = "tool_error"
	// CodeInvalidCall: the server refused the call as JSON-RPC invalid
	// params or method not found (permanent).
	CodeInvalidCall = "invalid_call"
	// CodeUnknownTool: the server lists no tool of the effect's kind.
	CodeUnknownTool = "unknown_tool"
)

// ErrServer is wrapped by an error of a server that cannot be used: it
// does not start, does not speak MCP, or lists an invalid tool.
var ErrServer = errors.New("the MCP server cannot be used")

// ErrOffline is wrapped by a journal-only view's answer to a call only the
// server answers (OpenJournal).
var ErrOffline = errors.New("this view of an MCP server reads only what the harness journaled of its answers")

// Config is an MCP server as the world reaches it.
type Config struct {
	Server scenarios.MCPServer
	// Transport makes a transport to the server, for each connection: a
	// stdio server's starts its process (mcp.CommandTransport), a URL
	// server's is an mcp.StreamableClientTransport. Default: the latter,
	// for Server.URL.
	Transport func(ctx context.Context) (mcp.Transport, error)
	// Timeout bounds each call; DefaultTimeout when zero.
	Timeout time.Duration
	// Describe says more about a server that failed (the end of a stdio
	// server's stderr, say), for errors; nil: nothing.
	Describe func() string
}

// Conn is a connection to an MCP server: its session, and its tools as
// last listed. A call that finds the connection broken leaves it to be
// made again by the next (a stdio server's Transport starts it again). It
// is safe for concurrent use.
type Conn struct {
	cfg Config

	mu      sync.Mutex
	session *mcp.ClientSession // nil: connect on the next call
	tools   []*mcp.Tool
}

// World is an MCP server as a world. It is safe for concurrent use.
type World struct {
	cfg     Config
	conn    *Conn // nil: a journal-only view
	journal *world.Ledgered
	dups    *world.JournalDups

	replay   *Recording    // non-nil: answered from a recording (OpenReplay)
	replayer *world.Replay // the recording indexed, used under mu

	mu    sync.Mutex
	tools []*mcp.Tool // a journal-only or replaying view's, as last journaled
}

var (
	_ world.World         = (*World)(nil)
	_ world.RequestLookup = (*World)(nil)
	_ world.Journaling    = (*World)(nil)
)

// toolsKey is where the last tools/list is kept, under the world's prefix.
const toolsKey = "mcp/tools"

// Dial connects to cfg's server (initialize) and lists its tools,
// checking each. Close ends the connection.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Transport == nil {
		url := cfg.Server.URL
		cfg.Transport = func(context.Context) (mcp.Transport, error) {
			return &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, DisableStandaloneSSE: true}, nil
		}
	}
	c := &Conn{cfg: cfg}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.connect(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Open connects to cfg's server (Dial) and opens its world on the
// connection (OpenConn). Close ends the connection.
func Open(ctx context.Context, cfg Config, store world.Store, prefix []byte) (*World, error) {
	c, err := Dial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	w, err := OpenConn(ctx, c, store, prefix)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return w, nil
}

// OpenConn opens the world of the server c is connected to, its journal
// of answers in store under prefix (where the tools as listed now are
// kept too, for OpenJournal).
func OpenConn(ctx context.Context, c *Conn, store world.Store, prefix []byte) (*World, error) {
	w, err := open(c.cfg, store, prefix)
	if err != nil {
		return nil, err
	}
	w.conn = c
	if b, err := json.Marshal(c.Tools()); err == nil {
		if err := store.Commit(ctx, world.Entry{Key: toolsKeyOf(prefix), Value: b}); err != nil {
			return nil, fmt.Errorf("MCP server %s: journal its tools: %w", c.cfg.Server.Name, err)
		}
	}
	return w, nil
}

func toolsKeyOf(prefix []byte) []byte { return append(append([]byte(nil), prefix...), toolsKey...) }

// OpenJournal is the world of server read from its journal alone, as a
// report reads it when the server is gone: its ledger, tools as last
// listed, the outcome of each key, its duplicates; a call only the server
// answers fails wrapping ErrOffline.
func OpenJournal(server scenarios.MCPServer, store world.Store, prefix []byte) (*World, error) {
	w, err := open(Config{Server: server}, store, prefix)
	if err != nil {
		return nil, err
	}
	raw, err := store.Get(toolsKeyOf(prefix))
	switch {
	case errors.Is(err, world.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(raw, &w.tools); err != nil {
			return nil, fmt.Errorf("MCP server %s: the journaled tools/list: %w", server.Name, err)
		}
	}
	return w, nil
}

func open(cfg Config, store world.Store, prefix []byte) (*World, error) {
	j, err := world.OpenJournal(cfg.Server.Name, store, prefix)
	if err != nil {
		return nil, err
	}
	w := &World{cfg: cfg, journal: j}
	w.dups = world.NewJournalDups(j, w.identity)
	return w, nil
}

// connect opens a session and lists the tools. c.mu is held.
func (c *Conn) connect(ctx context.Context) (*mcp.ClientSession, error) {
	if c.session != nil {
		return c.session, nil
	}
	label := c.cfg.Server.Label()
	fail := func(format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		if c.cfg.Describe != nil {
			if more := c.cfg.Describe(); more != "" {
				msg += "; " + more
			}
		}
		return fmt.Errorf("%w: %s: %s", ErrServer, label, msg)
	}
	t, err := c.cfg.Transport(ctx)
	if err != nil {
		return nil, fail("%v", err)
	}
	ctx, cancel := detached(ctx, c.cfg.Timeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "overnight", Version: "v1"}, nil)
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fail("initialize: %v (is it an MCP server?)", err)
	}
	var tools []*mcp.Tool
	params := &mcp.ListToolsParams{}
	for {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			_ = cs.Close()
			return nil, fail("tools/list: %v", err)
		}
		tools = append(tools, res.Tools...)
		if res.NextCursor == "" {
			break
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	for _, tool := range tools {
		if err := checkTool(c.cfg.Server, tool); err != nil {
			_ = cs.Close()
			return nil, fail("%v", err)
		}
	}
	if err := checkLookups(c.cfg.Server, tools); err != nil {
		_ = cs.Close()
		return nil, fail("%v", err)
	}
	c.session, c.tools = cs, tools
	return cs, nil
}

// detached is a context for a request to the server, ended by ctx's end
// or timeout, that carries none of ctx's values: ctx may be the agent's
// request to the gateway's own MCP endpoint, whose values the SDK reads
// (the protocol version the agent negotiated, sent to the server as a
// header by its streamable HTTP client, which a server that negotiated
// another refuses).
func detached(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	out, cancel := context.WithTimeout(context.Background(), timeout)
	stop := context.AfterFunc(ctx, cancel)
	return out, func() { stop(); cancel() }
}

// Tools are the server's tools as last listed.
func (c *Conn) Tools() []*mcp.Tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*mcp.Tool(nil), c.tools...)
}

// Close ends the connection (a stdio server's process with it).
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == nil {
		return nil
	}
	err := c.session.Close()
	c.session = nil
	return err
}

// current is the session now, connecting again if the last broke.
func (c *Conn) current(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connect(ctx)
}

// drop forgets session cs (if it is still the current one) and closes it.
func (c *Conn) drop(cs *mcp.ClientSession) {
	c.mu.Lock()
	if c.session == cs {
		c.session = nil
	}
	c.mu.Unlock()
	go func() { _ = cs.Close() }()
}

// checkTool says what is wrong with a listed tool: a name an agent's model
// would not accept as <server>__<tool>, or an input schema that is not a
// JSON Schema of an object.
func checkTool(server scenarios.MCPServer, t *mcp.Tool) error {
	if err := server.CheckToolName(t.Name); err != nil {
		return err
	}
	raw, err := json.Marshal(t.InputSchema)
	if err != nil {
		return fmt.Errorf("tool %q: its inputSchema: %v", t.Name, err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("tool %q: its inputSchema %s is not a JSON Schema: %v", t.Name, snippet(raw), err)
	}
	if s.Type != "object" {
		return fmt.Errorf("tool %q: its inputSchema %s: want a schema of type object", t.Name, snippet(raw))
	}
	if _, err := s.Resolve(nil); err != nil {
		return fmt.Errorf("tool %q: its inputSchema %s: %v", t.Name, snippet(raw), err)
	}
	return nil
}

// Close ends the world's connection (a stdio server's process with it).
func (w *World) Close() error {
	if w.conn == nil {
		return nil
	}
	return w.conn.Close()
}

// Server is the server the world is.
func (w *World) Server() scenarios.MCPServer { return w.cfg.Server }

// Tools are the server's tools as last listed (a journal-only view's, as
// last journaled).
func (w *World) Tools() []*mcp.Tool {
	if w.conn != nil {
		return w.conn.Tools()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*mcp.Tool(nil), w.tools...)
}

// Tool is the server's tool of effect kind kind. It is on every call's
// path: it compares names without building each tool's kind, and copies
// no list.
func (w *World) Tool(kind string) (*mcp.Tool, bool) {
	rest, isMCP := strings.CutPrefix(kind, scenarios.MCPKindPrefix)
	rest, ours := strings.CutPrefix(rest, w.cfg.Server.Name)
	name, ok := strings.CutPrefix(rest, ".")
	if !isMCP || !ours || !ok {
		return nil, false
	}
	find := func(tools []*mcp.Tool) (*mcp.Tool, bool) {
		for _, t := range tools {
			if t.Name == name {
				return t, true
			}
		}
		return nil, false
	}
	if c := w.conn; c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		return find(c.tools)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return find(w.tools)
}

// Journal implements world.Journaling.
func (w *World) Journal() *world.Ledgered { return w.journal }

// Name implements world.World: the server's name.
func (w *World) Name() string { return w.cfg.Server.Name }

// Flags are a tool's kind flags from its annotations.
func Flags(t *mcp.Tool) (readOnly, idempotent, destructive bool) {
	a := t.Annotations
	if a == nil {
		return false, false, true // the spec's defaults: destructive, not idempotent
	}
	if a.ReadOnlyHint {
		return true, true, false
	}
	return false, a.IdempotentHint, a.DestructiveHint == nil || *a.DestructiveHint
}

// Kinds implements world.World: one kind per tool.
func (w *World) Kinds() []world.KindInfo {
	tools := w.Tools()
	out := make([]world.KindInfo, 0, len(tools))
	for _, t := range tools {
		ro, idem, destr := Flags(t)
		schema, _ := json.Marshal(t.InputSchema)
		out = append(out, world.KindInfo{
			Name: w.cfg.Server.EffectKind(t.Name), ReadOnly: ro, Idempotent: idem, Destructive: destr,
			Args: string(schema), Result: "a CallToolResult {content, structuredContent, isError}",
			Doc: fmt.Sprintf("tool %s of %s, seen by the agent as %s: %s", t.Name, w.cfg.Server.Label(), w.cfg.Server.ToolName(t.Name), t.Description),
		})
	}
	return out
}

// ServerError is a call whose effect is in doubt: the transport failed,
// the server died or did not answer in time, or answered a JSON-RPC error
// that says nothing of the call's arguments. It wraps remote.ErrWorld.
type ServerError struct {
	Server, Tool string
	Msg          string
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("MCP server %s: tools/call %s: %s", e.Server, e.Tool, e.Msg)
}

// Unwrap makes it a remote.ErrWorld.
func (e *ServerError) Unwrap() error { return remote.ErrWorld }

// Execute implements world.World: see the package doc.
func (w *World) Execute(ctx context.Context, req world.Request) (world.Outcome, error) {
	if w.replay != nil {
		return w.executeReplay(ctx, req)
	}
	if w.conn == nil {
		return world.Outcome{}, fmt.Errorf("MCP server %s: %s (key %q): %w", w.cfg.Server.Name, req.Kind, req.Key, ErrOffline)
	}
	cs, err := w.conn.current(ctx)
	tool, known := w.Tool(req.Kind)
	if err != nil {
		return world.Outcome{}, &ServerError{Server: w.cfg.Server.Name, Tool: req.Kind, Msg: err.Error()}
	}
	if !known {
		return world.Failed(http.StatusBadRequest, CodeUnknownTool, "MCP server %s lists no tool of kind %q", w.cfg.Server.Name, req.Kind), nil
	}
	var args any
	if len(req.Args) > 0 && string(req.Args) != "null" {
		args = req.Args
	}
	cctx, cancel := detached(ctx, w.conn.cfg.Timeout)
	defer cancel()
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{
		Meta: mcp.Meta{scenarios.MCPMetaIdempotencyKey: req.Key}, Name: tool.Name, Arguments: args,
	})
	var out world.Outcome
	switch {
	case err == nil:
		raw, merr := json.Marshal(res)
		if merr != nil {
			return world.Outcome{}, &ServerError{Server: w.cfg.Server.Name, Tool: tool.Name, Msg: "its result: " + merr.Error()}
		}
		if res.IsError {
			out = world.Failed(http.StatusUnprocessableEntity, CodeToolError, "tool %s of MCP server %s answered an error: %s", tool.Name, w.cfg.Server.Name, toolText(res))
			out.Error.Details = raw
		} else {
			out = world.Outcome{Status: protocol.StatusDone, Result: raw}
		}
	default:
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) && (rpc.Code == jsonrpc.CodeInvalidParams || rpc.Code == jsonrpc.CodeMethodNotFound) {
			out = world.FailedWith(http.StatusBadRequest, CodeInvalidCall, map[string]any{"code": rpc.Code, "message": rpc.Message},
				"MCP server %s refused tools/call %s: %s (JSON-RPC %d)", w.cfg.Server.Name, tool.Name, rpc.Message, rpc.Code)
			break
		}
		if !errors.As(err, &rpc) || transportFailed(rpc) {
			// The connection is gone or broken: connect again next time (a
			// stdio or image server is started again).
			w.conn.drop(cs)
		}
		return world.Outcome{}, &ServerError{Server: w.cfg.Server.Name, Tool: tool.Name, Msg: err.Error() + ": the call is in doubt"}
	}
	e := world.LedgerEntry{Key: req.Key, Kind: req.Kind, Args: req.Args, Outcome: out, At: req.Now}
	if err := w.dups.Record(ctx, e); err != nil {
		return world.Outcome{}, fmt.Errorf("journal the answer of MCP server %s to %s (key %q): %w", w.cfg.Server.Name, tool.Name, req.Key, err)
	}
	return out, nil
}

// The JSON-RPC codes the SDK's client side gives a call that failed
// below JSON-RPC — its streamable HTTP transport's request refused or
// broken (the server gone, a session it no longer knows), the connection
// closing — rather than an answer of the server's.
const (
	codeRejectedByTransport = -32005
	codeServerClosing       = -32004
	codeClientClosing       = -32003
)

// transportFailed reports whether rpc is the SDK's client side saying the
// call failed below JSON-RPC: the session is not to be used again.
func transportFailed(rpc *jsonrpc.Error) bool {
	switch rpc.Code {
	case codeRejectedByTransport, codeServerClosing, codeClientClosing:
		return true
	}
	return false
}

// toolText is the text of a tool's answer, for a message.
func toolText(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return snippet([]byte(t.Text))
		}
	}
	return "(no text)"
}

func snippet(b []byte) string {
	const most = 200
	if r := []rune(string(b)); len(r) > most {
		return string(r[:most]) + "…"
	}
	return string(b)
}

// Lookup implements world.World: the journal of answers, by key.
func (w *World) Lookup(ctx context.Context, key string) (world.Outcome, bool, error) {
	return w.journal.Lookup(ctx, key)
}

// LookupRequest implements world.RequestLookup: the journal; then, for a
// call whose answer was never journaled, the scenario's lookup for its
// tool (lookup.go). A tool without one cannot be found out (MCP has no
// lookup of its own): an error wrapping world.ErrCannotLookup, and the
// call stays unknown.
func (w *World) LookupRequest(ctx context.Context, req world.Request) (world.Outcome, bool, error) {
	if out, found, err := w.journal.Lookup(ctx, req.Key); err != nil || found {
		return out, found, err
	}
	if w.replay != nil {
		return world.Outcome{}, false, nil // nothing was sent to a server: a retry is answered from the recording
	}
	return w.lookUp(ctx, req)
}

// Ledger implements world.World: the journal of answers.
func (w *World) Ledger(ctx context.Context) ([]world.LedgerEntry, error) {
	return w.journal.Ledger(ctx)
}

// Duplicates implements world.World: a mutating tool that is not
// idempotent done more than once for the same (canonical) arguments under
// different keys.
func (w *World) Duplicates(ctx context.Context) ([]world.Duplicate, error) {
	if err := w.notDiverged(ctx, "no-duplicate-effects on MCP server "+w.cfg.Server.Name); err != nil {
		return nil, err
	}
	return w.dups.Duplicates(ctx)
}

// identity judges a journal entry for duplicates.
func (w *World) identity(_ context.Context, e world.LedgerEntry) (string, bool, error) {
	t, ok := w.Tool(e.Kind)
	if !ok {
		return "", false, nil
	}
	if ro, idem, _ := Flags(t); ro || idem {
		return "", false, nil
	}
	var buf bytes.Buffer
	if len(e.Args) == 0 || json.Compact(&buf, e.Args) != nil {
		return "null", true, nil
	}
	return buf.String(), true, nil
}

// CheckGoal implements world.World: an MCP server judges no goal of its own.
func (w *World) CheckGoal(context.Context, json.RawMessage) (world.Check, error) {
	return world.Check{}, fmt.Errorf("MCP server %s: %w", w.cfg.Server.Name, world.ErrNoGoal)
}

// Snapshot implements world.World: the server has no snapshot to give, so
// the journal of its answers stands for it — its length and a hash.
func (w *World) Snapshot(ctx context.Context) (json.RawMessage, error) {
	ledger, err := w.journal.Ledger(ctx)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"mcp_server": w.cfg.Server.Name, "ledger_seq": w.journal.LedgerSeq(), "ledger_sha256": world.LedgerHash(ledger)})
}
