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
		Expect(errOut).To(ContainSubstring(`cannot start agent: "/nonexistent/agent" does not exist in the image`))

		notExec := filepath.Join(GinkgoT().TempDir(), "agent")
		Expect(os.WriteFile(notExec, []byte("not a program"), 0o644)).To(Succeed())
		cmd = exec.CommandContext(ctx, self, "init", "--", notExec)
		cmd.Env = append(os.Environ(), roleEnv+"=1", initproc.EnvRelayAddr+"=127.0.0.1:0")
		code, _, errOut = run(cmd)
		Expect(code).To(Equal(initproc.ExitCannotExecute))
		Expect(errOut).To(ContainSubstring("cannot start agent"))
	})

	DescribeTable("says what is wrong with an agent that cannot start, in terms of the image",
		func(make func(dir string) string, code int, want string) {
			self, _ := os.Executable()
			agent := make(GinkgoT().TempDir())
			cmd := exec.CommandContext(ctx, self, "init", "--", agent)
			cmd.Env = append(os.Environ(), roleEnv+"=1", initproc.EnvRelayAddr+"=127.0.0.1:0")
			got, _, errOut := run(cmd)
			Expect(got).To(Equal(code), errOut)
			Expect(errOut).To(ContainSubstring(want))
			Expect(errOut).NotTo(ContainSubstring("static linux/amd64"), "the old catch-all guess")
		},
		Entry("a script without the execute bit", func(dir string) string {
			p := filepath.Join(dir, "agent.py")
			Expect(os.WriteFile(p, []byte("#!/usr/bin/python3\nprint('hi')\n"), 0o644)).To(Succeed())
			return p
		}, initproc.ExitCannotExecute, "is not executable (mode -rw-r--r--): chmod +x it when you build the image, or run it through its interpreter (command: [/usr/bin/python3,"),
		Entry("a script whose interpreter is missing", func(dir string) string {
			p := filepath.Join(dir, "agent.py")
			Expect(os.WriteFile(p, []byte("#!/opt/nowhere/python3 -u\nprint('hi')\n"), 0o755)).To(Succeed())
			return p
		}, initproc.ExitCannotExecute, "is a script for /opt/nowhere/python3 (its #! line), which is not in the image"),
		Entry("a binary for another architecture", func(dir string) string {
			self, _ := os.Executable()
			b, err := os.ReadFile(self)
			Expect(err).NotTo(HaveOccurred())
			b[18], b[19] = 183, 0 // e_machine: EM_AARCH64
			p := filepath.Join(dir, "agent")
			Expect(os.WriteFile(p, b, 0o755)).To(Succeed())
			return p
		}, initproc.ExitCannotExecute, "is a binary for arm64, but this sandbox runs linux/amd64"),
		Entry("a dynamically linked binary whose loader is missing", func(dir string) string {
			b, err := os.ReadFile("/bin/true")
			Expect(err).NotTo(HaveOccurred())
			loader := []byte("/lib64/ld-linux-x86-64.so.2")
			Expect(bytes.Contains(b, loader)).To(BeTrue(), "/bin/true is dynamically linked against glibc")
			b = bytes.Replace(b, loader, []byte("/lib64/ld-absnt-x86-64.so.2"), 1)
			p := filepath.Join(dir, "agent")
			Expect(os.WriteFile(p, b, 0o755)).To(Succeed())
			return p
		}, initproc.ExitCannotExecute, "is dynamically linked, and its loader /lib64/ld-absnt-x86-64.so.2 is not in the image: build it static"),
		Entry("a file in no executable format", func(dir string) string {
			p := filepath.Join(dir, "agent")
			Expect(os.WriteFile(p, []byte("print('hi')\n"), 0o755)).To(Succeed())
			return p
		}, initproc.ExitCannotExecute, `is in no executable format (it starts with "print('hi')\n"): a script needs a #! line`),
		Entry("a directory", func(dir string) string { return dir }, initproc.ExitCannotExecute, "is a directory, not a program"),
		Entry("a script with Windows line endings", func(dir string) string {
			p := filepath.Join(dir, "agent.py")
			Expect(os.WriteFile(p, []byte("#!/bin/sh\r\necho hi\r\n"), 0o755)).To(Succeed())
			return p
		}, initproc.ExitCannotExecute, `has Windows line endings (CRLF): its #! line names "/bin/sh\r", which is not in the image; convert the script to LF line endings (dos2unix)`),
	)

	It("says a command found in PATH is not executable, rather than not found", func() {
		self, _ := os.Executable()
		dir := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(dir, "agent.py"), []byte("#!/usr/bin/python3\nprint('hi')\n"), 0o644)).To(Succeed())
		cmd := exec.CommandContext(ctx, self, "init", "--", "agent.py")
		cmd.Env = append(os.Environ(), roleEnv+"=1", initproc.EnvRelayAddr+"=127.0.0.1:0", "PATH="+dir)
		code, _, errOut := run(cmd)
		Expect(code).To(Equal(initproc.ExitCannotExecute), errOut)
		Expect(errOut).To(ContainSubstring(`cannot start agent: "agent.py" is not executable (mode -rw-r--r--): chmod +x it when you build the image, or run it through its interpreter (command: [/usr/bin/python3, agent.py]) (found in PATH at ` + filepath.Join(dir, "agent.py") + ")"))
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
