package initproc_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox"
)

var _ = Describe("Main as a standby", func() {
	var (
		ctx       context.Context
		host, dir string
	)
	BeforeEach(func() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		DeferCleanup(cancel)
		var err error
		host, dir, err = sandbox.NewStandbyDir(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		Expect(dir).To(HavePrefix(sandbox.GatewayDir + "/standby-"))
		dir = host // outside a sandbox, the init sees the host's path
	})

	// start runs init as a standby whose agent prints its environment.
	start := func(env ...string) (*bytes.Buffer, chan int, *os.Process) {
		cmd := initCmd(ctx, "", "environ")
		cmd.Env = append(cmd.Env, append(env, sandbox.EnvStandby+"="+dir)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, GinkgoWriter
		Expect(cmd.Start()).To(Succeed())
		done := make(chan int, 1)
		go func() {
			_ = cmd.Wait()
			done <- cmd.ProcessState.ExitCode()
		}()
		DeferCleanup(func() { _ = cmd.Process.Kill() })
		return &out, done, cmd.Process
	}

	It("starts the agent only once handed over, with the handover's environment on top of its own", func() {
		out, done, _ := start("SHARED=from the standby", "OVERRIDDEN=old")
		Consistently(done, 300*time.Millisecond).ShouldNot(Receive(), "the agent ran before any handover")
		Expect(sandbox.WriteHandover(host, sandbox.Handover{Attempt: 2, Env: map[string]string{"OVERNIGHT_TOKEN": "t0k", "OVERRIDDEN": "new"}})).To(Succeed())
		var code int
		Eventually(done, 10*time.Second).Should(Receive(&code))
		Expect(code).To(Equal(0))
		env := strings.Split(strings.TrimSpace(out.String()), "\n")
		Expect(env).To(ContainElements("SHARED=from the standby", "OVERRIDDEN=new", "OVERNIGHT_TOKEN=t0k"))
		Expect(env).NotTo(ContainElement(HavePrefix(sandbox.EnvStandby + "=")))
		Expect(env).NotTo(ContainElement("OVERRIDDEN=old"))
	})

	It("starts at once from a handover written before it looked", func() {
		Expect(sandbox.WriteHandover(host, sandbox.Handover{Attempt: 1, Env: map[string]string{"EARLY": "yes"}})).To(Succeed())
		out, done, _ := start()
		Eventually(done, 10*time.Second).Should(Receive(Equal(0)))
		Expect(out.String()).To(ContainSubstring("EARLY=yes\n"))
	})

	It("ends on SIGTERM while it waits, with 128+15, the agent never started", func() {
		out, done, proc := start()
		Consistently(done, 300*time.Millisecond).ShouldNot(Receive()) // subscribed to signals by then
		Expect(proc.Signal(syscall.SIGTERM)).To(Succeed())
		Eventually(done, 10*time.Second).Should(Receive(Equal(128 + int(syscall.SIGTERM))))
		Expect(out.String()).To(BeEmpty())
	})

	It("refuses a second handover, and names in its environment that cannot be", func() {
		h := sandbox.Handover{Attempt: 1, Env: map[string]string{"A": "1"}}
		Expect(sandbox.WriteHandover(host, h)).To(Succeed())
		Expect(sandbox.WriteHandover(host, h)).To(MatchError(sandbox.ErrInvalidSpec))
		Expect(sandbox.WriteHandover(GinkgoT().TempDir(), sandbox.Handover{Env: map[string]string{"A=B": "1"}})).To(MatchError(sandbox.ErrInvalidSpec))
		fi, err := os.Stat(host + "/" + sandbox.HandoverFile)
		Expect(err).NotTo(HaveOccurred())
		Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o644)), "the sandbox's user reads it")
	})
})
