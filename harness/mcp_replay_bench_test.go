package harness

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/scenarios"
)

// mcpReplayCalls is how many tools/call the recorded run holds and the
// replay issues again.
const mcpReplayCalls = 1000

// BenchmarkMCPReplay measures a recorded run of 1,000 tools/call replayed
// offline: the counters server (testdata/mcpcounters, the official Go SDK
// over stdio) is called 1,000 times through the gateway's MCP endpoint by
// the official SDK client, then a second run with MCPReplay set (no server
// started) takes the same 1,000 calls from the same client through its
// gateway's unix socket, answered from the recording. Beside it, call by
// call in alternation with it (so both meet the same neighbours), the
// floor: the same client against an SDK server with one no-op tool,
// served over stateless streamable HTTP (JSON answers) on a unix socket in
// this process — one hop, client to handler, the hop the agent's client
// makes to the gateway. The sandbox's relay (the agent's socket inside a
// container, relayed to the gateway's) needs Docker and is in neither
// figure. replay/floor is the ratio of the two rates; syncs/call the
// journal's syncs per replayed call. Each op is the whole replay of 1,000
// calls.
//
//	GOMAXPROCS=1 go test -run '^$' -bench MCPReplay -benchtime 1x ./harness
func BenchmarkMCPReplay(b *testing.B) {
	ctx := context.Background()
	bin, err := buildCounters(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	state := benchDir(b)
	scen, err := scenarios.Parse("mcp-replay-bench.yaml", []byte(countersScenarioYAML(bin, scenarios.MCPKeysAgent, "")))
	if err != nil {
		b.Fatal(err)
	}
	call := func(cs *mcp.ClientSession, name string, i int) {
		p := &mcp.CallToolParams{Name: name, Arguments: map[string]any{"name": fmt.Sprintf("c%d", i%10), "n": 1},
			Meta: mcp.Meta{scenarios.MCPMetaIdempotencyKey: fmt.Sprintf("add-%d", i)}}
		res, err := cs.CallTool(ctx, p)
		if err != nil || res.IsError {
			b.Fatalf("%s call %d: %v %+v", name, i, err, res)
		}
	}
	// connect opens the SDK client's session at url.
	connect := func(url string, hc *http.Client) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
		if err != nil {
			b.Fatal(err)
		}
		return cs
	}

	// The recording: a live run, the counters server started for it.
	h, err := Open(ctx, Options{StateDir: state})
	if err != nil {
		b.Fatal(err)
	}
	rec, viaSocket, token, stop := startBenchRun(ctx, b, h, scen)
	cs := connect("http://gateway"+gateway.MCPPathPrefix+token, viaSocket)
	for i := range mcpReplayCalls {
		call(cs, "counters__add", i)
	}
	_ = cs.Close()
	recID := rec.rec.ID
	stop()
	if _, err := os.Stat(filepath.Join(state, "mcp", "counters-"+recID)); err != nil {
		b.Fatalf("the recorded run's counters server left no state dir: %v", err)
	}

	floorURL, floorClient := noopMCPServer(b)
	var replay, floor time.Duration
	var syncs uint64
	b.ResetTimer()
	for range b.N {
		h, err := Open(ctx, Options{StateDir: state})
		if err != nil {
			b.Fatal(err)
		}
		r, viaSocket, token, stop := startBenchRequest(ctx, b, h, RunRequest{Scenario: scen.ReplayingMCP(recID), MCPReplay: recID})
		replayed, floored := connect("http://gateway"+gateway.MCPPathPrefix+token, viaSocket), connect(floorURL, floorClient)
		// The replay's calls and the floor's alternate, so that both meet
		// the same neighbours on a shared machine.
		before := h.j.Stats().Syncs
		for i := range mcpReplayCalls {
			start := time.Now()
			call(replayed, "counters__add", i)
			mid := time.Now()
			call(floored, "noop", i)
			replay, floor = replay+mid.Sub(start), floor+time.Since(mid)
		}
		syncs += h.j.Stats().Syncs - before
		_, _ = replayed.Close(), floored.Close()
		r.mu.Lock()
		n := len(r.fx.effects)
		r.mu.Unlock()
		stop()
		if n != mcpReplayCalls {
			b.Fatalf("the replay recorded %d effects for %d calls", n, mcpReplayCalls)
		}
		if _, err := os.Stat(filepath.Join(state, "mcp", "counters-"+r.rec.ID)); err == nil {
			b.Fatalf("the replay %s started the counters server", r.rec.ID)
		}
	}
	b.StopTimer()
	calls := float64(mcpReplayCalls * b.N)
	replayRate, floorRate := calls/replay.Seconds(), calls/floor.Seconds()
	b.ReportMetric(replayRate, "replay-calls/s")
	b.ReportMetric(floorRate, "floor-calls/s")
	b.ReportMetric(replayRate/floorRate, "replay/floor")
	b.ReportMetric(float64(syncs)/calls, "syncs/call")
}

// noopMCPServer serves an SDK server with one tool, noop, that does
// nothing, over stateless streamable HTTP with JSON answers on a unix
// socket; it returns the endpoint and a client that dials the socket.
func noopMCPServer(b *testing.B) (string, *http.Client) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "noop", Version: "v1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "noop"}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	return serveMCPOnSocket(b, srv)
}

// serveMCPOnSocket serves srv as the gateway serves its MCP endpoint:
// stateless streamable HTTP with JSON answers, on a unix socket. It
// returns the endpoint and a client that dials the socket.
func serveMCPOnSocket(b *testing.B, srv *mcp.Server) (string, *http.Client) {
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	sock := filepath.Join(b.TempDir(), "mcp.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: handler}
	go func() { _ = hs.Serve(ln) }()
	b.Cleanup(func() { _ = hs.Close() })
	return "http://mcp/mcp", &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
}
