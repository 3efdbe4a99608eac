package harness

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/scenarios/cloud"
)

// BenchmarkCheckpointClaims measures a checkpoint round trip (the SDK over
// the unix socket, the gateway, a durable journal write, the reply) with
// and without two claims the cloud world judges (both hold) as it is written. The two
// alternate within one run, so both meet the same disk and the same
// neighbours; it reports each one's median and the claims' overhead on it
// (target ≤ 10%), and the judgement alone (judge-ns).
//
//	go test -run '^$' -bench CheckpointClaims -benchtime 4000x ./harness
func BenchmarkCheckpointClaims(b *testing.B) {
	state := map[string]any{"network_id": "net-1", "database_id": "db-1", "migrated": 3}
	claims := []map[string]any{
		{cloud.ClaimExists: map[string]string{"kind": "network", "name": "bench-net"}},
		{cloud.ClaimExists: map[string]string{"kind": "network", "id": "net-1"}},
	}
	c, r, stop := benchRun(b)
	defer stop()
	ctx := context.Background()
	if _, err := c.Effect(ctx, cloud.KindCreateNetwork, map[string]string{"name": "bench-net"}); err != nil {
		b.Fatal(err)
	}
	var with, without []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var cl any
		if i%2 == 1 {
			cl = claims
		}
		start := time.Now()
		if _, err := c.CheckpointClaims(ctx, i+1, state, cl); err != nil {
			b.Fatalf("checkpoint %d: %v", i+1, err)
		}
		if d := time.Since(start); cl != nil {
			with = append(with, d)
		} else {
			without = append(without, d)
		}
	}
	b.StopTimer()
	raw, _ := json.Marshal(claims)
	judge := claimsJudge{scen: r.scen, world: r.world}
	const n = 2000
	start := time.Now()
	for range n {
		if _, err := judge.judge(ctx, raw); err != nil {
			b.Fatal(err)
		}
	}
	judgeNS := float64(time.Since(start).Nanoseconds()) / n
	if len(with) == 0 || len(without) == 0 {
		return
	}
	p50 := func(l []time.Duration) float64 { slices.Sort(l); return float64(l[len(l)/2].Nanoseconds()) }
	pw, po := p50(with), p50(without)
	b.ReportMetric(po, "p50-without-ns")
	b.ReportMetric(pw, "p50-with-ns")
	b.ReportMetric(100*(pw-po)/po, "overhead-%")
	b.ReportMetric(judgeNS, "judge-ns")
}
