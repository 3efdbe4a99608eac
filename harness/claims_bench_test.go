package harness

import (
	"context"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/scenarios/cloud"
)

// BenchmarkCheckpointClaims measures a checkpoint round trip (the SDK over
// the unix socket, the gateway, a durable journal write, the reply) with
// and without two claims the cloud world judges as it is written; the
// claims' cost is the difference.
//
//	go test -run '^$' -bench CheckpointClaims ./harness
func BenchmarkCheckpointClaims(b *testing.B) {
	state := map[string]any{"network_id": "net-1", "database_id": "db-1", "migrated": 3}
	claims := []map[string]any{
		{cloud.ClaimExists: map[string]string{"kind": "network", "name": "bench-net"}},
		{cloud.ClaimMigrated: map[string]any{"database": "bench-db", "version": 3}},
	}
	for _, bc := range []struct {
		name   string
		claims any
	}{{"without", nil}, {"with", claims}} {
		b.Run(bc.name, func(b *testing.B) {
			c, _, stop := benchRun(b)
			defer stop()
			ctx := context.Background()
			_, _ = c.Effect(ctx, cloud.KindCreateNetwork, map[string]string{"name": "bench-net"})
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if _, err := c.CheckpointClaims(ctx, i+1, state, bc.claims); err != nil {
					b.Fatalf("checkpoint %d: %v", i+1, err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			reportPercentiles(b, lat)
		})
	}
}
