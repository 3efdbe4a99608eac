package initproc_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox/initproc"
)

// initCmd prepares the test binary as init over the test binary as a helper agent.
func initCmd(ctx context.Context, socket string, helperArgs ...string) *exec.Cmd {
	self, err := os.Executable()
	Expect(err).NotTo(HaveOccurred())
	args := append([]string{"init", "--", self, "helper"}, helperArgs...)
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Env = append(os.Environ(),
		roleEnv+"=1",
		initproc.EnvRelayAddr+"=127.0.0.1:0",
		initproc.EnvSocket+"="+socket,
	)
	cmd.WaitDelay = time.Second
	return cmd
}

// run runs init to completion and returns its exit code, stdout and stderr.
func run(cmd *exec.Cmd) (int, string, string) {
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode(), out.String(), errOut.String()
	}
	Expect(err).NotTo(HaveOccurred())
	return 0, out.String(), errOut.String()
}

var _ = Describe("Main", func() {
	var ctx context.Context
	BeforeEach(func() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		DeferCleanup(cancel)
	})

	It("passes the agent's exit code and its stdout and stderr through", func() {
		code, out, errOut := run(initCmd(ctx, "", "exit", "7"))
		Expect(code).To(Equal(7))
		Expect(out).To(Equal("to stdout\n"))
		Expect(errOut).To(Equal("to stderr\n"))
	})

	It("exits 128+N when the agent dies from signal N", func() {
		code, _, _ := run(initCmd(ctx, "", "selfsignal"))
		Expect(code).To(Equal(128 + int(syscall.SIGTERM)))
	})

	It("gives the agent the same environment", func() {
		cmd := initCmd(ctx, "", "env", "OVERNIGHT_TEST_MARKER")
		cmd.Env = append(cmd.Env, "OVERNIGHT_TEST_MARKER=hello there")
		code, out, _ := run(cmd)
		Expect(code).To(Equal(0))
		Expect(out).To(Equal("hello there\n"))
	})

	It("refuses an empty command with 127 and a clear message", func() {
		self, _ := os.Executable()
		cmd := exec.CommandContext(ctx, self, "init", "--")
		cmd.Env = append(os.Environ(), roleEnv+"=1", initproc.EnvRelayAddr+"=127.0.0.1:0")
		code, _, errOut := run(cmd)
		Expect(code).To(Equal(initproc.ExitNotFound))
		Expect(errOut).To(ContainSubstring("no agent command given"))
	})

	It("reports a missing command with 127 and a command that cannot run with 126", func() {
		self, _ := os.Executable()
		cmd := exec.CommandContext(ctx, self, "init", "--", "/nonexistent/agent")
		cmd.Env = append(os.Environ(), roleEnv+"=1", initproc.EnvRelayAddr+"=127.0.0.1:0")
		code, _, errOut := run(cmd)
		Expect(code).To(Equal(initproc.ExitNotFound))
		Expect(errOut).To(ContainSubstring(`cannot start agent "/nonexistent/agent"`))

		notExec := filepath.Join(GinkgoT().TempDir(), "agent")
		Expect(os.WriteFile(notExec, []byte("not a program"), 0o644)).To(Succeed())
		cmd = exec.CommandContext(ctx, self, "init", "--", notExec)
		cmd.Env = append(os.Environ(), roleEnv+"=1", initproc.EnvRelayAddr+"=127.0.0.1:0")
		code, _, errOut = run(cmd)
		Expect(code).To(Equal(initproc.ExitCannotExecute))
		Expect(errOut).To(ContainSubstring("cannot start agent"))
	})

	It("exits 125 without starting the agent when the relay address is taken", func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(ln.Close)
		self, _ := os.Executable()
		cmd := exec.CommandContext(ctx, self, "init", "--", self, "helper", "exit", "0")
		cmd.Env = append(os.Environ(), roleEnv+"=1", initproc.EnvRelayAddr+"="+ln.Addr().String())
		code, out, errOut := run(cmd)
		Expect(code).To(Equal(initproc.ExitRelayFailed))
		Expect(out).To(BeEmpty(), "the agent must not have run")
		Expect(errOut).To(ContainSubstring("cannot listen on " + ln.Addr().String()))
	})

	It("forwards SIGUSR1 and SIGTERM to the agent, which can then exit 0", func() {
		cmd := initCmd(ctx, "", "wait-signal")
		stdout, err := cmd.StdoutPipe()
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd.Start()).To(Succeed())
		DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		lines := bufio.NewScanner(stdout)
		Expect(lines.Scan()).To(BeTrue())
		Expect(lines.Text()).To(Equal("ready"))

		Expect(cmd.Process.Signal(syscall.SIGUSR1)).To(Succeed())
		Expect(lines.Scan()).To(BeTrue())
		Expect(lines.Text()).To(Equal("got user defined signal 1"))
		Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
		Expect(lines.Scan()).To(BeTrue())
		Expect(lines.Text()).To(Equal("got terminated"))
		Expect(cmd.Wait()).To(Succeed(), "init exits with the agent's code 0")
	})

	It("reaps orphans handed to it, and still reports the agent's own exit status", func() {
		code, out, errOut := run(initCmd(ctx, "", "orphans", "5"))
		Expect(errOut).To(BeEmpty())
		Expect(code).To(Equal(0))
		// orphans=5 proves the grandchildren were re-parented to init; zombies=0 that it
		// collected every one of them.
		Expect(out).To(Equal("orphans=5 zombies=0\n"))
	})

	It("relays the agent's HTTP calls on the loopback to the gateway socket", func() {
		socket := filepath.Join(GinkgoT().TempDir(), "gw.sock")
		ln, err := net.Listen("unix", socket)
		Expect(err).NotTo(HaveOccurred())
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("gateway saw " + r.URL.Path))
		})}
		go func() { _ = srv.Serve(ln) }()
		DeferCleanup(srv.Close)

		code, out, errOut := run(initCmd(ctx, socket, "http-get", "/v1/run"))
		Expect(errOut).To(BeEmpty())
		Expect(code).To(Equal(0))
		Expect(strings.TrimSpace(out)).To(Equal("200 gateway saw /v1/run"))
	})
})
