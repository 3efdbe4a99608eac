package harness

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
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
// durable journal appends measured in the same run.
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
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
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
	var viaGateway, viaDirect, floor []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		viaDirect = append(viaDirect, call(direct, "add_note", "", i))
		viaGateway = append(viaGateway, call(via, "notes__add_note", fmt.Sprintf("note-%d", i), i))
		floor = append(floor, floorAppends(ctx, b, h, i))
	}
	b.StopTimer()
	r.mu.Lock()
	n := len(r.fx.effects)
	r.mu.Unlock()
	if n != b.N {
		b.Fatalf("the gateway recorded %d effects for %d calls", n, b.N)
	}
	g, d, f := p50(viaGateway), p50(viaDirect), p50(floor)
	b.ReportMetric(float64(d.Microseconds())/1000, "direct-p50-ms")
	b.ReportMetric(float64(g.Microseconds())/1000, "gateway-p50-ms")
	b.ReportMetric(float64((g-d).Microseconds())/1000, "overhead-p50-ms")
	b.ReportMetric(float64(f.Microseconds())/1000, "two-appends-p50-ms")
}
