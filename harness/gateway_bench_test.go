package harness

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/sandbox/agent"
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
	bs := serveBenchRun(b, benchDir(b), backendScenario, nil, RunRequest{})
	return bs.sdk, bs.run, bs.stop
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}
