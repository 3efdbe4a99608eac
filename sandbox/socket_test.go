package sandbox_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox"
)

var _ = Describe("socket dirs", func() {
	It("makes a short, world-accessible dir under the temp dir, and cleanup removes it", func() {
		dir, cleanup, err := sandbox.NewSocketDir()
		if cleanup != nil {
			DeferCleanup(cleanup)
		}
		Expect(err).NotTo(HaveOccurred())
		Expect(filepath.Dir(dir)).To(Equal(filepath.Clean(os.TempDir())))
		Expect(filepath.Base(dir)).To(HavePrefix("ovn-"))
		Expect(len(filepath.Join(dir, sandbox.SocketName))).To(BeNumerically("<=", 107))
		fi, err := os.Stat(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o711)))

		ln, err := sandbox.ListenSocket(filepath.Join(dir, sandbox.SocketName))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = ln.Close() })
		fi, err = os.Stat(filepath.Join(dir, sandbox.SocketName))
		Expect(err).NotTo(HaveOccurred())
		Expect(fi.Mode() & os.ModeSocket).NotTo(BeZero())
		Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o666)))

		Expect(cleanup()).To(Succeed())
		_, err = os.Stat(dir)
		Expect(os.IsNotExist(err)).To(BeTrue())
	})

	It("falls back to /tmp when TMPDIR is too long for a socket path", func() {
		long := filepath.Join(GinkgoT().TempDir(), strings.Repeat("d", 100))
		Expect(os.MkdirAll(long, 0o755)).To(Succeed())
		GinkgoT().Setenv("TMPDIR", long)
		dir, cleanup, err := sandbox.NewSocketDir()
		if cleanup != nil {
			DeferCleanup(cleanup)
		}
		Expect(err).NotTo(HaveOccurred())
		Expect(filepath.Dir(dir)).To(Equal("/tmp"))
	})

	It("unlinks a stale socket left by a killed harness, and refuses a live one or a non-socket", func() {
		dir, cleanup, err := sandbox.NewSocketDir()
		if cleanup != nil {
			DeferCleanup(cleanup)
		}
		Expect(err).NotTo(HaveOccurred())
		path := filepath.Join(dir, sandbox.SocketName)

		// A killed process leaves its socket file behind, with nobody listening.
		stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		Expect(err).NotTo(HaveOccurred())
		stale.SetUnlinkOnClose(false)
		Expect(stale.Close()).To(Succeed())
		Expect(path).To(BeAnExistingFile())

		ln, err := sandbox.ListenSocket(path)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = ln.Close() })
		go func() {
			if c, err := ln.Accept(); err == nil {
				_ = c.Close()
			}
		}()
		c, err := net.DialTimeout("unix", path, time.Second)
		Expect(err).NotTo(HaveOccurred())
		_ = c.Close()

		_, err = sandbox.ListenSocket(path)
		Expect(err).To(MatchError(sandbox.ErrSocketInUse))

		regular := filepath.Join(dir, "not-a-socket")
		Expect(os.WriteFile(regular, []byte("x"), 0o644)).To(Succeed())
		_, err = sandbox.ListenSocket(regular)
		Expect(err).To(MatchError(ContainSubstring("is not a socket")))
		Expect(regular).To(BeAnExistingFile(), "never removes what is not a socket")

		_, err = sandbox.ListenSocket("/tmp/" + strings.Repeat("s", 120))
		Expect(err).To(MatchError(ContainSubstring("unix sockets allow 107")))
	})
})

var _ = Describe("StateHash", func() {
	It("names the state dir by a stable 16-hex hash of its absolute path", func() {
		wd, err := os.Getwd()
		Expect(err).NotTo(HaveOccurred())
		h := sandbox.StateHash(".overnight")
		Expect(h).To(MatchRegexp(`^[0-9a-f]{16}$`))
		Expect(sandbox.StateHash(filepath.Join(wd, ".overnight"))).To(Equal(h))
		Expect(sandbox.StateHash(wd + "/x/../.overnight/")).To(Equal(h))
		Expect(sandbox.StateHash("/elsewhere/.overnight")).NotTo(Equal(h))
	})
})
