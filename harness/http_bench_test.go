package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/scenarios"
)

// httpBenchScenario declares etcd (at %s) as the HTTP API "etcd".
const httpBenchScenario = `apiVersion: overnight/v1
kind: Scenario
name: http-bench
agent: {builtin: deployer}
http:
  - name: etcd
    base_url: %s
    routes:
      - {route: "POST /v3/kv/put", kind: put, identity: args.key}
    credentials: {header: Authorization, env: ETCD_TOKEN}
limits: {horizon: 10d}
`

// BenchmarkHTTPPassThrough measures what the gateway's HTTP pass-through
// adds to a request: the same put of a new key, by the same plain HTTP
// client, to the same real etcd (authentication on), directly and through
// /v1/http/etcd/<token>/v3/kv/put (route match, the effect path: intent,
// the upstream, the journal of its answer, the result — each durable — and
// the duplicates check), interleaved in one run, beside the floor of two
// durable journal appends measured in the same run, and the gateway's own
// round trip (GET /v1/clock over the same socket). harness-share is each
// pass-through's time less its round trip to etcd (timed at the world's
// transport): what the harness itself adds, whatever etcd took.
//
//	GOMAXPROCS=1 go test -run '^$' -bench HTTPPassThrough -benchtime 1000x ./harness
func BenchmarkHTTPPassThrough(b *testing.B) {
	ctx := context.Background()
	e := harnesstest.StartEtcd(ctx, b, etcdBenchDir(b))
	defer e.Stop()
	h, err := Open(ctx, Options{StateDir: benchDir(b), Env: func(k string) string {
		if k == "ETCD_TOKEN" {
			return e.Token
		}
		return ""
	}})
	if err != nil {
		b.Fatal(err)
	}
	scen, err := scenarios.Parse("http-bench.yaml", []byte(fmt.Sprintf(httpBenchScenario, e.URL)))
	if err != nil {
		b.Fatal(err)
	}
	r, viaSocket, token, stop := startBenchRun(ctx, b, h, scen)
	defer stop()
	// The world's client goes through http.DefaultTransport: timed there,
	// its share of each pass-through is the upstream's, the rest the
	// harness's. The direct client has a transport of its own.
	direct := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	timed := &timingTransport{next: http.DefaultTransport}
	http.DefaultTransport = timed
	defer func() { http.DefaultTransport = timed.next }()
	put := func(c *http.Client, url, auth, key string, n int) time.Duration {
		body := []byte(fmt.Sprintf(`{"key":%q,"value":"dmFsdWU="}`, harnesstest.B64(fmt.Sprintf("bench/%s/%d", key, n))))
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if key == "gateway" {
			req.Header.Set("Idempotency-Key", fmt.Sprintf("put-%d", n))
		}
		doOK(b, c, req)
		return time.Since(start)
	}
	// The gateway's own round-trip floor: GET /v1/clock by the same
	// client over the same socket (auth, routing, a lock, a small JSON
	// answer; nothing durable).
	clock := func() time.Duration {
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://gateway/v1/clock", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		doOK(b, viaSocket, req)
		return time.Since(start)
	}
	// The same floor in place: the gateway's round trip, then a durable
	// append, the same put straight to etcd, and a durable append — where
	// a pass-through makes its two syncs (after the agent's request
	// arrived; after the upstream answered) — less that put's own time.
	// What a pass-through costs beyond it is the harness's own work.
	inPlace := func(n int) time.Duration {
		start := time.Now()
		clock()
		appendOne(ctx, b, h, fmt.Sprintf("bench-in-place/%d/0", n))
		upstream := put(direct, e.URL+"/v3/kv/put", e.Token, "in-place", n)
		appendOne(ctx, b, h, fmt.Sprintf("bench-in-place/%d/1", n))
		return time.Since(start) - upstream
	}
	var viaGateway, viaDirect, floor, harnessShare, clocks, inPlaces []time.Duration
	before := h.j.Stats()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		viaDirect = append(viaDirect, put(direct, e.URL+"/v3/kv/put", e.Token, "direct", i))
		g := put(viaSocket, "http://gateway/v1/http/etcd/"+token+"/v3/kv/put", "", "gateway", i)
		viaGateway = append(viaGateway, g)
		harnessShare = append(harnessShare, g-timed.last)
		floor = append(floor, floorAppends(ctx, b, h, i))
		clocks = append(clocks, clock())
		inPlaces = append(inPlaces, inPlace(i))
	}
	b.StopTimer()
	after := h.j.Stats()
	g, d, f := reportPassThrough(b, r, "requests", viaGateway, viaDirect, floor, harnessShare)
	c := p50(clocks)
	b.ReportMetric(float64(c.Microseconds())/1000, "gateway-clock-p50-ms")
	// What the overhead holds beyond the two floors: the syncs' and the
	// gateway's round trip.
	b.ReportMetric(float64((g-d-f-c).Microseconds())/1000, "overhead-beyond-floors-p50-ms")
	// The honest floor: the round trip and two appends where the
	// pass-through makes them; the overhead's share of it.
	ip := p50(inPlaces)
	b.ReportMetric(float64(ip.Microseconds())/1000, "floor-in-place-p50-ms")
	b.ReportMetric(float64((g-d-ip).Microseconds())/1000, "overhead-beyond-floor-in-place-p50-ms")
	b.ReportMetric(float64(g-d)/float64(ip), "overhead/floor-in-place-x")
	// Durable writes per pass-through: every sync of the run less the
	// floors' four per round.
	b.ReportMetric(float64(after.Syncs-before.Syncs)/float64(b.N)-4, "syncs/op")
}

