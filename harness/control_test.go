package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/journal"
)

var _ = Describe("the control socket", func() {
	It("serves the owner's runs and logs to other processes, and is gone when the owner closes", func(ctx SpecContext) {
		state, err := os.MkdirTemp("", "ovn-ctl-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, state)
		h, err := harness.Open(ctx, harness.Options{StateDir: state})
		Expect(err).NotTo(HaveOccurred())

		_, err = harness.Open(ctx, harness.Options{StateDir: state})
		Expect(err).To(MatchError(journal.ErrLocked), "the journal admits one process")
		rm, err := harness.DialControl(ctx, state)
		Expect(err).NotTo(HaveOccurred())
		runs, err := rm.Runs(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(runs).To(BeEmpty())
		_, err = rm.Logs(ctx, "nope")
		Expect(err).To(MatchError(harness.ErrRunNotFound))
		Expect(err.Error()).To(ContainSubstring(`"nope"`))

		Expect(h.Close()).To(Succeed())
		Expect(filepath.Join(state, harness.ControlSocketName)).NotTo(BeAnExistingFile())
		_, err = harness.DialControl(ctx, state)
		Expect(err).To(MatchError(ContainSubstring("no control socket answers")))
	})

	It("is skipped for a state dir whose path is too long for a socket, and a stale one is replaced", func(ctx context.Context) {
		base, err := os.MkdirTemp("", "ovn-ctl-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, base)
		long := filepath.Join(base, strings.Repeat("d", 100))
		h, err := harness.Open(ctx, harness.Options{StateDir: long})
		Expect(err).NotTo(HaveOccurred(), "a long path costs the socket, not the run")
		Expect(filepath.Join(long, harness.ControlSocketName)).NotTo(BeAnExistingFile())
		Expect(h.Close()).To(Succeed())

		stale := filepath.Join(base, "s")
		Expect(os.MkdirAll(stale, 0o700)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(stale, harness.ControlSocketName), nil, 0o600)).To(Succeed())
		h, err = harness.Open(ctx, harness.Options{StateDir: stale})
		Expect(err).NotTo(HaveOccurred())
		defer h.Close()
		rm, err := harness.DialControl(ctx, stale)
		Expect(err).NotTo(HaveOccurred())
		_, err = rm.Runs(ctx)
		Expect(err).NotTo(HaveOccurred())
	})
})
