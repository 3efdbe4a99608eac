package suite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/suite"
	"github.com/overnight-dev/overnight/reflect"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/scenarios/agents"
)

// BenchmarkSuiteDeploy runs a suite of the built-in deploy scenario × 40
// seeds (OVERNIGHT_BENCH_SEEDS to change it) at each --parallel of
// OVERNIGHT_BENCH_PARALLEL (default 1,2,4,8,16,32), in one process against
// one state dir, as `overnight suite` does, and reports the wall time, the
// runs per minute, and the runs that did not pass (a well-behaved agent
// with no faults: each one is a failure of the harness itself).
//
// Beside each suite, at the same parallelism and on the same image, it runs
// the floor (rawLoop: `docker run --rm --network none` × the same count,
// through the Engine API client) once before the suite and once after, and
// reports the floor's wall time (the mean of the two), its runs per minute,
// and the ratio of the suite's wall time to it. It counts the standby
// sandboxes the suite started, which must be none: a plain run's one
// attempt would leave them unused (harness.StandbyAuto).
//
//	go test -run '^$' -bench SuiteDeploy -benchtime 1x -timeout 60m ./harness/suite
func BenchmarkSuiteDeploy(b *testing.B) {
	seeds := 40
	if s := os.Getenv("OVERNIGHT_BENCH_SEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	pars := []int{1, 2, 4, 8, 16, 32}
	if s := os.Getenv("OVERNIGHT_BENCH_PARALLEL"); s != "" {
		pars = nil
		for _, f := range strings.Split(s, ",") {
			n, _ := strconv.Atoi(f)
			pars = append(pars, n)
		}
	}
	ctx := context.Background()
	dir := b.TempDir()
	bin := filepath.Join(dir, "overnight-sandbox")
	if err := harnesstest.Build(ctx, "./cmd/overnight-sandbox", bin, fmt.Sprintf("suite-bench-%d", time.Now().UnixNano())); err != nil {
		b.Fatal(err)
	}
	api, err := docker.Connect(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		eng := docker.New(api, docker.Options{})
		if ref, err := eng.ImageRef(context.Background(), docker.ImageSpec{InitBinary: bin}); err == nil {
			_ = eng.RemoveImage(context.Background(), ref)
		}
	})
	// The floor's containers are labelled for a state dir of their own.
	rawState := filepath.Join(dir, "raw")
	b.Cleanup(func() {
		if left := harnesstest.Leftovers(context.Background(), api, rawState); len(left) > 0 {
			b.Errorf("the raw loop left behind: %v", left)
		}
	})
	image, err := docker.New(api, docker.Options{StateHash: sandbox.StateHash(rawState)}).EnsureImage(ctx, docker.ImageSpec{InitBinary: bin})
	if err != nil {
		b.Fatal(err)
	}
	for _, par := range pars {
		b.Run(fmt.Sprintf("parallel-%d", par), func(b *testing.B) {
			ext, err := reflect.New(reflect.Options{})
			if err != nil {
				b.Fatal(err)
			}
			state := filepath.Join(b.TempDir(), "state")
			counted := &standbyCount{API: api}
			h, err := harness.Open(ctx, harness.Options{StateDir: state, InitBinary: bin, Sandbox: docker.Using(counted), Extension: ext, BuiltinAgents: agents.Names()})
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				_ = h.Close()
				if left := harnesstest.Leftovers(context.Background(), api, state); len(left) > 0 {
					b.Errorf("left behind: %v", left)
				}
			}()
			var ss []int64
			for s := 1; s <= seeds; s++ {
				ss = append(ss, int64(s))
			}
			plan, err := suite.Build(suite.Spec{Scenarios: []string{"deploy"}, Seeds: ss,
				Config: suite.Config{Extras: map[string]string{reflect.ExtraLessons: reflect.LessonsNone}}}, resolve)
			if err != nil {
				b.Fatal(err)
			}
			if path := os.Getenv("OVERNIGHT_BENCH_SUITE_PROFILE"); path != "" {
				f, err := os.Create(fmt.Sprintf("%s.%d", path, par))
				if err != nil {
					b.Fatal(err)
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					b.Fatal(err)
				}
				defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
			}
			var wall, rawWall time.Duration
			var notPass int
			var cpu cpuTimes
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				before, err := rawLoop(ctx, api, image, rawState, seeds, par)
				if err != nil {
					b.Fatal(err)
				}
				cpu0 := readCPU()
				start := time.Now()
				res, err := suite.Run(ctx, h, plan, suite.Options{Parallel: par})
				wall += time.Since(start)
				cpu = cpu.plus(readCPU().minus(cpu0))
				if err != nil {
					b.Fatal(err)
				}
				after, err := rawLoop(ctx, api, image, rawState, seeds, par)
				if err != nil {
					b.Fatal(err)
				}
				rawWall += (before + after) / 2
				for _, r := range res.Failed() {
					notPass++
					b.Logf("parallel %d: %s/%s seed %d: %s %s", par, r.Scenario, r.Agent, r.Seed, r.Verdict, r.Reason)
				}
			}
			b.StopTimer()
			runs := float64(seeds * b.N)
			b.ReportMetric(cpu.harness/runs, "harness-cpu-ms/run")
			b.ReportMetric(cpu.dockerd/runs, "dockerd-cpu-ms/run")
			b.ReportMetric(cpu.containerd/runs, "containerd-cpu-ms/run")
			b.ReportMetric((cpu.total-cpu.harness-cpu.dockerd-cpu.containerd)/runs, "other-cpu-ms/run")
			per := wall / time.Duration(b.N)
			b.ReportMetric(per.Seconds(), "wall-s")
			b.ReportMetric(float64(seeds)/per.Minutes(), "runs/min")
			b.ReportMetric(float64(notPass)/float64(b.N), "not-passed")
			raw := rawWall / time.Duration(b.N)
			b.ReportMetric(raw.Seconds(), "raw-wall-s")
			b.ReportMetric(float64(seeds)/raw.Minutes(), "raw-runs/min")
			b.ReportMetric(wall.Seconds()/rawWall.Seconds(), "suite/raw")
			b.ReportMetric(float64(counted.n.Load())/float64(b.N), "standbys")
			if n := counted.n.Load(); n > 0 {
				b.Errorf("parallel %d: the suite's plain runs started %d standby sandboxes; StandbyAuto starts none for them", par, n)
			}
		})
	}
}

