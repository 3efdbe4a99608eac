package harness

import (
	"context"
	"os"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox/agent"
	"github.com/overnight-dev/overnight/scenarios/agents"
)

// loadgenScenario is reflect.BenchmarkReplay's scenario.
const loadgenScenario = `apiVersion: overnight/v1
kind: Scenario
name: loadgen
world: cloud
agent: {builtin: loadgen}
task: {dns: h0.example.com, service: {name: api}}
llm: {model: scripted, rules: [{when: {}, reply: pong}]}
invariants: [effects-resolved]
limits: {timeout: 10m}
`

// BenchmarkIsolatedReplayKinds is reflect.BenchmarkReplay without the
// sandbox: a run of the load generator's requests is recorded, then an
// isolated re-run of it (unsynced writes, a shadow world, the LLM served
// from the recording) is driven through the real gateway on a unix socket
// by the SDK in this same process. It reports the mean cost of each kind
// of request, client included, and the rate. Each op is one request.
//
//	GOMAXPROCS=1 go test -run '^$' -bench IsolatedReplayKinds -benchtime 8000x ./harness
//
// OVERNIGHT_BENCH_KINDS_PROFILE=FILE writes a CPU profile of the replay alone.
func BenchmarkIsolatedReplayKinds(b *testing.B) {
	ctx := context.Background()
	n := (b.N + 3) / 4 * 4
	state := benchDir(b)
	rec := serveBenchRun(b, state, loadgenScenario, nil, RunRequest{})
	if _, err := rec.sdk.Resume(ctx); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := agents.LoadgenStep(ctx, rec.sdk, i); err != nil {
			b.Fatalf("record request %d: %v", i, err)
		}
	}
	recID, scen := rec.run.rec.ID, rec.run.scen
	rec.stop()

	// An isolated run of the recording, as Harness.Isolated makes it (from
	// the beginning, no faults), served without a container.
	h, err := Open(ctx, Options{StateDir: state})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	parent, err := h.runRecord(recID)
	if err != nil {
		b.Fatal(err)
	}
	seed := parent.Seed
	rr := RunRequest{Scenario: scen, Seed: &seed, Faults: nil, LLM: "replay:" + parent.ID, MaxAttempts: 1,
		isolation: &history.Isolation{Parent: parent.ID, Purpose: "bench", ReplayAttempt: 1}}
	rr.prepare = func(ctx context.Context, id string) ([]history.Entry, error) {
		entries, _, err := h.fork(ctx, parent, id, history.CheckpointRecord{}, nil, 0)
		return entries, err
	}
	id, err := h.create(ctx, rr)
	if err != nil {
		b.Fatal(err)
	}
	r, err := h.load(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	sock, stop, err := serveGateway(r)
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	token, err := r.beginAttempt(ctx, 1, false)
	if err != nil {
		b.Fatal(err)
	}
	c, err := agent.New(agent.Options{Socket: sock, Token: token, RetryFor: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Resume(ctx); err != nil {
		b.Fatal(err)
	}
	if path := os.Getenv("OVERNIGHT_BENCH_KINDS_PROFILE"); path != "" {
		// A CPU profile of the replay alone, without the recording.
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	var per [4]time.Duration
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	for i := 0; i < n; i++ {
		t := time.Now()
		if err := agents.LoadgenStep(ctx, c, i); err != nil {
			b.Fatalf("replay request %d: %v", i, err)
		}
		per[i%4] += time.Since(t)
	}
	total := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	k := float64(n / 4)
	for i, name := range []string{"effect", "checkpoint", "llm", "event"} {
		b.ReportMetric(float64(per[i].Microseconds())/k, name+"-µs")
	}
	b.ReportMetric(float64(n)/total.Seconds(), "requests/s")
	// CPU time (user and system, the whole process: client, gateway,
	// journal) per request: steadier than the wall time on a shared machine.
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/req")
}

// cpuTime is the process's user plus system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
