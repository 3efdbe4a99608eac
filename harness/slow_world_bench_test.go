package harness

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// slowApply is how long the slow world takes to apply a request.
const slowApply = 2 * time.Second

// slowModel is a world whose every request takes slowApply (or until its
// context ends); inFlight counts the requests it is working on.
type slowModel struct{ inFlight *atomic.Int32 }

func (m slowModel) Name() string            { return "slow" }
func (m slowModel) Kinds() []world.KindInfo { return []world.KindInfo{{Name: "slow.wait"}} }

func (m slowModel) Apply(ctx context.Context, req world.Request) (world.Outcome, world.Change, error) {
	m.inFlight.Add(1)
	defer m.inFlight.Add(-1)
	select {
	case <-time.After(slowApply):
	case <-ctx.Done():
		return world.Outcome{}, world.Change{}, ctx.Err()
	}
	out, err := world.Done(map[string]string{"key": req.Key})
	return out, world.Change{}, err
}

func slowWorld(inFlight *atomic.Int32) world.Definition {
	return world.Definition{Name: "slow", Summary: "every request takes 2 s",
		Open: func(context.Context, world.Reader, map[string]any) (world.Model, error) {
			return slowModel{inFlight}, nil
		}}
}

func slowWorlds(inFlight *atomic.Int32) *world.Registry {
	r := DefaultWorlds()
	r.Register(slowWorld(inFlight))
	return r
}

// oneCallAtATime serves h one request at a time, as a world that keeps its
// state behind one lock does (examples/pyworld: reads take the lock too).
func oneCallAtATime(h http.Handler) http.Handler {
	var mu sync.Mutex
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

const slowScenario = `apiVersion: overnight/v1
kind: Scenario
name: slow-world
world: slow
agent: {builtin: deployer}
limits: {horizon: 10d}
invariants: [effects-resolved]
`

// BenchmarkGatewayCallsBesideSlowWorld measures a run's other gateway calls
// — PUT /v1/checkpoint (durable) and GET /v1/clock, by the SDK over the
// unix socket — while one of the run's effects is always in flight on a
// world that takes 2 s to apply it, against the same calls of a run whose
// world is idle, interleaved in one benchmark run. Two kinds of world:
//
//   - in-process: a Go world (harness.Options.Worlds);
//   - served: the same world served over the world protocol (remote.Server
//     on loopback), answering one call at a time, as a world that keeps its
//     state behind one lock does (examples/pyworld).
//
// Each lane is a run in a harness and state dir of its own, each served
// world a server of its own. One goroutine per busy lane sends effects one
// after another; busy-fraction is the share of the timed calls made while
// the world was applying one (sampled before each call).
//
//	go test -run '^$' -bench GatewayCallsBesideSlowWorld -benchtime 300x ./harness
func BenchmarkGatewayCallsBesideSlowWorld(b *testing.B) {
	ctx := context.Background()
	type lane struct {
		name           string
		bs             benchServer
		busy           *atomic.Int32 // the world's requests in flight
		cp, clock      []time.Duration
		inFlight, effs int
	}
	serve := func(inFlight *atomic.Int32) string {
		srv, err := remote.NewServer(ctx, slowWorld(inFlight), world.NewMemStore(), nil)
		if err != nil {
			b.Fatal(err)
		}
		hs := httptest.NewServer(oneCallAtATime(srv))
		b.Cleanup(hs.Close)
		return hs.URL
	}
	newLane := func(name string, served bool) *lane {
		l := &lane{name: name, busy: new(atomic.Int32)}
		req := RunRequest{}
		if served {
			req.World = serve(l.busy)
		}
		l.bs = serveBenchRunWith(b, Options{StateDir: benchDir(b), Worlds: slowWorlds(l.busy)}, slowScenario, req)
		return l
	}
	lanes := []*lane{
		newLane("in-process-busy", false), newLane("in-process-idle", false),
		newLane("served-busy", true), newLane("served-idle", true),
	}
	defer func() {
		for _, l := range lanes {
			l.bs.stop()
		}
	}()

	// One effect always in flight on each busy lane's world.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Value
	for _, l := range []*lane{lanes[0], lanes[2]} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				res, err := l.bs.sdk.EffectWithKey(ctx, fmt.Sprintf("slow-%d", i), "slow.wait", map[string]any{})
				if err != nil || res.Status != "done" {
					failed.Store(fmt.Sprintf("%s: effect %d: %v %+v", l.name, i, err, res))
					return
				}
				l.effs++
			}
		}()
	}
	stopEffects := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopEffects()
	deadline := time.Now().Add(30 * time.Second)
	for lanes[0].busy.Load() == 0 || lanes[2].busy.Load() == 0 {
		if time.Now().After(deadline) {
			b.Fatal("the slow worlds never started an effect")
		}
		time.Sleep(time.Millisecond)
	}

	step := 0
	checkpoint := func(l *lane) time.Duration {
		step++
		start := time.Now()
		_, err := l.bs.sdk.Checkpoint(ctx, step, map[string]int{"step": step})
		took := time.Since(start)
		if err != nil {
			b.Fatalf("%s: checkpoint %d: %v", l.name, step, err)
		}
		return took
	}
	clock := func(l *lane) time.Duration {
		start := time.Now()
		_, err := l.bs.sdk.Now(ctx)
		took := time.Since(start)
		if err != nil {
			b.Fatalf("%s: clock: %v", l.name, err)
		}
		return took
	}
	for range 5 { // connections dialled, each journal's first writes made
		for _, l := range lanes {
			checkpoint(l)
			clock(l)
		}
	}
	for _, l := range lanes {
		l.cp, l.clock = make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, l := range lanes {
			if l.busy.Load() > 0 {
				l.inFlight++
			}
			l.cp = append(l.cp, checkpoint(l))
			l.clock = append(l.clock, clock(l))
		}
	}
	b.StopTimer()
	stopEffects()
	if f := failed.Load(); f != nil {
		b.Fatal(f)
	}

	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for _, l := range lanes {
		for _, c := range []struct {
			call string
			lat  []time.Duration
		}{{"checkpoint", l.cp}, {"clock", l.clock}} {
			p50, p99 := percentiles(c.lat)
			b.ReportMetric(ms(p50), l.name+"-"+c.call+"-p50-ms")
			b.ReportMetric(ms(p99), l.name+"-"+c.call+"-p99-ms")
		}
	}
	for k := 0; k < len(lanes); k += 2 {
		busy, idle := lanes[k], lanes[k+1]
		kind := busy.name[:len(busy.name)-len("-busy")]
		for _, c := range []struct {
			call       string
			busy, idle []time.Duration
		}{{"checkpoint", busy.cp, idle.cp}, {"clock", busy.clock, idle.clock}} {
			b50, _ := percentiles(c.busy)
			i50, _ := percentiles(c.idle)
			b.ReportMetric(float64(b50)/float64(i50), kind+"-"+c.call+"-busy/idle-p50-x")
		}
		b.ReportMetric(float64(busy.inFlight)/float64(b.N), kind+"-busy-fraction")
		b.ReportMetric(float64(busy.effs), kind+"-slow-effects")
	}
}
