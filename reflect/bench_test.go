package reflect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/reflect"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/agents"
	"github.com/overnight-dev/overnight/scenarios/builtin"
)

// benchHarness opens a harness with the reflection loop on a fresh state
// dir, with an init binary of its own.
func benchHarness(b *testing.B) *harness.Harness {
	b.Helper()
	return benchHarnessWith(b, harness.StandbyAuto, reflect.Options{Lessons: reflect.LessonsNone})
}

// benchHarnessWith is benchHarness with the harness's standby policy and
// the reflection loop's options.
func benchHarnessWith(b *testing.B, policy harness.StandbyPolicy, opts reflect.Options) *harness.Harness {
	b.Helper()
	ctx := context.Background()
	dir := b.TempDir()
	bin := filepath.Join(dir, "overnight-sandbox")
	if err := harnesstest.Build(ctx, "./cmd/overnight-sandbox", bin, fmt.Sprintf("reflect-bench-%d", time.Now().UnixNano())); err != nil {
		b.Fatal(err)
	}
	api, err := docker.Connect(ctx)
	if err != nil {
		b.Fatal(err)
	}
	ext, err := reflect.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	h, err := harness.Open(ctx, harness.Options{StateDir: state, InitBinary: bin, Sandbox: docker.Using(api), Extension: ext, BuiltinAgents: agents.Names(), Standby: policy})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = h.Close()
		if left := harnesstest.Leftovers(context.Background(), api, state); len(left) > 0 {
			b.Errorf("left behind in state dir %s: %v", state, left)
		}
		eng := docker.New(api, docker.Options{})
		if ref, err := eng.ImageRef(context.Background(), docker.ImageSpec{InitBinary: bin}); err == nil {
			_ = eng.RemoveImage(context.Background(), ref)
		}
	})
	return h
}

