package harness

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/sandbox/agent"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
)

const benchAnswer = `{"id":"x","object":"chat.completion","created":1,"model":"bench","choices":[{"index":0,"message":{"role":"assistant","content":"pong"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`

// benchServer is a run served by the real gateway on a unix socket, with
// its first attempt begun.
type benchServer struct {
	sdk   *agent.Client // the SDK client of the attempt
	raw   *http.Client  // a plain HTTP client dialling the socket
	token string
	run   *run
	stop  func()
}

// serveBenchRun creates a run of the scenario text in state and serves it
// behind the real gateway on a unix socket; with req.World set, the run acts
// on the world served at that base URL.
func serveBenchRun(b *testing.B, state, text string, env map[string]string, req RunRequest) benchServer {
	b.Helper()
	return serveBenchRunWith(b, Options{StateDir: state, LLMEnv: func(k string) string { return env[k] }}, text, req)
}

// serveBenchRunWith is serveBenchRun with the harness's options (its
// worlds, say) given whole.
func serveBenchRunWith(b *testing.B, opts Options, text string, req RunRequest) benchServer {
	b.Helper()
	ctx := context.Background()
	h, err := Open(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	scen, err := scenarios.Parse("bench.yaml", []byte(text))
	if err != nil {
		b.Fatal(err)
	}
	if req.World != "" {
		// As Run does: the scenario's world, served at req.World.
		scen.World = scenarios.World{Name: scen.World.Name, URL: req.World, Options: scen.World.Options}
	}
	req.Scenario = scen
	id, err := h.create(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	r, err := h.load(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	if r.llm != nil {
		r.llm.budget = llmBudget{}
	}
	sock, stopServer, err := serveGateway(r)
	if err != nil {
		b.Fatal(err)
	}
	token, err := r.beginAttempt(ctx, 1, false)
	if err != nil {
		b.Fatal(err)
	}
	c, err := agent.New(agent.Options{Socket: sock, Token: token, RetryFor: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	raw := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	return benchServer{sdk: c, raw: raw, token: token, run: r, stop: func() {
		raw.CloseIdleConnections()
		stopServer()
		_ = h.Close()
	}}
}

var benchChat = protocol.ChatRequest{Model: "bench", Messages: []protocol.ChatMessage{{Role: "user", Content: protocol.MessageContent{Text: "ping"}}}}

// BenchmarkLLMOverhead measures what the gateway adds to an LLM call: the
// same request body, sent by the same kind of plain HTTP client that reads
// and discards the answer, to the same local OpenAI-compatible server,
// directly and through the gateway's /v1/llm/chat/completions (auth, parsing,
// the langchaingo provider, and the exchange's durable record), interleaved
// in one run.
//
//	go test -run '^$' -bench LLMOverhead -benchtime 3000x ./harness
func BenchmarkLLMOverhead(b *testing.B) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, benchAnswer)
	}))
	defer provider.Close()
	env := map[string]string{"OPENAI_API_KEY": "sk-bench", "OPENAI_BASE_URL": provider.URL + "/v1"}
	lb := serveBenchRun(b, benchDir(b), llmScenario, env, RunRequest{LLM: "openai:bench"})
	defer lb.stop()
	ctx := context.Background()
	direct := &http.Client{}
	body := []byte(`{"model":"bench","messages":[{"role":"user","content":"ping"}]}`)
	call := func(c *http.Client, url, token string) time.Duration {
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		doOK(b, c, req)
		return time.Since(start)
	}
	var viaGateway, viaDirect []time.Duration
	before := lb.run.h.j.Stats()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		viaDirect = append(viaDirect, call(direct, provider.URL+"/v1/chat/completions", "sk-bench"))
		viaGateway = append(viaGateway, call(lb.raw, "http://gateway/v1/llm/chat/completions", lb.token))
	}
	b.StopTimer()
	after := lb.run.h.j.Stats()
	lb.run.mu.Lock()
	got := lb.run.llm.totals.Calls
	lb.run.mu.Unlock()
	if got != b.N {
		b.Fatalf("the gateway recorded %d calls for %d requests", got, b.N)
	}
	g, d := p50(viaGateway), p50(viaDirect)
	b.ReportMetric(float64(d.Microseconds())/1000, "direct-p50-ms")
	b.ReportMetric(float64(g.Microseconds())/1000, "gateway-p50-ms")
	b.ReportMetric(float64((g-d).Microseconds())/1000, "overhead-p50-ms")
	if syncs := after.Syncs - before.Syncs; syncs > 0 {
		// The durable record's share: the mean time of its sync.
		b.ReportMetric(float64((after.SyncTime-before.SyncTime).Microseconds())/float64(syncs)/1000, "sync-mean-ms")
	}
}

// BenchmarkLLMReplay measures how fast a recording is served offline.
//
//	go test -run '^$' -bench LLMReplay -benchtime 2000x ./harness
func BenchmarkLLMReplay(b *testing.B) {
	state := benchDir(b)
	rec := serveBenchRun(b, state, llmScenario, nil, RunRequest{})
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		if _, err := rec.sdk.Chat(ctx, benchChat); err != nil {
			b.Fatal(err)
		}
	}
	recorded := rec.run.rec.ID
	rec.stop()
	rp := serveBenchRun(b, state, llmScenario, nil, RunRequest{LLM: "replay:" + recorded})
	defer rp.stop()
	c := rp.sdk
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := c.Chat(ctx, benchChat); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchDir is a fresh state dir: under $OVERNIGHT_BENCH_DIR when set (to
// compare disks, or take the fsync out with a tmpfs), else a temp dir.
func benchDir(b *testing.B) string {
	if d := os.Getenv("OVERNIGHT_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}
