package docker_test

import (
	"github.com/overnight-dev/overnight/sandbox/docker"

	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox"
)

// newEngine returns an Engine over the real engine with a state identity of its own.
func newEngine(opts ...func(*docker.Options)) *docker.Engine {
	o := docker.Options{StateHash: sandbox.StateHash(filepath.Join(GinkgoT().TempDir(), "state"))}
	for _, f := range opts {
		f(&o)
	}
	return docker.New(api, o)
}

// nextRun returns a run id no other test (or suite run) uses.
func nextRun() string { return fmt.Sprintf("t%s-%d", suiteID, runSeq.Add(1)) }

// agentSpec is a sandbox of a fresh run running the testinit mode given as cmd.
func agentSpec(cmd ...string) docker.ContainerSpec {
	return docker.ContainerSpec{
		RunID:   nextRun(),
		Attempt: 1,
		Image:   image,
		Cmd:     append([]string{sandbox.InitPath}, cmd...),
		Env: map[string]string{
			"OVERNIGHT_URL":    sandbox.RelayURL,
			"OVERNIGHT_SOCKET": sandbox.GatewaySocket,
		},
		Labels: map[string]string{labelSuite: suiteID},
	}
}

// volumesCleaned are the workspace volumes whose removal is registered already.
var volumesCleaned = map[string]bool{}

// create creates spec's sandbox, removing it (and its workspace volume) when the spec ends,
// even if it fails.
func create(ctx context.Context, e *docker.Engine, spec docker.ContainerSpec) *docker.Container {
	// The first registration runs last, after every container that mounts the volume is gone.
	if spec.Workspace != "" && !volumesCleaned[spec.Workspace] {
		volumesCleaned[spec.Workspace] = true
		DeferCleanup(func(ctx context.Context) { Expect(e.RemoveVolume(ctx, spec.Workspace)).To(Succeed()) })
	}
	name := docker.ContainerName(spec.RunID, spec.Attempt)
	DeferCleanup(func(ctx context.Context) { Expect(e.Remove(ctx, name)).To(Succeed()) })
	sb, err := e.Create(ctx, spec)
	Expect(err).NotTo(HaveOccurred())
	return sb
}

// start creates and starts spec's sandbox.
func start(ctx context.Context, e *docker.Engine, spec docker.ContainerSpec) *docker.Container {
	sb := create(ctx, e, spec)
	Expect(e.Start(ctx, sb.ID)).To(Succeed())
	return sb
}

// runToEnd runs spec's sandbox to its end and returns its exit code and output.
func runToEnd(ctx context.Context, e *docker.Engine, spec docker.ContainerSpec) (int, string, string) {
	sb := start(ctx, e, spec)
	code, err := e.Wait(ctx, sb.ID)
	Expect(err).NotTo(HaveOccurred())
	stdout, stderr, err := e.Logs(ctx, sb.ID)
	Expect(err).NotTo(HaveOccurred())
	return code, string(stdout), string(stderr)
}

// stdoutOf returns the sandbox's stdout so far.
func stdoutOf(ctx context.Context, e *docker.Engine, id string) string {
	out, _, err := e.Logs(ctx, id)
	Expect(err).NotTo(HaveOccurred())
	return string(out)
}

// gateway is a host-side HTTP server on a unix socket in a fresh socket dir.
type gateway struct {
	dir   string
	conns atomic.Int32
}

func startGateway(h http.Handler) *gateway {
	dir, cleanup, err := sandbox.NewSocketDir()
	if cleanup != nil {
		DeferCleanup(cleanup)
	}
	Expect(err).NotTo(HaveOccurred())
	ln, err := sandbox.ListenSocket(filepath.Join(dir, sandbox.SocketName))
	Expect(err).NotTo(HaveOccurred())
	g := &gateway{dir: dir}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				g.conns.Add(1)
			}
		},
	}
	go func() { _ = srv.Serve(ln) }()
	DeferCleanup(srv.Close)
	return g
}
