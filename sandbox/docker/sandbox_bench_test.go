package docker_test

import (
	"github.com/overnight-dev/overnight/sandbox/docker"

	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/overnight-dev/overnight/sandbox"
)

// benchEnv is built once per test binary (the benchmark function runs more than once) and torn
// down by TestMain.
var benchEnv struct {
	once     sync.Once
	err      error
	cli      *client.Client
	e        *docker.Engine
	image    string
	initBin  string
	tmp      string
	sockDir  string
	cleanups []func() error
	arrivals sync.Map // request path -> chan time.Time
}

func benchSetup() error {
	benchEnv.once.Do(func() {
		ctx := context.Background()
		b := &benchEnv
		b.cli, b.err = docker.Connect(ctx)
		if b.err != nil {
			return
		}
		b.cleanups = append(b.cleanups, b.cli.Close)
		nonce := "bench-" + randomID()
		if b.tmp, b.err = os.MkdirTemp("", "ovn-bench-"); b.err != nil {
			return
		}
		b.cleanups = append(b.cleanups, func() error { return os.RemoveAll(b.tmp) })
		bin, err := buildTestInit(ctx, b.tmp, nonce)
		if b.err = err; err != nil {
			return
		}
		b.initBin = bin
		b.e = docker.New(b.cli, docker.Options{StateHash: nonce})
		if b.image, b.err = b.e.EnsureImage(ctx, docker.ImageSpec{InitBinary: bin}); b.err != nil {
			return
		}
		b.cleanups = append(b.cleanups, func() error { return b.e.RemoveImage(context.Background(), b.image) })

		dir, cleanup, err := sandbox.NewSocketDir()
		if b.err = err; err != nil {
			return
		}
		b.sockDir = dir
		b.cleanups = append(b.cleanups, cleanup)
		ln, err := sandbox.ListenSocket(filepath.Join(dir, sandbox.SocketName))
		if b.err = err; err != nil {
			return
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			now := time.Now() // first thing: this is the moment the request arrived
			if ch, ok := b.arrivals.Load(r.URL.Path); ok {
				ch.(chan time.Time) <- now
			}
			_, _ = w.Write([]byte(`{}`))
		})}
		go func() { _ = srv.Serve(ln) }()
		b.cleanups = append(b.cleanups, srv.Close)
	})
	return benchEnv.err
}

// benchTeardown undoes benchSetup, if it ran.
func benchTeardown() {
	var errs []error
	for i := len(benchEnv.cleanups) - 1; i >= 0; i-- {
		errs = append(errs, benchEnv.cleanups[i]())
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, "benchmark teardown:", err)
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1)*p + 0.5)
	return sorted[i]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkColdStart measures, per sandbox, the time from the Create call to the moment the
// host-side gateway receives the agent's first HTTP request (through the init's relay). The
// image is built beforehand; removing the container is outside the measurement.
//
//	go test -run '^$' -bench ColdStart -benchtime 20x ./sandbox
func BenchmarkColdStart(b *testing.B) {
	coldStart(b, func(run, path string) docker.ContainerSpec {
		return docker.ContainerSpec{
			RunID: run, Attempt: 1, Image: benchEnv.image,
			Cmd: []string{sandbox.InitPath, "gateway-call", path},
		}
	})
}

// PythonImage is the Debian image with Python that `make python-image`
// (sandbox/agent/python/debian-image.sh) makes.
const PythonImage = "overnight-test/debian-python:bookworm"

// BenchmarkColdStartPython is BenchmarkColdStart for an agent's own image:
// Debian bookworm with Python (PythonImage), run as the harness runs an
// image — unchanged, with the init bind-mounted at /overnight — where
// python3 starts and makes its first request with urllib.
//
//	make python-image && go test -run '^$' -bench ColdStartPython -benchtime 20x ./sandbox
func BenchmarkColdStartPython(b *testing.B) {
	if err := benchSetup(); err != nil {
		b.Fatal(err)
	}
	cfg, err := benchEnv.e.InspectAgentImage(context.Background(), PythonImage)
	if err != nil {
		b.Fatalf("%v (make it with `make python-image`)", err)
	}
	coldStart(b, func(run, path string) docker.ContainerSpec {
		return docker.ContainerSpec{
			RunID: run, Attempt: 1, Image: cfg.ID,
			Entrypoint: []string{sandbox.InitPath, "init", "--"}, InitBinary: benchEnv.initBin,
			Cmd: []string{"python3", "-c", "import os, urllib.request; urllib.request.urlopen(os.environ['OVERNIGHT_URL'] + '" + path + "').read()"},
		}
	})
}

// coldStart runs b.N sandboxes made by specFor and reports the time from
// Create to the agent's first request at the gateway.
func coldStart(b *testing.B, specFor func(run, path string) docker.ContainerSpec) {
	if err := benchSetup(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	e := benchEnv.e
	var total, creates, starts []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		run := fmt.Sprintf("bench-%s-%d", randomID(), i)
		path := "/first/" + run
		arrived := make(chan time.Time, 1)
		benchEnv.arrivals.Store(path, arrived)
		spec := specFor(run, path)
		spec.Env = map[string]string{"OVERNIGHT_URL": sandbox.RelayURL, "OVERNIGHT_SOCKET": sandbox.GatewaySocket}
		spec.SocketDir = benchEnv.sockDir
		spec.Labels = map[string]string{"overnight.test.bench": "true"}
		b.StartTimer()

		began := time.Now()
		sb, err := e.Create(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		created := time.Now()
		if err := e.Start(ctx, sb.ID); err != nil {
			_ = e.Remove(ctx, sb.ID)
			b.Fatal(err)
		}
		started := time.Now()
		var at time.Time
		select {
		case at = <-arrived:
		case <-time.After(30 * time.Second):
			out, errOut, _ := e.Logs(ctx, sb.ID)
			_ = e.Remove(ctx, sb.ID)
			b.Fatalf("no gateway call from sandbox %s within 30s: %s %s", sb.Name, out, errOut)
		}

		b.StopTimer()
		total = append(total, at.Sub(began))
		creates = append(creates, created.Sub(began))
		starts = append(starts, started.Sub(created))
		benchEnv.arrivals.Delete(path)
		if err := e.Remove(ctx, sb.ID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	for _, s := range [][]time.Duration{total, creates, starts} {
		slices.Sort(s)
	}
	b.ReportMetric(ms(percentile(total, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(total, 0.99)), "p99-ms")
	b.ReportMetric(ms(percentile(creates, 0.50)), "create-p50-ms")
	b.ReportMetric(ms(percentile(starts, 0.50)), "start-p50-ms")
}
