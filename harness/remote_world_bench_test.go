package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// BenchmarkEffectRoundTripRemoteWorld measures the effect round trip of
// BenchmarkEffectRoundTrip (the SDK over the unix socket, the gateway, the
// durable intent, the world, the durable result, the reply) against three
// worlds, interleaved in one run so that their ratio is taken on the same
// disk in the same seconds:
//
//   - in-process: the built-in cloud world, its state in the run's journal;
//   - served: the same world served by `overnight world serve cloud --data
//     DIR`, a separate process on loopback, durable (each apply fsynced in
//     its own Badger) — and the harness journals each answer it gets;
//   - served-memory: the same, without --data (the world's state in memory).
//
// Beside them, to say where the served world's time goes, the world
// protocol's apply alone (a remote.Client straight to each served world,
// no harness): HTTP and JSON on loopback, the world's work, plus its fsync
// when durable; and the protocol's floor, a lookup of a key the memory
// world never saw. It also reports the harness journal's syncs per effect of each
// run and their mean time, and checks after the loop that every world's
// ledger holds every effect sent.
//
//	go test -run '^$' -bench RemoteWorld -benchtime 2000x ./harness
func BenchmarkEffectRoundTripRemoteWorld(b *testing.B) {
	ctx := context.Background()
	bin := filepath.Join(b.TempDir(), "overnight")
	if err := harnesstest.Build(ctx, "./cmd/overnight", bin, ""); err != nil {
		b.Fatal(err)
	}
	durableURL := serveWorldProcess(b, bin, "--data", filepath.Join(benchDir(b), "world"))
	memoryURL := serveWorldProcess(b, bin)

	type lane struct {
		name     string
		bs       benchServer
		lat      []time.Duration
		syncs    uint64
		syncTime time.Duration
	}
	lanes := []*lane{
		{name: "in-process", bs: serveBenchRun(b, benchDir(b), backendScenario, nil, RunRequest{})},
		{name: "served", bs: serveBenchRun(b, benchDir(b), backendScenario, nil, RunRequest{World: durableURL})},
		{name: "served-memory", bs: serveBenchRun(b, benchDir(b), backendScenario, nil, RunRequest{World: memoryURL})},
	}
	for _, l := range lanes {
		defer l.bs.stop()
	}
	type applyLane struct {
		name string
		c    *remote.Client
		lat  []time.Duration
	}
	var applies []*applyLane
	for _, a := range []struct{ name, url string }{{"apply-durable", durableURL}, {"apply-memory", memoryURL}} {
		c, err := remote.Dial(ctx, a.url, remote.Config{Scope: "direct"})
		if err != nil {
			b.Fatal(err)
		}
		applies = append(applies, &applyLane{name: a.name, c: c})
	}

	args := func(i int) map[string]string {
		return map[string]string{"host": fmt.Sprintf("h%d.example.com", i%100), "target": "svc-1.cloud.internal"}
	}
	effect := func(l *lane, i int) time.Duration {
		start := time.Now()
		res, err := l.bs.sdk.EffectWithKey(ctx, fmt.Sprintf("bench-%d", i), cloud.KindSetDNS, args(i))
		took := time.Since(start)
		if err != nil || res.Status != "done" {
			b.Fatalf("%s: effect %d: %v %+v", l.name, i, err, res)
		}
		return took
	}
	// The protocol's floor: a lookup of a key the memory world never saw
	// (HTTP and JSON both ways, a map read), on the same connection.
	probe := applies[1].c
	var lookups []time.Duration
	lookup := func(i int) time.Duration {
		start := time.Now()
		_, found, err := probe.Lookup(ctx, fmt.Sprintf("never-%d", i))
		took := time.Since(start)
		if err != nil || found {
			b.Fatalf("lookup %d of a key never sent: found %v, %v", i, found, err)
		}
		return took
	}
	apply := func(a *applyLane, i int) time.Duration {
		raw := fmt.Appendf(nil, `{"host":"h%d.example.com","target":"svc-1.cloud.internal"}`, i%100)
		start := time.Now()
		out, err := a.c.Execute(ctx, world.Request{Key: fmt.Sprintf("bench-%d", i), Kind: cloud.KindSetDNS, Args: raw, Now: VirtualEpoch})
		took := time.Since(start)
		if err != nil || out.Status != "done" {
			b.Fatalf("%s: apply %d: %v %+v", a.name, i, err, out)
		}
		return took
	}

	// A few effects first: connections dialled, each Badger's first write made.
	const warm = 10
	for i := -warm; i < 0; i++ {
		for _, l := range lanes {
			effect(l, i)
		}
		for _, a := range applies {
			apply(a, i)
		}
		lookup(i)
	}
	before := make([]journal.Stats, len(lanes))
	for k, l := range lanes {
		before[k] = l.bs.run.h.j.Stats()
		l.lat = make([]time.Duration, 0, b.N)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, l := range lanes {
			l.lat = append(l.lat, effect(l, i))
		}
		for _, a := range applies {
			a.lat = append(a.lat, apply(a, i))
		}
		lookups = append(lookups, lookup(i))
	}
	b.StopTimer()
	for k, l := range lanes {
		after := l.bs.run.h.j.Stats()
		l.syncs, l.syncTime = after.Syncs-before[k].Syncs, after.SyncTime-before[k].SyncTime
	}

	// Every world really acted on every effect: its own ledger says so.
	for _, l := range lanes {
		ledger, err := l.bs.run.world.Ledger(ctx)
		if err != nil {
			b.Fatalf("%s: the world's ledger: %v", l.name, err)
		}
		if len(ledger) != warm+b.N {
			b.Fatalf("%s: the world's ledger holds %d entries after %d effects", l.name, len(ledger), warm+b.N)
		}
	}
	for _, a := range applies {
		ledger, err := a.c.Ledger(ctx)
		if err != nil {
			b.Fatalf("%s: the world's ledger: %v", a.name, err)
		}
		if len(ledger) != warm+b.N {
			b.Fatalf("%s: the world's ledger holds %d entries after %d applies", a.name, len(ledger), warm+b.N)
		}
	}

	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for _, l := range lanes {
		p50, p99 := percentiles(l.lat)
		b.ReportMetric(ms(p50), l.name+"-p50-ms")
		b.ReportMetric(ms(p99), l.name+"-p99-ms")
		b.ReportMetric(float64(l.syncs)/float64(b.N), l.name+"-syncs/effect")
		if l.syncs > 0 {
			b.ReportMetric(ms(l.syncTime)/float64(l.syncs), l.name+"-sync-mean-ms")
		}
	}
	for _, a := range applies {
		p50, p99 := percentiles(a.lat)
		b.ReportMetric(ms(p50), a.name+"-p50-ms")
		b.ReportMetric(ms(p99), a.name+"-p99-ms")
	}
	p50, p99 := percentiles(lookups)
	b.ReportMetric(ms(p50), "lookup-memory-p50-ms")
	b.ReportMetric(ms(p99), "lookup-memory-p99-ms")
	local, _ := percentiles(lanes[0].lat)
	served, _ := percentiles(lanes[1].lat)
	memory, _ := percentiles(lanes[2].lat)
	b.ReportMetric(float64(served)/float64(local), "served/in-process-p50-x")
	b.ReportMetric(float64(memory)/float64(local), "served-memory/in-process-p50-x")
}

// percentiles are the p50 and p99 of lat.
func percentiles(lat []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)*99/100]
}

// serveWorldProcess starts `bin world serve cloud args...` on a free
// loopback port and returns its base URL once it says it serves; cleanup
// stops it (SIGTERM, then SIGKILL after 10 s), and it dies with the
// benchmark's process in any case.
func serveWorldProcess(b *testing.B, bin string, args ...string) string {
	b.Helper()
	cmd := exec.Command(bin, append([]string{"world", "serve", "cloud", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start %s world serve: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	// stderr is read once the process is gone (Wait has copied it all).
	fail := func(format string, a ...any) {
		_ = cmd.Process.Kill()
		<-done
		b.Fatalf("world serve %s: %s; stderr: %s", strings.Join(args, " "), fmt.Sprintf(format, a...), stderr.String())
	}
	var line string
	select {
	case line = <-lines:
	case <-time.After(30 * time.Second):
		fail("no line within 30 s")
	}
	rest, ok := strings.CutPrefix(line, "serving world cloud on ")
	if !ok {
		fail("printed %q, not its serving line", line)
	}
	url, _, _ := strings.Cut(rest, ",")
	return url
}
