package docker_test

import (
	"github.com/overnight-dev/overnight/sandbox/docker"

	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/sandbox"
)

// floorRequests is how many requests one sandbox makes in BenchmarkGatewayFloor: as many as
// the reflection's replay benchmark (reflect.BenchmarkReplay).
const floorRequests = 10000

// BenchmarkGatewayFloor measures the floor under every gateway request: an agent in a sandbox
// making small JSON POSTs one after another on a keep-alive connection, answered by a plain Go
// HTTP server on the host's unix socket that does nothing (no journal, no JSON work). "relay"
// goes through the init's relay (OVERNIGHT_URL, 127.0.0.1:7070 → the bind-mounted socket);
// "socket" dials the bind-mounted socket itself (OVERNIGHT_SOCKET), as the Go SDK does (the
// harness package's BenchmarkLoadgenFloor runs the SDK and the load generator itself on this
// path). Timed inside the sandbox (container start excluded); the agent runs with GOMAXPROCS=1,
// as the overnight binary does, and so should the benchmark:
//
//	GOMAXPROCS=1 go test -run '^$' -bench GatewayFloor -benchtime 3x ./sandbox
func BenchmarkGatewayFloor(b *testing.B) {
	for _, via := range []string{"relay", "socket"} {
		b.Run(via, func(b *testing.B) { gatewayFloor(b, via) })
	}
}

func gatewayFloor(b *testing.B, via string) {
	if err := benchSetup(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	e := benchEnv.e
	var trips []time.Duration
	for i := 0; i < b.N; i++ {
		spec := docker.ContainerSpec{
			RunID: fmt.Sprintf("bench-%s-%d", randomID(), i), Attempt: 1, Image: benchEnv.image,
			Cmd:       []string{sandbox.InitPath, "gateway-loop", via, fmt.Sprint(floorRequests)},
			SocketDir: benchEnv.sockDir,
			Env: map[string]string{
				"OVERNIGHT_URL": sandbox.RelayURL, "OVERNIGHT_SOCKET": sandbox.GatewaySocket,
				"GOMAXPROCS": "1",
			},
			Labels: map[string]string{"overnight.test.bench": "true"},
		}
		trip, err := floorRun(ctx, e, spec)
		if err != nil {
			b.Fatal(err)
		}
		trips = append(trips, trip)
	}
	slices.Sort(trips)
	p50 := percentile(trips, 0.5)
	b.ReportMetric(float64(p50.Nanoseconds())/1000, "round-trip-µs")
	b.ReportMetric(float64(time.Second)/float64(p50), "requests/s")
}

// floorRun runs spec's sandbox to its end, removes it, and returns its mean round trip.
func floorRun(ctx context.Context, e *docker.Engine, spec docker.ContainerSpec) (trip time.Duration, err error) {
	sb, err := e.Create(ctx, spec)
	if err != nil {
		return 0, err
	}
	defer func() {
		if rerr := e.Remove(context.WithoutCancel(ctx), sb.ID); rerr != nil && err == nil {
			err = rerr
		}
	}()
	if err := e.Start(ctx, sb.ID); err != nil {
		return 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	code, err := e.Wait(wctx, sb.ID)
	if err != nil {
		return 0, err
	}
	out, errOut, err := e.Logs(ctx, sb.ID)
	if err != nil {
		return 0, err
	}
	var n int
	var ns int64
	if _, err := fmt.Sscanf(string(out), "requests=%d elapsed_ns=%d", &n, &ns); err != nil || code != 0 || n == 0 {
		return 0, fmt.Errorf("sandbox %s exited %d: %s %s", sb.Name, code, out, errOut)
	}
	return time.Duration(ns / int64(n)), nil
}
