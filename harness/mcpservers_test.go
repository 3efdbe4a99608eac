package harness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("stdio MCP servers a dead harness left", func() {
	It("are reaped by gc: a server.pid whose process still has that server's data dir, and no other process", func(ctx SpecContext) {
		state := GinkgoT().TempDir()
		start := func(dir string, env ...string) *exec.Cmd {
			Expect(os.MkdirAll(filepath.Join(dir, "data"), 0o755)).To(Succeed())
			cmd := exec.Command("sleep", "60")
			cmd.Env = append(os.Environ(), env...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			Expect(cmd.Start()).To(Succeed())
			DeferCleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
			Expect(os.WriteFile(filepath.Join(dir, "server.pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)).To(Succeed())
			return cmd
		}
		left := filepath.Join(state, "mcp", "tickets-run1")
		leftover := start(left, EnvMCPData+"="+filepath.Join(left, "data"))
		other := filepath.Join(state, "mcp", "notes-run2")
		reused := start(other) // the pid is another process's now: not the server's data dir in its environment
		h, err := Open(context.Background(), Options{StateDir: state})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(h.Close)
		n, err := h.reapStaleWorlds()
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(Equal(1))
		done := make(chan error, 1)
		go func() { _, err := leftover.Process.Wait(); done <- err }()
		Eventually(done).WithTimeout(5 * time.Second).Should(Receive())
		Expect(syscall.Kill(reused.Process.Pid, 0)).To(Succeed(), "the other process lives")
	})
})
