package harness

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/harness/protocol"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/agent"
	"github.com/overnight-dev/overnight/scenarios"
)

const benchAnswer = `{"id":"x","object":"chat.completion","created":1,"model":"bench","choices":[{"index":0,"message":{"role":"assistant","content":"pong"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`

// llmBenchRun serves a run whose model is req.LLM behind the real gateway
// on a unix socket, and returns an SDK client for its first attempt.
func llmBenchRun(b *testing.B, state string, env map[string]string, req RunRequest) (*agent.Client, *run, func()) {
	b.Helper()
	ctx := context.Background()
	h, err := Open(ctx, Options{StateDir: state, LLMEnv: func(k string) string { return env[k] }})
	if err != nil {
		b.Fatal(err)
	}
	scen, err := scenarios.Parse("bench.yaml", []byte(llmScenario))
	if err != nil {
		b.Fatal(err)
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
	r.llm.budget = llmBudget{}
	dir, err := os.MkdirTemp("", "ovn-lb-")
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(dir, gateway.SocketName)
	l, err := sandbox.ListenSocket(sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := gateway.New(r, nil)
	go func() { _ = srv.Serve(l) }()
	token, err := r.beginAttempt(ctx, 1)
	if err != nil {
		b.Fatal(err)
	}
	c, err := agent.New(agent.Options{Socket: sock, Token: token, RetryFor: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	return c, r, func() { _ = srv.Close(); _ = os.RemoveAll(dir); _ = h.Close() }
}

var benchChat = protocol.ChatRequest{Model: "bench", Messages: []protocol.ChatMessage{{Role: "user", Content: protocol.MessageContent{Text: "ping"}}}}

// BenchmarkLLMOverhead measures what the gateway adds to an LLM call: the
// same request to the same local OpenAI-compatible server, directly and
// through the gateway (auth, parsing, the provider adapter, and the
// exchange's durable record), interleaved in one run.
//
//	go test -run '^$' -bench LLMOverhead -benchtime 2000x ./harness
func BenchmarkLLMOverhead(b *testing.B) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, benchAnswer)
	}))
	defer provider.Close()
	env := map[string]string{"OPENAI_API_KEY": "sk-bench", "OPENAI_BASE_URL": provider.URL + "/v1"}
	c, _, stop := llmBenchRun(b, benchDir(b), env, RunRequest{LLM: "openai:bench"})
	defer stop()
	ctx := context.Background()
	direct := &http.Client{}
	body := []byte(`{"model":"bench","messages":[{"role":"user","content":"ping"}]}`)
	var viaGateway, viaDirect []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, provider.URL+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-bench")
		req.Header.Set("Content-Type", "application/json")
		resp, err := direct.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		viaDirect = append(viaDirect, time.Since(start))

		start = time.Now()
		if _, err := c.Chat(ctx, benchChat); err != nil {
			b.Fatal(err)
		}
		viaGateway = append(viaGateway, time.Since(start))
	}
	b.StopTimer()
	g, d := p50(viaGateway), p50(viaDirect)
	b.ReportMetric(float64(d.Microseconds())/1000, "direct-p50-ms")
	b.ReportMetric(float64(g.Microseconds())/1000, "gateway-p50-ms")
	b.ReportMetric(float64((g-d).Microseconds())/1000, "overhead-p50-ms")
}

// BenchmarkLLMReplay measures how fast a recording is served offline.
//
//	go test -run '^$' -bench LLMReplay -benchtime 2000x ./harness
func BenchmarkLLMReplay(b *testing.B) {
	state := benchDir(b)
	rec, r, stop := llmBenchRun(b, state, nil, RunRequest{})
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		if _, err := rec.Chat(ctx, benchChat); err != nil {
			b.Fatal(err)
		}
	}
	recorded := r.rec.ID
	stop()
	c, _, stop := llmBenchRun(b, state, nil, RunRequest{LLM: "replay:" + recorded})
	defer stop()
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
	s := append([]time.Duration(nil), d...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
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
