package reflect

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/scenarios"
)

// BenchmarkGateAllow measures the gate stage's cost on an effect its
// policies allow: deploy-v2's list, the kind matching none of its globs
// but the last.
//
//	go test -run '^$' -bench GateAllow ./reflect
func BenchmarkGateAllow(b *testing.B) {
	g := &gate{rules: []scenarios.GateRule{
		{Kinds: "cloud.deploy_*", Policy: scenarios.PolicyVerify},
		{Kinds: "cloud.set_dns", Policy: scenarios.PolicyVerify},
		{Kinds: "cloud.delete_*", Policy: scenarios.PolicyDeny},
		{Kinds: "*", Policy: scenarios.PolicyAllow},
	}}
	req := harness.GateRequest{RunID: "r", Attempt: 1, EffectID: "k/step-1/0", Key: "step-1/0", Kind: "cloud.create_network", Args: []byte(`{"name":"prod-net"}`)}
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		d, err := g.Admit(ctx, req)
		lat = append(lat, time.Since(start))
		if err != nil || !d.Allow {
			b.Fatalf("%+v %v", d, err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}
