package harness

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/scenarios"
)

// mcpBenchScenario declares the MCP server at %s as "notes".
const mcpBenchScenario = `apiVersion: overnight/v1
kind: Scenario
name: mcp-bench
agent: {builtin: deployer}
mcp:
  servers:
    - {name: notes, url: "%s"}
limits: {horizon: 10d}
`

// BenchmarkMCPCall measures what the gateway's MCP endpoint adds to a
// tools/call: the same call, by the same official Go SDK client, to the
// same server (the SDK's, in this process, over stateless streamable HTTP
// with JSON answers), directly and through /v1/mcp/<token> on the
// gateway's socket (the SDK's handler, the effect path: intent, the call
// upstream, the journal of its answer, the result — each durable — and
// the duplicates check), interleaved in one run, beside the floor of two
// durable journal appends measured in the same run. harness-share is each
// call's time less the server's own (timed in its handler); syncs/op the
// durable writes per call; runq-wait the time the process's threads spent
// waiting for a CPU per round (the machine's load, not the harness);
// extra-hop-ratio the overhead less the two appends, in direct calls.
//
// Beside them, in the same rounds, the floor of any gateway that
// terminates MCP with the SDK: the same client calling a proxy — an SDK
// server on a unix socket, served as the gateway's endpoint is, whose
// tool does nothing but forward the call with an SDK client to the same
// server (no journal, no effect) — plus the round's two appends
// (proxy-floor: their sum, p50). gateway/proxy-floor is the ratio of the
// gateway's p50 to it, over-proxy-floor-ms their difference: what the
// harness adds beyond terminating MCP and two durable writes.
//
//	GOMAXPROCS=1 go test -run '^$' -bench MCPCall -benchtime 1000x ./harness
func BenchmarkMCPCall(b *testing.B) {
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1"}, nil)
	type addArgs struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "add_note"}, func(context.Context, *mcp.CallToolRequest, addArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	// The upstream times each request it serves: its share of a call
	// through the gateway is the server's, the rest the harness's.
	var served time.Duration
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		handler.ServeHTTP(w, r)
		served = time.Since(start)
	}))
	defer upstream.Close()

	h, err := Open(ctx, Options{StateDir: benchDir(b)})
	if err != nil {
		b.Fatal(err)
	}
	scen, err := scenarios.Parse("mcp-bench.yaml", []byte(fmt.Sprintf(mcpBenchScenario, upstream.URL)))
	if err != nil {
		b.Fatal(err)
	}
	r, viaSocket, token, stop := startBenchRun(ctx, b, h, scen)
	defer stop()
	connect := func(url string, hc *http.Client) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
		if err != nil {
			b.Fatal(err)
		}
		return cs
	}
	direct := connect(upstream.URL, &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()})
	defer direct.Close()
	via := connect("http://gateway"+gateway.MCPPathPrefix+token, viaSocket)
	defer via.Close()
	proxyURL, proxyClient := forwardingMCPProxy(ctx, b, upstream.URL)
	proxied := connect(proxyURL, proxyClient)
	defer proxied.Close()
	call := func(cs *mcp.ClientSession, name, key string, n int) time.Duration {
		p := &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": fmt.Sprintf("note %d", n)}}
		if key != "" {
			p.Meta = mcp.Meta{scenarios.MCPMetaIdempotencyKey: key}
		}
		start := time.Now()
		res, err := cs.CallTool(ctx, p)
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %+v", name, err, res)
		}
		return time.Since(start)
	}
	var viaGateway, viaDirect, viaProxy, floor, proxyFloor, harnessShare []time.Duration
	before := h.j.Stats()
	rq0 := runDelay()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		viaDirect = append(viaDirect, call(direct, "add_note", "", i))
		g := call(via, "notes__add_note", fmt.Sprintf("note-%d", i), i)
		viaGateway = append(viaGateway, g)
		harnessShare = append(harnessShare, g-served)
		p := call(proxied, "add_note", fmt.Sprintf("note-%d", i), i)
		viaProxy = append(viaProxy, p)
		f := floorAppends(ctx, b, h, i)
		floor = append(floor, f)
		proxyFloor = append(proxyFloor, p+f)
	}
	b.StopTimer()
	after := h.j.Stats()
	b.ReportMetric(float64((runDelay()-rq0).Nanoseconds())/float64(b.N)/1e6, "runq-wait-ms/op")
	g, d, f := reportPassThrough(b, r, "calls", viaGateway, viaDirect, floor, harnessShare)
	// A call through the gateway is two MCP hops (the agent's to the
	// gateway, the gateway's to the server) where the direct call is one:
	// the overhead less the durable writes, in direct calls.
	b.ReportMetric(float64(g-d-f)/float64(d), "extra-hop-ratio")
	// The terminating proxy makes the same two hops with no journal.
	p, pf := p50(viaProxy), p50(proxyFloor)
	b.ReportMetric(float64(p.Microseconds())/1000, "proxy-p50-ms")
	b.ReportMetric(float64(pf.Microseconds())/1000, "proxy-floor-p50-ms")
	b.ReportMetric(float64((g-pf).Microseconds())/1000, "over-proxy-floor-ms")
	b.ReportMetric(float64(g)/float64(pf), "gateway/proxy-floor")
	// Durable writes per call: every sync of the run less the floor's two
	// per round.
	b.ReportMetric(float64(after.Syncs-before.Syncs)/float64(b.N)-2, "syncs/op")
}

// runDelay is how long this process's threads have waited for a CPU
// (the sum of /proc/self/task/*/schedstat's run-queue delay; 0 where
// there is none): on a shared machine, much of a call's wall time is
// spent there rather than in the harness.
func runDelay() time.Duration {
	var total time.Duration
	ents, _ := os.ReadDir("/proc/self/task")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/schedstat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) > 1 {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			total += time.Duration(n)
		}
	}
	return total
}

// forwardingMCPProxy serves, as the gateway's endpoint is served
// (serveMCPOnSocket), an SDK server that lists the tools of the server at
// upstream and answers each tools/call by forwarding it — name, arguments
// and _meta as received — with one SDK client session to upstream, as the
// harness's connection to a url: server makes it. It keeps no journal: the
// floor of a gateway that terminates MCP with the SDK.
func forwardingMCPProxy(ctx context.Context, b *testing.B, upstream string) (string, *http.Client) {
	c := mcp.NewClient(&mcp.Implementation{Name: "proxy", Version: "v1"}, nil)
	up, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: upstream, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = up.Close() })
	tools, err := up.ListTools(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "proxy", Version: "v1"}, nil)
	for _, t := range tools.Tools {
		srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return up.CallTool(ctx, &mcp.CallToolParams{Meta: req.Params.Meta, Name: req.Params.Name, Arguments: req.Params.Arguments})
		})
	}
	return serveMCPOnSocket(b, srv)
}
