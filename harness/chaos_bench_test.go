package harness_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/builtin"
)

// benchHarness builds the overnight binary and opens a harness on a fresh
// state dir against the real engine; cleanup removes what it made.
func benchHarness(b *testing.B) (*harness.Harness, func()) {
	b.Helper()
	h, _, done := benchHarnessBin(b)
	return h, done
}

// benchHarnessBin is benchHarness that also returns the overnight binary.
func benchHarnessBin(b *testing.B) (*harness.Harness, string, func()) {
	b.Helper()
	bin, dir, done := benchBinary(b)
	h, closeH := openBenchHarness(b, bin, filepath.Join(dir, "state"), harness.Options{})
	return h, bin, func() {
		closeH()
		done()
	}
}

// benchBinary builds the sandbox binary (overnight-sandbox, what the CLI
// injects) into a temporary dir; done
// removes its sandbox image and the dir.
func benchBinary(b *testing.B) (bin, dir string, done func()) {
	b.Helper()
	ctx := context.Background()
	dir = b.TempDir()
	bin = filepath.Join(dir, "overnight-sandbox")
	if err := harnesstest.Build(ctx, "./cmd/overnight-sandbox", bin, fmt.Sprintf("bench-%d", time.Now().UnixNano())); err != nil {
		b.Fatal(err)
	}
	return bin, dir, func() {
		if api, err := docker.Connect(ctx); err == nil {
			eng := docker.New(api, docker.Options{})
			if ref, err := eng.ImageRef(ctx, docker.ImageSpec{InitBinary: bin}); err == nil {
				_ = eng.RemoveImage(ctx, ref)
			}
		}
		_ = os.RemoveAll(dir)
	}
}

