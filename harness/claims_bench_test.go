package harness

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/scenarios/cloud"
)

// BenchmarkCheckpointClaims measures a checkpoint round trip (the SDK over
// the unix socket, the gateway, a durable journal write, the reply) in
// three lanes that take turns within one run, so all meet the same disk
// and the same neighbours: without claims; with two claims the cloud world
// judges (both hold) as it is written, the state the same; and the floor,
// no claims but a state larger by an opaque string, so that its request is
// exactly as large as the one with claims. It reports each lane's median,
// the claims' overhead on the round trip without them (target ≤ 10%), the
// floor's (what the extra bytes alone cost), and the judgement alone
// (judge-ns).
//
//	go test -run '^$' -bench CheckpointClaims -benchtime 6000x ./harness
func BenchmarkCheckpointClaims(b *testing.B) {
	state := map[string]any{"network_id": "net-1", "database_id": "db-1", "migrated": 3}
	claims := []map[string]any{
		{cloud.ClaimExists: map[string]string{"kind": "network", "name": "bench-net"}},
		{cloud.ClaimExists: map[string]string{"kind": "network", "id": "net-1"}},
	}
	raw, err := json.Marshal(claims)
	if err != nil {
		b.Fatal(err)
	}
	// `,"claims":` and the claims on one side; `,"pad":""` and the pad on the other.
	padded := map[string]any{"pad": strings.Repeat("x", len(`,"claims":`)+len(raw)-len(`,"pad":""`))}
	maps.Copy(padded, state)
	c, r, stop := benchRun(b)
	defer stop()
	ctx := context.Background()
	if _, err := c.Effect(ctx, cloud.KindCreateNetwork, map[string]string{"name": "bench-net"}); err != nil {
		b.Fatal(err)
	}
	var lanes [3][]time.Duration // without, with, floor
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, cl := any(state), any(nil)
		switch i % 3 {
		case 1:
			cl = claims
		case 2:
			st = padded
		}
		start := time.Now()
		if _, err := c.CheckpointClaims(ctx, i+1, st, cl); err != nil {
			b.Fatalf("checkpoint %d: %v", i+1, err)
		}
		lanes[i%3] = append(lanes[i%3], time.Since(start))
	}
	b.StopTimer()
	judge := claimsJudge{scen: r.scen, world: r.world}
	const n = 2000
	start := time.Now()
	for range n {
		if _, err := judge.judge(ctx, raw); err != nil {
			b.Fatal(err)
		}
	}
	judgeNS := float64(time.Since(start).Nanoseconds()) / n
	if len(lanes[2]) == 0 {
		return
	}
	p50 := func(l []time.Duration) float64 { slices.Sort(l); return float64(l[len(l)/2].Nanoseconds()) }
	po, pw, pf := p50(lanes[0]), p50(lanes[1]), p50(lanes[2])
	b.ReportMetric(po, "p50-without-ns")
	b.ReportMetric(pw, "p50-with-ns")
	b.ReportMetric(pf, "p50-floor-ns")
	b.ReportMetric(100*(pw-po)/po, "overhead-%")
	b.ReportMetric(100*(pf-po)/po, "floor-%")
	b.ReportMetric(judgeNS, "judge-ns")
}
