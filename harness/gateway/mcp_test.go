package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/gateway"
)

// mcpBackend fronts one tool, notes__add, and records each call.
type mcpBackend struct {
	recordingBackend
	mu    sync.Mutex
	got   []gateway.MCPCall
	refer error // the next call's error, if set
}

func (b *mcpBackend) MCPTools(context.Context, gateway.Caller) ([]*mcp.Tool, error) {
	return []*mcp.Tool{{Name: "notes__add", Description: "add a note",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}},
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true}}}, nil
}

func (b *mcpBackend) MCPCall(_ context.Context, c gateway.Caller, call gateway.MCPCall) (*mcp.CallToolResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, call)
	if err := b.refer; err != nil {
		b.refer = nil
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added"}}, Meta: mcp.Meta{"attempt": c.Attempt}}, nil
}

var _ = Describe("the MCP endpoint", func() {
	var (
		b   *mcpBackend
		srv *httptest.Server
	)
	BeforeEach(func() {
		b = &mcpBackend{}
		srv = httptest.NewServer(gateway.New(b, nil).Handler())
		DeferCleanup(srv.Close)
	})
	connect := func(ctx context.Context, token string) (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v1"}, nil)
		return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + gateway.MCPPathPrefix + token, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	}

	It("serves the SDK's client: tools with their schemas and annotations, calls with the key from _meta", func(ctx SpecContext) {
		cs, err := connect(ctx, "good")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cs.Close)
		tools, err := cs.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(tools.Tools).To(HaveLen(1))
		Expect(tools.Tools[0].Name).To(Equal("notes__add"))
		Expect(tools.Tools[0].Annotations.IdempotentHint).To(BeTrue())
		Expect(tools.Tools[0].InputSchema).To(HaveKeyWithValue("type", "object"))

		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "notes__add", Arguments: map[string]any{"text": "hi"},
			Meta: mcp.Meta{"overnight.dev/idempotency-key": "note-1"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Content[0].(*mcp.TextContent).Text).To(Equal("added"))
		Expect(res.Meta["attempt"]).To(BeEquivalentTo(2), "the caller is the token's attempt")
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "notes__add", Arguments: map[string]any{"text": "ho"}})
		Expect(err).NotTo(HaveOccurred())
		b.mu.Lock()
		defer b.mu.Unlock()
		Expect(b.got).To(HaveLen(2))
		Expect(b.got[0].Key).To(Equal("note-1"))
		Expect(string(b.got[0].Arguments)).To(MatchJSON(`{"text":"hi"}`))
		Expect(b.got[1].Key).To(BeEmpty(), "a call without the field is unkeyed")
	})

	It("answers the harness's refusals as JSON-RPC errors carrying the protocol's code", func(ctx SpecContext) {
		cs, err := connect(ctx, "good")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cs.Close)
		b.refer = gateway.Errorf(http.StatusConflict, "key_reused", "key note-1 was used with other arguments")
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "notes__add", Arguments: map[string]any{"text": "x"}})
		var rpc *jsonrpc.Error
		Expect(errors.As(err, &rpc)).To(BeTrue(), "%v", err)
		Expect(rpc.Code).To(BeEquivalentTo(gateway.CodeMCPRefused))
		Expect(string(rpc.Data)).To(MatchJSON(`{"code":"key_reused"}`))
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "notes__add", Arguments: map[string]any{}, Meta: mcp.Meta{"overnight.dev/idempotency-key": 7}})
		Expect(errors.As(err, &rpc)).To(BeTrue(), "%v", err)
		Expect(rpc.Code).To(BeEquivalentTo(jsonrpc.CodeInvalidParams), "a key that is not a string")
	})

	It("refuses a token it did not mint", func(ctx SpecContext) {
		_, err := connect(ctx, "nope")
		Expect(err).To(HaveOccurred())
		resp, err := http.Post(srv.URL+gateway.MCPPathPrefix+"nope", "application/json", strings.NewReader(`{}`))
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
	})
})

// observedMCPBackend is mcpBackend counting the requests in flight, as the
// harness's clock does.
type observedMCPBackend struct {
	mcpBackend
	inflight atomic.Int64
}

func (b *observedMCPBackend) RequestStarted()  { b.inflight.Add(1) }
func (b *observedMCPBackend) RequestFinished() { b.inflight.Add(-1) }

var _ = Describe("the MCP endpoint's sessions and streams", func() {
	var (
		b   *observedMCPBackend
		srv *httptest.Server
	)
	BeforeEach(func() {
		b = &observedMCPBackend{}
		srv = httptest.NewServer(gateway.New(b, nil).Handler())
		DeferCleanup(srv.Close)
	})
	connect := func(ctx context.Context, token, protocol string) *mcp.ClientSession {
		GinkgoHelper()
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v1"}, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}})
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + gateway.MCPPathPrefix + token, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cs.Close)
		return cs
	}

	It("keeps the streams that wait for notifications out of the requests in flight: the clock may jump while they are open", func(ctx SpecContext) {
		legacy := connect(ctx, "good", "2025-11-25") // its GET stream
		Expect(legacy.ID()).NotTo(BeEmpty(), "initialize opened a session")
		current := connect(ctx, "good", "") // its subscriptions/listen stream
		Expect(current.ID()).To(BeEmpty(), "protocol 2026-07-28 keeps no session")
		_, err := legacy.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		Eventually(b.inflight.Load).Should(BeZero())
		Consistently(b.inflight.Load).WithTimeout(300 * time.Millisecond).Should(BeZero())
	})

	It("answers a session id of another attempt's token with 404, and the session's own token as before", func(ctx SpecContext) {
		cs := connect(ctx, "good", "2025-11-25")
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+gateway.MCPPathPrefix+"old", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		Expect(resp.Body.Close()).To(Succeed())
		Expect(resp.StatusCode).To(Equal(http.StatusNotFound), string(body))
		Expect(string(body)).To(ContainSubstring("not one of attempt 1's open sessions"))
		_, err = cs.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
	})
})

// FuzzMCP sends arbitrary bodies to the MCP endpoint: it must never panic,
// and a JSON-RPC request with an id is answered with JSON.
func FuzzMCP(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"notes__add","arguments":{"text":"a"},"_meta":{"overnight.dev/idempotency-key":"k"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"notes__add","arguments":[1,2],"_meta":{"overnight.dev/idempotency-key":{}}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":null}`,
		`[{"jsonrpc":"2.0","id":6,"method":"ping"}]`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{`, ``, `null`,
	} {
		f.Add(s)
	}
	h := gateway.New(&mcpBackend{}, nil).Handler()
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, "http://gateway"+gateway.MCPPathPrefix+"good", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		rec := httptest.NewRecorder()
		serveBounded(h, rec, req, body)
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal([]byte(body), &msg) == nil && len(msg.ID) > 0 && rec.Code == http.StatusOK {
			if out := bytes.TrimSpace(rec.Body.Bytes()); len(out) > 0 && !json.Valid(out) {
				t.Fatalf("answer to %q is not JSON: %q", body, rec.Body.String())
			}
		}
	})
}