// openBenchHarness opens a harness of bin on the state dir against the
// real engine (opts besides); closeH closes it and removes what it left.
func openBenchHarness(b *testing.B, bin, state string, opts harness.Options) (*harness.Harness, func()) {
	b.Helper()
	ctx := context.Background()
	api, err := docker.Connect(ctx)
	if err != nil {
		b.Fatal(err)
	}
	opts.StateDir, opts.InitBinary, opts.Sandbox = state, bin, docker.Using(api)
	h, err := harness.Open(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	return h, func() {
		_ = h.Close()
		harnesstest.Leftovers(ctx, api, state)
	}
}

func builtinScenario(b *testing.B, name string) *scenarios.Scenario {
	raw, ok := builtin.Lookup(name)
	if !ok {
		b.Fatalf("no built-in scenario %s", name)
	}
	s, err := scenarios.Parse("builtin:"+name, raw)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkWeek measures the wall time of `overnight run week --seed 42`:
// 7 virtual days with 3 restarts, 2 outages and an API change.
//
//	go test -run '^$' -bench Week -benchtime 3x ./harness
func BenchmarkWeek(b *testing.B) { benchScenarioWall(b, "week") }

// BenchmarkLogoptWeek measures the wall time of `overnight run
// logopt-week --seed 42`: a week optimising the fleet's logging with 3
// restarts, 2 outages and a dependency update; beside BenchmarkWeek in
// one run:
//
//	go test -run '^$' -bench 'Week' -benchtime 3x ./harness
func BenchmarkLogoptWeek(b *testing.B) { benchScenarioWall(b, "logopt-week") }

// benchScenarioWall runs the built-in scenario name with seed 42 b.N
// times and reports its wall time p50 and virtual/wall compression.
func benchScenarioWall(b *testing.B, name string) {
	h, done := benchHarness(b)
	defer done()
	ctx := context.Background()
	seed := int64(42)
	// Warm up: the sandbox image is built once per binary.
	if _, err := h.Run(ctx, harness.RunRequest{Scenario: builtinScenario(b, "deploy")}); err != nil {
		b.Fatal(err)
	}
	var walls []time.Duration
	var virtual time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, err := h.Run(ctx, harness.RunRequest{Scenario: builtinScenario(b, name), Seed: &seed})
		walls = append(walls, time.Since(start))
		if err != nil || res.Verdict != harness.VerdictPass {
			b.Fatalf("%s: %v %+v", name, err, res)
		}
		virtual = time.Duration(res.VirtualMS) * time.Millisecond
	}
	b.StopTimer()
	sort.Slice(walls, func(i, j int) bool { return walls[i] < walls[j] })
	p50 := walls[len(walls)/2]
	b.ReportMetric(float64(p50.Milliseconds()), "wall-p50-ms")
	b.ReportMetric(float64(virtual)/float64(p50), "compression-x")
}

// BenchmarkKillRecovery measures, over every kill of a week with a kill
// every 8 virtual hours (about 20 kills a run): the time from the fault's
// SIGKILL to the container seen dead, and from then to the new attempt's
// first checkpoint read — starting every attempt cold (StandbyOff), with
// one standby ahead, and with as many as the schedule gets by default
// (StandbyAuto: two ahead for a recurring kill), one run of each in turn
// per iteration, each on a harness of its own, so that all see the same
// minutes of the machine. The dead → resumed time is broken down into the
// harness's own share (the attempt's end, the next one's journal entry:
// dead → started), the wait for its sandbox (a standby's start still under
// way, or a cold start: started → handed over), and the floor no harness
// change removes (the init's wake, the agent's start, its first two
// gateway calls: handed over → resumed).
//
//	go test -run '^$' -bench KillRecovery -benchtime 3x ./harness
func BenchmarkKillRecovery(b *testing.B) {
	bin, dir, done := benchBinary(b)
	defer done()
	ctx := context.Background()
	spec, err := chaos.ParseSpec("kill@every:8h")
	if err != nil {
		b.Fatal(err)
	}
	type side struct {
		name                            string
		opts                            harness.Options
		h                               *harness.Harness
		toDead, toResume                []time.Duration
		toStart, toHandover, toFirstRun []time.Duration
	}
	sides := []*side{
		{name: "cold", opts: harness.Options{Standby: harness.StandbyOff}},
		{name: "standby1", opts: harness.WithStandbysAhead(harness.Options{Standby: harness.StandbyAuto}, 1)},
		{name: "standby", opts: harness.Options{Standby: harness.StandbyAuto}},
	}
	for _, s := range sides {
		h, closeH := openBenchHarness(b, bin, filepath.Join(dir, s.name), s.opts)
		defer closeH()
		s.h = h
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, s := range sides {
			res, err := s.h.Run(ctx, harness.RunRequest{Scenario: builtinScenario(b, "week"), Faults: []chaos.Spec{spec}, MaxAttempts: 100})
			if err != nil {
				b.Fatal(err)
			}
			atts, err := s.h.Attempts(res.RunID)
			if err != nil {
				b.Fatal(err)
			}
			for j, a := range atts {
				if a.KillIssuedAt.IsZero() || a.ExitedAt.IsZero() {
					continue
				}
				s.toDead = append(s.toDead, a.ExitedAt.Sub(a.KillIssuedAt))
				if j+1 < len(atts) && !atts[j+1].FirstResumedAt.IsZero() {
					next := atts[j+1]
					if s.name != "cold" && !next.Standby {
						b.Fatalf("attempt %d of run %s started cold", next.N, res.RunID)
					}
					s.toResume = append(s.toResume, next.FirstResumedAt.Sub(a.ExitedAt))
					s.toStart = append(s.toStart, next.StartedAt.Sub(a.ExitedAt))
					s.toHandover = append(s.toHandover, next.HandedOverAt.Sub(next.StartedAt))
					s.toFirstRun = append(s.toFirstRun, next.FirstResumedAt.Sub(next.HandedOverAt))
				}
			}
		}
	}
	b.StopTimer()
	p50 := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for _, s := range sides {
		if len(s.toResume) < 20 {
			b.Fatalf("%s: only %d recoveries measured; want at least 20", s.name, len(s.toResume))
		}
		b.ReportMetric(float64(len(s.toDead)), s.name+"-kills")
		b.ReportMetric(ms(p50(s.toDead)), s.name+"-kill-to-dead-p50-ms")
		b.ReportMetric(ms(p50(s.toResume)), s.name+"-dead-to-resumed-p50-ms")
		b.ReportMetric(ms(p50(s.toStart)), s.name+"-dead-to-started-p50-ms")
		b.ReportMetric(ms(p50(s.toHandover)), s.name+"-started-to-handed-p50-ms")
		b.ReportMetric(ms(p50(s.toFirstRun)), s.name+"-handed-to-resumed-p50-ms")
	}
}