func p50(xs []time.Duration) time.Duration {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// BenchmarkFailureToDecision measures deploy-v2's reflection, from the
// failure (the world's refusal) to the decision (the lesson verified):
// three replays and the counterfactual side by side, then the
// verification, each an isolated run in a container of its own. It also
// reports how much of that is waiting for containers to start (create to
// the agent's first request) on the way: the slowest of the four side by
// side, then the verification's.
//
// "cold" is a run in a fresh process, as `overnight run deploy-v2` is: every
// sandbox gets a network namespace of its own. "warm" is the same in a
// harness that keeps warm namespaces ready (harness.WarmSandboxes), as a
// suite's or any long-lived harness's are: before each run it waits until
// five are idle, one per sandbox the reflection starts and one for the run.
//
// Both start the run's next attempt's sandbox ahead (a standby: the
// run has reflection, harness.StandbyAuto), and the sandboxes of the
// reflection's isolated runs (harness.StandbyIsolated) as the run begins
// (it has a fault schedule). "cold-at-failure" reserves those as the
// reflection opens instead (reflect.Options.IsolatedAtFailure): the
// replays' and the counterfactual's at once, the verification's once
// those have started.
// "cold-no-isolated-standby" is "cold" with the isolated runs started cold
// (reflect.Options.ColdIsolated: the run's standby alone), and
// "cold-no-standby" without any standby (harness.StandbyOff), for the
// comparison; "cold-floor" is the engine's share alone
// (isolatedStartsFloor). OVERNIGHT_BENCH_TIMELINE=1 logs when each
// isolated run began, made its first request and ended, from the
// reflection's opening.
//
//	go test -run '^$' -bench FailureToDecision -benchtime 10x ./reflect
func BenchmarkFailureToDecision(b *testing.B) {
	opts := reflect.Options{Lessons: reflect.LessonsNone}
	coldIsolated := opts
	coldIsolated.ColdIsolated = true
	atFailure := opts
	atFailure.IsolatedAtFailure = true
	b.Run("cold", func(b *testing.B) { failureToDecision(b, 0, harness.StandbyAuto, opts) })
	b.Run("cold-at-failure", func(b *testing.B) { failureToDecision(b, 0, harness.StandbyAuto, atFailure) })
	b.Run("cold-no-isolated-standby", func(b *testing.B) { failureToDecision(b, 0, harness.StandbyAuto, coldIsolated) })
	b.Run("cold-no-standby", func(b *testing.B) { failureToDecision(b, 0, harness.StandbyOff, opts) })
	b.Run("warm", func(b *testing.B) { failureToDecision(b, 5, harness.StandbyAuto, opts) })
	b.Run("cold-floor", isolatedStartsFloor)
}

// isolatedStartsFloor is the floor under "cold": the engine starting the
// sandboxes of a reflection's isolated runs — one alone (the
// verification's), four at once (three replays and the counterfactual, as
// a reflection's standbys start) and five at once (all of them together) —
// from the reservation to every start returned, with nothing else at work
// in the harness. The agent's own start in the sandbox (init woken, first
// request) is not in it.
func isolatedStartsFloor(b *testing.B) {
	h := benchHarness(b)
	ctx := context.Background()
	raw, _ := builtin.Lookup("deploy")
	scen, err := scenarios.Parse("builtin:deploy", raw)
	if err != nil {
		b.Fatal(err)
	}
	parent, err := h.Run(ctx, harness.RunRequest{Scenario: scen})
	if err != nil {
		b.Fatal(err)
	}
	starts := map[int][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, n := range []int{1, 4, 5} {
			t0 := time.Now()
			sbs, err := h.StandbyIsolated(ctx, parent.RunID, n)
			if err != nil || len(sbs) != n {
				b.Fatalf("reserve %d: %d %v", n, len(sbs), err)
			}
			for _, s := range sbs {
				if err := s.Started(ctx); err != nil {
					b.Fatal(err)
				}
			}
			starts[n] = append(starts[n], time.Since(t0))
			b.StopTimer()
			for _, s := range sbs {
				if err := s.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(p50(starts[1]).Milliseconds()), "one-start-p50-ms")
	b.ReportMetric(float64(p50(starts[4]).Milliseconds()), "four-starts-p50-ms")
	b.ReportMetric(float64(p50(starts[5]).Milliseconds()), "five-starts-p50-ms")
}

func failureToDecision(b *testing.B, warm int, policy harness.StandbyPolicy, opts reflect.Options) {
	h := benchHarnessWith(b, policy, opts)
	ctx := context.Background()
	raw, _ := builtin.Lookup("deploy-v2")
	scen, err := scenarios.Parse("builtin:deploy-v2", raw)
	if err != nil {
		b.Fatal(err)
	}
	var decisions, waits, walls []time.Duration
	start := func(id string) time.Duration {
		atts, err := h.History().Attempts(id)
		if err != nil || len(atts) == 0 {
			b.Fatalf("isolated run %s: %v", id, err)
		}
		return atts[0].FirstResumedAt.Sub(atts[0].StartedAt)
	}
	ready := func() {
		if warm == 0 {
			return
		}
		h.WarmSandboxes(ctx, warm)
		deadline := time.Now().Add(time.Minute)
		for h.WarmReady() < warm {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d warm namespaces ready after a minute", h.WarmReady(), warm)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ready()
		b.StartTimer()
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, Extras: map[string]string{reflect.ExtraLessons: reflect.LessonsNone}})
		if err != nil || res.Verdict != harness.VerdictPass || len(res.Reflections) != 1 {
			b.Fatalf("run %d: %v %+v", i, err, res)
		}
		refls, err := h.History().Reflections(res.RunID)
		if err != nil {
			b.Fatal(err)
		}
		r := refls[0]
		decisions = append(decisions, r.DecidedAt.Sub(r.OpenedAt))
		walls = append(walls, time.Duration(res.WallMS)*time.Millisecond)
		// On the way to the decision: the slowest container start of the
		// replays and the counterfactual (side by side), then the
		// verification's.
		var first time.Duration
		for _, id := range append([]string{r.Counterfactual.RunID}, replayIDs(r)...) {
			first = max(first, start(id))
		}
		waits = append(waits, first+start(r.Verification.RunID))
		if os.Getenv("OVERNIGHT_BENCH_TIMELINE") != "" {
			// Where the decision's time went, from the reflection's opening.
			for _, id := range append(append([]string{r.Counterfactual.RunID}, replayIDs(r)...), r.Verification.RunID) {
				atts, _ := h.History().Attempts(id)
				a := atts[0]
				b.Logf("%s standby=%v begin=%v resumed=%v ended=%v", id, a.Standby, a.StartedAt.Sub(r.OpenedAt).Milliseconds(),
					a.FirstResumedAt.Sub(r.OpenedAt).Milliseconds(), a.EndedAt.Sub(r.OpenedAt).Milliseconds())
			}
			rec, _ := h.History().Run(res.RunID)
			b.Logf("decided=%v opened=%v after the run began, run=%vms", r.DecidedAt.Sub(r.OpenedAt).Milliseconds(), r.OpenedAt.Sub(rec.StartedAt).Milliseconds(), res.WallMS)
		}
	}
	b.StopTimer()
	d, w := p50(decisions), p50(waits)
	b.ReportMetric(float64(d.Milliseconds()), "decision-p50-ms")
	b.ReportMetric(float64(w.Milliseconds()), "container-starts-p50-ms")
	b.ReportMetric(float64(w)/float64(d), "start-share")
	// The whole run, its start to its verdict: what starting sandboxes
	// before the failure (reflect's reserveAhead) costs the run shows here.
	b.ReportMetric(float64(p50(walls).Milliseconds()), "run-p50-ms")
}

// BenchmarkReplay measures how fast an isolated re-run replays a recorded
// run of 10,000 gateway requests — a quarter each effects, checkpoints,
// LLM calls (answered from the recording) and events — timed inside the
// sandbox, so container start is excluded.
//
//	go test -run '^$' -bench Replay -benchtime 3x ./reflect
func BenchmarkReplay(b *testing.B) {
	const requests = 10000
	h := benchHarness(b)
	ctx := context.Background()
	text := fmt.Sprintf(`apiVersion: overnight/v1
kind: Scenario
name: loadgen
world: cloud
agent: {builtin: loadgen, args: [--requests, "%d"]}
task: {dns: h0.example.com, service: {name: api}}
llm: {model: scripted, rules: [{when: {}, reply: pong}]}
invariants: [effects-resolved]
limits: {timeout: 10m}
`, requests)
	file := filepath.Join(b.TempDir(), "loadgen.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	scen, err := scenarios.Load(file)
	if err != nil {
		b.Fatal(err)
	}
	rec, err := h.Run(ctx, harness.RunRequest{Scenario: scen})
	if err != nil || rec.Verdict == harness.VerdictUnknown {
		b.Fatalf("record: %v %+v", err, rec)
	}
	recorded := elapsed(b, h, rec.RunID)
	var rates []float64
	if path := os.Getenv("OVERNIGHT_BENCH_REPLAY_PROFILE"); path != "" {
		// A CPU profile of the replays alone, without the recording.
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := h.Isolated(ctx, harness.IsolatedRequest{Parent: rec.RunID, LLM: "replay:" + rec.RunID, ReplayAttempt: 1, Purpose: "bench"})
		if err != nil || res.Verdict == harness.VerdictUnknown {
			b.Fatalf("replay: %v %+v", err, res)
		}
		rates = append(rates, float64(requests)/elapsed(b, h, res.RunID).Seconds())
	}
	b.StopTimer()
	slices.Sort(rates)
	b.ReportMetric(rates[len(rates)/2], "replayed-requests/s")
	b.ReportMetric(float64(requests)/recorded.Seconds(), "recorded-requests/s")
}

// elapsed is what the load generator reported for its requests.
func elapsed(b *testing.B, h *harness.Harness, runID string) time.Duration {
	b.Helper()
	events, err := h.History().Events(runID)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range events {
		if e.Type == "loadgen" {
			var d struct {
				ElapsedMS int64 `json:"elapsed_ms"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				b.Fatal(err)
			}
			return time.Duration(d.ElapsedMS) * time.Millisecond
		}
	}
	b.Fatalf("run %s has no loadgen event", runID)
	return 0
}