// doOK sends req, reads its answer to the end and fails the benchmark
// unless it is 200 OK.
func doOK(b *testing.B, c *http.Client, req *http.Request) {
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("%s %s: %s", req.Method, req.URL, resp.Status)
	}
}

// startBenchRun records a run of scen on h, loads it, serves its gateway
// on a unix socket and begins attempt 1: the run, an HTTP client of that
// socket, the attempt's token, and what stops it all (h included).
func startBenchRun(ctx context.Context, b *testing.B, h *Harness, scen *scenarios.Scenario) (*run, *http.Client, string, func()) {
	return startBenchRequest(ctx, b, h, RunRequest{Scenario: scen})
}

// startBenchRequest is startBenchRun for a run of req (a replay, say).
func startBenchRequest(ctx context.Context, b *testing.B, h *Harness, req RunRequest) (*run, *http.Client, string, func()) {
	id, err := h.create(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	r, err := h.load(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	sock, stopServer, err := serveGateway(r)
	if err != nil {
		b.Fatal(err)
	}
	stop := func() {
		stopServer()
		_ = h.Close()
	}
	token, err := r.beginAttempt(ctx, 1, false)
	if err != nil {
		stop()
		b.Fatal(err)
	}
	viaSocket := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	return r, viaSocket, token, stop
}

// floorAppends times two durable journal appends: the floor a call
// through the gateway is measured beside.
func floorAppends(ctx context.Context, b *testing.B, h *Harness, n int) time.Duration {
	start := time.Now()
	for k := range 2 {
		appendOne(ctx, b, h, fmt.Sprintf("bench-floor/%d/%d", n, k))
	}
	return time.Since(start)
}

// appendOne makes one small durable journal append under key.
func appendOne(ctx context.Context, b *testing.B, h *Harness, key string) {
	if err := h.j.Commit(ctx, journal.Entry{Key: []byte(key), Value: []byte(`{"status":"intent"}`)}); err != nil {
		b.Fatal(err)
	}
}

// timingTransport times each round trip it carries; last is the latest's.
type timingTransport struct {
	next http.RoundTripper
	last time.Duration
}

func (t *timingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		// The answer's body is read by the caller: counted from the moment
		// it is closed would be exact; the headers' arrival is close enough
		// for an answer of a few hundred bytes.
		t.last = time.Since(start)
	}
	return resp, err
}

// etcdBenchDir is where the benchmark's etcd keeps its data: in memory
// (/dev/shm) when the machine has it, so that etcd's own fsyncs do not
// queue behind the journal's on the same disk — a real upstream is on
// another machine — else a temporary directory.
func etcdBenchDir(b *testing.B) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "ovn-etcd-bench-")
		if err == nil {
			b.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return b.TempDir()
}

// reportPassThrough checks that the run recorded one effect per call and
// reports the p50s every pass-through benchmark shares (direct, through the
// gateway, the overhead, the floor of two appends, the harness's share);
// it returns the gateway's, the direct and the floor's p50.
func reportPassThrough(b *testing.B, r *run, noun string, viaGateway, viaDirect, floor, harnessShare []time.Duration) (g, d, f time.Duration) {
	r.mu.Lock()
	n := len(r.fx.effects)
	r.mu.Unlock()
	if n != b.N {
		b.Fatalf("the gateway recorded %d effects for %d %s", n, b.N, noun)
	}
	g, d, f = p50(viaGateway), p50(viaDirect), p50(floor)
	b.ReportMetric(float64(d.Microseconds())/1000, "direct-p50-ms")
	b.ReportMetric(float64(g.Microseconds())/1000, "gateway-p50-ms")
	b.ReportMetric(float64((g-d).Microseconds())/1000, "overhead-p50-ms")
	b.ReportMetric(float64(f.Microseconds())/1000, "two-appends-p50-ms")
	b.ReportMetric(float64(p50(harnessShare).Microseconds())/1000, "harness-share-p50-ms")
	return g, d, f
}