// cpuTimes are CPU milliseconds: the whole machine's busy time (from
// /proc/stat), this process's (the harness), and the Docker daemons'. What
// is left of the machine's is the short-lived processes of each sandbox —
// containerd shims, runc, fuse-overlayfs, the init and the agent — and
// whatever else the machine ran meanwhile (run it on a quiet machine).
type cpuTimes struct{ total, harness, dockerd, containerd float64 }

func (a cpuTimes) minus(b cpuTimes) cpuTimes {
	return cpuTimes{a.total - b.total, a.harness - b.harness, a.dockerd - b.dockerd, a.containerd - b.containerd}
}

func (a cpuTimes) plus(b cpuTimes) cpuTimes {
	return cpuTimes{a.total + b.total, a.harness + b.harness, a.dockerd + b.dockerd, a.containerd + b.containerd}
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on Linux.
const clockTicks = 100

func readCPU() cpuTimes {
	var c cpuTimes
	if data, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(data), "\n")
		f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
		for i, v := range f[1:] {
			if i == 3 || i == 4 { // idle, iowait
				continue
			}
			n, _ := strconv.ParseFloat(v, 64)
			c.total += n * 1000 / clockTicks
		}
	}
	c.harness = procCPU("self")
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil {
			continue
		}
		switch strings.TrimSpace(string(comm)) {
		case "dockerd":
			c.dockerd += procCPU(e.Name())
		case "containerd":
			c.containerd += procCPU(e.Name())
		}
	}
	return c
}

// procCPU is a process's user and system CPU milliseconds.
func procCPU(pid string) float64 {
	data, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0
	}
	_, rest, _ := strings.Cut(string(data), ") ") // past "pid (comm) "
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64) // utime: field 14 of stat
	s, _ := strconv.ParseFloat(f[12], 64) // stime: field 15
	return (u + s) * 1000 / clockTicks
}
