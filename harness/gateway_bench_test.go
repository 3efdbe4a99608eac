package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/agent"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/cloud"
)

// BenchmarkEffectRoundTrip measures one effect through the whole boundary:
// the SDK's HTTP client over the unix socket, the gateway, a durable intent,
// the cloud world's durable execution, a durable result, and the reply.
// Each op is a new key, so the world really acts every time.
//
//	go test -run '^$' -bench EffectRoundTrip ./harness
func BenchmarkEffectRoundTrip(b *testing.B) {
	c, r, stop := benchRun(b)
	defer stop()
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, err := c.EffectWithKey(ctx, fmt.Sprintf("bench-%d", i), cloud.KindSetDNS,
			map[string]string{"host": fmt.Sprintf("h%d.example.com", i%100), "target": "svc-1.cloud.internal"})
		lat = append(lat, time.Since(start))
		if err != nil || res.Status != "done" {
			b.Fatalf("effect %d: %v %+v", i, err, res)
		}
	}
	b.StopTimer()
	reportPercentiles(b, lat)
	_ = r
}

// BenchmarkEffectReplay measures a repeated key: answered from the journal
// without touching the world.
//
//	go test -run '^$' -bench EffectReplay ./harness
func BenchmarkEffectReplay(b *testing.B) {
	c, _, stop := benchRun(b)
	defer stop()
	ctx := context.Background()
	args := map[string]string{"host": "h.example.com", "target": "svc-1.cloud.internal"}
	if _, err := c.EffectWithKey(ctx, "replayed", cloud.KindSetDNS, args); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, err := c.EffectWithKey(ctx, "replayed", cloud.KindSetDNS, args)
		lat = append(lat, time.Since(start))
		if err != nil || !res.Replayed {
			b.Fatalf("replay %d: %v %+v", i, err, res)
		}
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

func benchRun(b *testing.B) (*agent.Client, *run, func()) {
	b.Helper()
	ctx := context.Background()
	dir := b.TempDir()
	if d := os.Getenv("OVERNIGHT_BENCH_DIR"); d != "" {
		var err error
		if dir, err = os.MkdirTemp(d, "bench-"); err != nil {
			b.Fatal(err)
		}
	}
	h, err := Open(ctx, Options{StateDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	scen, err := scenarios.Parse("bench.yaml", []byte(backendScenario))
	if err != nil {
		b.Fatal(err)
	}
	id, err := h.create(ctx, RunRequest{Scenario: scen})
	if err != nil {
		b.Fatal(err)
	}
	r, err := h.load(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "ovn-bench-")
	if err != nil {
		b.Fatal(err)
	}
	l, err := sandbox.ListenSocket(filepath.Join(sockDir, gateway.SocketName))
	if err != nil {
		b.Fatal(err)
	}
	srv := gateway.New(r, nil)
	go func() { _ = srv.Serve(l) }()
	token, err := r.beginAttempt(ctx, 1)
	if err != nil {
		b.Fatal(err)
	}
	c, err := agent.New(agent.Options{Socket: filepath.Join(sockDir, gateway.SocketName), Token: token, RetryFor: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	return c, r, func() {
		_ = srv.Close()
		_ = os.RemoveAll(sockDir)
		_ = h.Close()
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}
