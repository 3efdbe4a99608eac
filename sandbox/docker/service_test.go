package docker_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/docker"
)

var _ = Describe("service containers (a world or an MCP server beside a run)", func() {
	// newBackend is the Docker backend on a state dir of the spec's own;
	// whatever its runs leave goes with the spec.
	newBackend := func() *docker.Backend {
		b := docker.NewBackend(api, sandbox.Config{StateDir: GinkgoT().TempDir(), InitBinary: initBinary})
		DeferCleanup(func(ctx SpecContext) {
			_, err := b.Reap(ctx, nil)
			Expect(err).NotTo(HaveOccurred())
		})
		return b
	}
	// exec runs cmd in the service and returns its stdout, failing on a
	// non-zero exit.
	exec := func(ctx context.Context, svc sandbox.Service, cmd ...string) string {
		GinkgoHelper()
		res, err := svc.(sandbox.Execer).Exec(ctx, append([]string{sandbox.InitPath}, cmd...))
		Expect(err).NotTo(HaveOccurred())
		if res.ExitCode != 0 {
			out, errOut, _ := svc.Logs(ctx)
			Fail(fmt.Sprintf("%s exited %d: %s%s (the service's output: %s%s)", cmd, res.ExitCode, res.Stdout, res.Stderr, out, errOut))
		}
		return strings.TrimSpace(string(res.Stdout))
	}

	It("runs as the user asked, keeps what it writes in its bind-mounted dir across a replacement, and is listed as a service", func(ctx SpecContext) {
		b := newBackend()
		run := nextRun()
		data := filepath.Join(GinkgoT().TempDir(), "data")
		Expect(os.Mkdir(data, 0o777)).To(Succeed())
		Expect(os.Chmod(data, 0o777)).To(Succeed()) // whatever the umask
		spec := sandbox.ServiceSpec{RunID: run, Name: "world.cloud", Image: image, Port: 8080,
			Cmd: []string{sandbox.InitPath, "accept", "0.0.0.0:8080"}, User: "4242:4243", Binds: map[string]string{"/data": data}}
		svc, err := b.StartService(ctx, spec)
		Expect(err).NotTo(HaveOccurred())
		Expect(exec(ctx, svc, "whoami")).To(And(ContainSubstring(`"uid":4242`), ContainSubstring(`"gid":4243`)))
		exec(ctx, svc, "put", "/data/ledger", "kept")
		fi, err := os.Stat(filepath.Join(data, "ledger"))
		Expect(err).NotTo(HaveOccurred())
		Expect(fi.Sys().(*syscall.Stat_t).Uid).To(BeEquivalentTo(4242), "the file is the service user's on the host")

		left, err := b.List(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(left).To(ConsistOf(sandbox.Leftover{ID: svc.ID(), RunID: run, State: "running", Service: "world.cloud"}))

		// Started again under the same run and name (a harness that lost
		// track of it): the old one goes, the new one finds the data.
		again, err := b.StartService(ctx, spec)
		Expect(err).NotTo(HaveOccurred())
		Expect(again.ID()).NotTo(Equal(svc.ID()))
		Expect(exec(ctx, again, "cat", "/data/ledger")).To(Equal("kept"))
		_, err = cli.ContainerInspect(ctx, svc.ID())
		Expect(err).To(HaveOccurred(), "the service it replaced is gone")

		Expect(b.Release(ctx, run)).To(Succeed())
		left, err = b.List(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(left).To(BeEmpty())
	}, SpecTimeout(2*time.Minute))

	It("answers the harness on the host's loopback and its bridge address, and no sandbox of the run, on its network or on none", func(ctx SpecContext) {
		b := newBackend()
		run := nextRun()
		svc, err := b.StartService(ctx, sandbox.ServiceSpec{RunID: run, Name: "world", Image: image, Port: 8080,
			Cmd: []string{sandbox.InitPath, "accept", "0.0.0.0:8080"}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { Expect(b.Release(ctx, run)).To(Succeed()) })
		Expect(svc.Addr()).To(HavePrefix("127.0.0.1:"))
		dial := func(addr string) error {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err == nil {
				c.Close()
			}
			return err
		}
		info, err := cli.ContainerInspect(ctx, svc.ID())
		Expect(err).NotTo(HaveOccurred())
		Expect(info.NetworkSettings.Networks).To(HaveKey("bridge"), "the service is on the default bridge")
		ip := info.NetworkSettings.Networks["bridge"].IPAddress
		Expect(ip).NotTo(BeEmpty())
		Eventually(func() error { return dial(net.JoinHostPort(ip, "8080")) }).WithTimeout(30*time.Second).Should(Succeed(), "the host reaches its bridge address")
		Expect(dial(svc.Addr())).To(Succeed(), "the host reaches its port published on loopback")

		network, err := b.Engine().EnsureNetwork(ctx, run)
		Expect(err).NotTo(HaveOccurred())
		attempt := 0
		for _, target := range []string{net.JoinHostPort(ip, "8080"), svc.Addr()} {
			for _, on := range []string{network, ""} {
				attempt++
				spec := agentSpec("dial", target)
				spec.RunID, spec.Attempt, spec.Network = run, attempt, on
				code, out, errOut := runToEnd(ctx, b.Engine(), spec)
				Expect(code).To(Equal(0), errOut)
				Expect(strings.TrimSpace(out)).To(Equal("closed"), "a sandbox on network %q reached the service at %s", on, target)
			}
		}
	}, SpecTimeout(2*time.Minute))

	It("refuses an image that is not on the engine as ErrImageNotFound, naming it", func(ctx SpecContext) {
		b := newBackend()
		_, err := b.StartService(ctx, sandbox.ServiceSpec{RunID: nextRun(), Name: "world", Image: "overnight-no-such-world:1", Port: 8080})
		Expect(err).To(MatchError(sandbox.ErrImageNotFound))
		Expect(err.Error()).To(ContainSubstring("image overnight-no-such-world:1 is not on the engine, which pulls nothing"))
		_, err = b.StartService(ctx, sandbox.ServiceSpec{RunID: nextRun(), Name: "world", Image: image, Port: 8080, Binds: map[string]string{"data": "/tmp"}})
		Expect(err).To(MatchError(sandbox.ErrInvalidSpec))
	})
})
