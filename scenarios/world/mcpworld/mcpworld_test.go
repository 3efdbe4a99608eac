package mcpworld_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/mcpworld"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// memServer is an MCP server of the official SDK in this process, reached
// over in-memory transports: a new server session per connection, one
// state for all.
type memServer struct {
	server   *mcp.Server
	connects atomic.Int32
	mu       sync.Mutex
	keys     []string // the idempotency key of every create, as the server got it
}

func newMemServer(extra ...func(*mcp.Server)) *memServer {
	m := &memServer{server: mcp.NewServer(&mcp.Implementation{Name: "mem", Version: "v1"}, nil)}
	obj := map[string]any{"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}}}
	type title struct {
		Title string `json:"title"`
	}
	mcp.AddTool(m.server, &mcp.Tool{Name: "create"}, func(_ context.Context, req *mcp.CallToolRequest, _ title) (*mcp.CallToolResult, any, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		key, _ := req.Params.Meta[scenarios.MCPMetaIdempotencyKey].(string)
		m.keys = append(m.keys, key)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "created"}}}, nil, nil
	})
	m.server.AddTool(&mcp.Tool{Name: "list", InputSchema: obj, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "[]"}}}, nil
	})
	no := false
	m.server.AddTool(&mcp.Tool{Name: "retag", InputSchema: obj, Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &no}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	m.server.AddTool(&mcp.Tool{Name: "fail", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such thing"}}}, nil
	})
	m.server.AddTool(&mcp.Tool{Name: "strict", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "title: want a string"}
	})
	m.server.AddTool(&mcp.Tool{Name: "die", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_ = req.Session.Close()
		return &mcp.CallToolResult{}, nil
	})
	for _, e := range extra {
		e(m.server)
	}
	return m
}

func (m *memServer) transport(ctx context.Context) (mcp.Transport, error) {
	c, s := mcp.NewInMemoryTransports()
	if _, err := m.server.Connect(ctx, s, nil); err != nil {
		return nil, err
	}
	m.connects.Add(1)
	return c, nil
}

func (m *memServer) createKeys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.keys...)
}

var mem = scenarios.MCPServer{Name: "mem", URL: "http://in-memory"}

func openMem(ctx context.Context, m *memServer, store world.Store) *mcpworld.World {
	GinkgoHelper()
	w, err := mcpworld.Open(ctx, mcpworld.Config{Server: mem, Transport: m.transport, Timeout: 5 * time.Second}, store, []byte("mcp/mem/"))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Close)
	return w
}

func call(kind, key, args string) world.Request {
	return world.Request{Key: key, Kind: "mcp.mem." + kind, Args: json.RawMessage(args), Now: t0}
}

var _ = Describe("an MCP server as a world", func() {
	It("lists the tools as kinds, their flags from the annotations", func(ctx SpecContext) {
		w := openMem(ctx, newMemServer(), world.NewMemStore())
		kinds := map[string]world.KindInfo{}
		for _, k := range w.Kinds() {
			kinds[k.Name] = k
		}
		Expect(kinds).To(HaveLen(6))
		Expect(kinds["mcp.mem.create"]).To(MatchFields(IgnoreExtras, Fields{"ReadOnly": BeFalse(), "Idempotent": BeFalse(), "Destructive": BeTrue()}), "no hints: the spec's defaults")
		Expect(kinds["mcp.mem.list"]).To(MatchFields(IgnoreExtras, Fields{"ReadOnly": BeTrue(), "Idempotent": BeTrue(), "Destructive": BeFalse()}))
		Expect(kinds["mcp.mem.retag"]).To(MatchFields(IgnoreExtras, Fields{"ReadOnly": BeFalse(), "Idempotent": BeTrue(), "Destructive": BeFalse()}))
		Expect(kinds["mcp.mem.create"].Args).To(ContainSubstring(`"type":"object"`))
		Expect(kinds["mcp.mem.create"].Doc).To(ContainSubstring("mem__create"))
	})

	It("calls a tool with the effect's key in _meta, journals the answer, and finds duplicates of mutating tools", func(ctx SpecContext) {
		m := newMemServer()
		store := world.NewMemStore()
		w := openMem(ctx, m, store)
		out, err := w.Execute(ctx, call("create", "k1", `{"title": "a"}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Status).To(Equal(protocol.StatusDone))
		var res mcp.CallToolResult
		Expect(json.Unmarshal(out.Result, &res)).To(Succeed())
		Expect(res.Content[0].(*mcp.TextContent).Text).To(Equal("created"))
		Expect(m.createKeys()).To(Equal([]string{"k1"}))

		for _, r := range []world.Request{call("create", "k2", `{"title":"a"}`), call("list", "k3", `{}`), call("list", "k4", `{}`), call("retag", "k5", `{"title":"a"}`), call("retag", "k6", `{"title":"a"}`)} {
			out, err := w.Execute(ctx, r)
			Expect(err).NotTo(HaveOccurred())
			Expect(out.Status).To(Equal(protocol.StatusDone))
		}
		dups, err := w.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(dups).To(HaveLen(1), "reads and idempotent tools never duplicate")
		Expect(dups[0]).To(MatchFields(IgnoreExtras, Fields{"Kind": Equal("mcp.mem.create"), "Name": Equal(`{"title":"a"}`), "Keys": Equal([]string{"k1", "k2"}), "Count": Equal(2)}))

		got, found, err := w.Lookup(ctx, "k1")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(got.Status).To(Equal(protocol.StatusDone))
		_, _, err = w.LookupRequest(ctx, call("create", "never", `{}`))
		Expect(err).To(MatchError(world.ErrCannotLookup), "MCP has no lookup: a call never journaled stays unknown")

		By("a journal-only view reads the same, tools included, with the server gone")
		Expect(w.Close()).To(Succeed())
		view, err := mcpworld.OpenJournal(mem, store, []byte("mcp/mem/"))
		Expect(err).NotTo(HaveOccurred())
		Expect(view.Kinds()).To(HaveLen(6))
		ledger, err := view.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(ledger).To(HaveLen(6))
		vd, err := view.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(vd).To(Equal(dups))
		_, err = view.Execute(ctx, call("list", "k9", `{}`))
		Expect(err).To(MatchError(mcpworld.ErrOffline))
	})

	It("answers isError as a permanent tool_error and invalid params as invalid_call", func(ctx SpecContext) {
		w := openMem(ctx, newMemServer(), world.NewMemStore())
		out, err := w.Execute(ctx, call("fail", "k1", `{}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Status).To(Equal(protocol.StatusFailed))
		Expect(out.Error.Code).To(Equal(mcpworld.CodeToolError))
		Expect(out.Error.Transient).To(BeFalse())
		Expect(out.Error.Message).To(ContainSubstring("no such thing"))
		Expect(string(out.Error.Details)).To(ContainSubstring(`"isError":true`), "the tool's own answer, for the agent")

		out, err = w.Execute(ctx, call("strict", "k2", `{"title": 5}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Status).To(Equal(protocol.StatusFailed))
		Expect(out.Error.Code).To(Equal(mcpworld.CodeInvalidCall))
		Expect(out.Error.Transient).To(BeFalse())
		Expect(out.Error.Message).To(ContainSubstring("title: want a string"))

		out, err = w.Execute(ctx, world.Request{Key: "k3", Kind: "mcp.mem.nope", Args: json.RawMessage(`{}`), Now: t0})
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Error.Code).To(Equal(mcpworld.CodeUnknownTool))
	})

	It("leaves a call in doubt when the server dies, and connects again for the next", func(ctx SpecContext) {
		m := newMemServer()
		w := openMem(ctx, m, world.NewMemStore())
		_, err := w.Execute(ctx, call("die", "k1", `{}`))
		Expect(err).To(MatchError(remote.ErrWorld))
		var se *mcpworld.ServerError
		Expect(errors.As(err, &se)).To(BeTrue())
		Expect(se.Error()).To(ContainSubstring("in doubt"))
		out, err := w.Execute(ctx, call("create", "k2", `{"title":"b"}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Status).To(Equal(protocol.StatusDone))
		Expect(m.connects.Load()).To(BeEquivalentTo(2))
	})

	It("refuses a tool whose input schema does not resolve, naming the server and the tool", func(ctx SpecContext) {
		m := newMemServer(func(s *mcp.Server) {
			s.AddTool(&mcp.Tool{Name: "broken", InputSchema: map[string]any{"type": "object", "$ref": "#/$defs/missing"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
		})
		_, err := mcpworld.Open(ctx, mcpworld.Config{Server: mem, Transport: m.transport}, world.NewMemStore(), []byte("p/"))
		Expect(err).To(MatchError(mcpworld.ErrServer))
		Expect(err.Error()).To(And(ContainSubstring("MCP server mem"), ContainSubstring(`tool "broken"`)))
	})

	Context("over stdio, a real process", func() {
		stdio := func(s scenarios.MCPServer, env ...string) mcpworld.Config {
			return mcpworld.Config{Server: s, Timeout: 10 * time.Second, Transport: func(context.Context) (mcp.Transport, error) {
				cmd := exec.Command(s.Command[0], s.Command[1:]...)
				cmd.Env = append(os.Environ(), env...)
				return &mcp.CommandTransport{Command: cmd}, nil
			}}
		}

		It("drives tickets.py, which writes each ticket it is asked for to its own file", func(ctx SpecContext) {
			db := filepath.Join(GinkgoT().TempDir(), "tickets.json")
			s := scenarios.MCPServer{Name: "tickets", Command: []string{"python3", "../../../examples/mcp/tickets.py"}}
			w, err := mcpworld.Open(ctx, stdio(s, "TICKETS_DB="+db), world.NewMemStore(), []byte("t/"))
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(w.Close)
			Expect(w.Kinds()).To(HaveLen(3))
			for _, key := range []string{"a", "b"} {
				out, err := w.Execute(ctx, world.Request{Key: key, Kind: "mcp.tickets.create_ticket", Args: json.RawMessage(`{"title":"disk full"}`), Now: t0})
				Expect(err).NotTo(HaveOccurred())
				Expect(out.Status).To(Equal(protocol.StatusDone))
			}
			raw, err := os.ReadFile(db)
			Expect(err).NotTo(HaveOccurred())
			var state struct {
				Tickets []struct {
					ID  int    `json:"id"`
					Key string `json:"key"`
				} `json:"tickets"`
			}
			Expect(json.Unmarshal(raw, &state)).To(Succeed())
			Expect(state.Tickets).To(HaveLen(2))
			Expect(state.Tickets[1].Key).To(Equal("b"), "the key travels in _meta")
			dups, err := w.Duplicates(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(dups).To(HaveLen(1))
			out, err := w.Execute(ctx, world.Request{Key: "c", Kind: "mcp.tickets.close_ticket", Args: json.RawMessage(`{"id": 99}`), Now: t0})
			Expect(err).NotTo(HaveOccurred())
			Expect(out.Error.Code).To(Equal(mcpworld.CodeToolError))
		})

		It("drives a real MCP server from outside the project: the go-sdk's own memory example, built from the module", func(ctx SpecContext) {
			dir := GinkgoT().TempDir()
			bin := filepath.Join(dir, "memory")
			build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/modelcontextprotocol/go-sdk/examples/server/memory")
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			out, err := build.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "%s", out)
			file := filepath.Join(dir, "memory.json")
			s := scenarios.MCPServer{Name: "memory", Command: []string{bin, "-memory", file}}
			w, err := mcpworld.Open(ctx, stdio(s), world.NewMemStore(), []byte("m/"))
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(w.Close)
			kinds := map[string]world.KindInfo{}
			for _, k := range w.Kinds() {
				kinds[k.Name] = k
			}
			Expect(kinds).To(HaveKey("mcp.memory.create_entities"))
			Expect(kinds).To(HaveKey("mcp.memory.read_graph"))
			create := world.Request{Key: "e1", Kind: "mcp.memory.create_entities", Now: t0,
				Args: json.RawMessage(`{"entities":[{"name":"disk","entityType":"device","observations":["full"]}]}`)}
			res, err := w.Execute(ctx, create)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Status).To(Equal(protocol.StatusDone), "%s", res.Error)
			res, err = w.Execute(ctx, world.Request{Key: "r1", Kind: "mcp.memory.read_graph", Args: json.RawMessage(`{}`), Now: t0})
			Expect(err).NotTo(HaveOccurred())
			Expect(string(res.Result)).To(ContainSubstring(`disk`), "the server's own answer")
			Expect(file).To(BeAnExistingFile(), "the server persisted its graph itself")
			raw, err := os.ReadFile(file)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(raw)).To(ContainSubstring("full"))
		})

		DescribeTable("refuses a server that does not start or does not speak MCP, saying so",
			func(ctx SpecContext, command []string, want string) {
				s := scenarios.MCPServer{Name: "bad", Command: command}
				cfg := stdio(s)
				cfg.Timeout = 3 * time.Second
				_, err := mcpworld.Open(ctx, cfg, world.NewMemStore(), []byte("b/"))
				Expect(err).To(MatchError(mcpworld.ErrServer))
				Expect(err.Error()).To(And(ContainSubstring("MCP server bad"), ContainSubstring(want)))
			},
			Entry("no such program", []string{"/nonexistent/server"}, "no such file"),
			Entry("not MCP", []string{"sh", "-c", "echo hello; sleep 10"}, "initialize"),
		)
	})
})
