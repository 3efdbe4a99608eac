package harness_test

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
)

// The CLI's default init binary: the overnight-sandbox beside it, only
// when the two were built together. Real binaries, asked for real.
var _ = Describe("the init binary beside the executable", Ordered, func() {
	var dir, exe, sibling string
	BeforeAll(func(ctx SpecContext) {
		dir = GinkgoT().TempDir()
		exe, sibling = filepath.Join(dir, "overnight"), filepath.Join(dir, harness.SandboxBinaryName)
		Expect(os.WriteFile(exe, []byte("the CLI: only its build id matters here"), 0o755)).To(Succeed())
		Expect(harnesstest.BuildSandboxAs(ctx, sibling, "", "build-a")).To(Succeed())
	}, NodeTimeout(5*time.Minute))

	It("is the sibling when it answers the executable's build id", func() {
		bin, why := harness.InitBinaryBeside(exe, "build-a")
		Expect(bin).To(Equal(sibling))
		Expect(why).To(ContainSubstring("built with this executable"))
	})

	It("is the executable itself when the sibling is stale (another build id)", func() {
		bin, why := harness.InitBinaryBeside(exe, "build-b")
		Expect(bin).To(Equal(exe))
		Expect(why).To(ContainSubstring(`build id "build-a", this executable "build-b" (a stale sibling)`))
	})

	It("is the executable itself when the executable has no build id (built without make)", func() {
		bin, why := harness.InitBinaryBeside(exe, "")
		Expect(bin).To(Equal(exe))
		Expect(why).To(ContainSubstring("no build id"))
	})

	It("is the executable itself when no sibling is there, or it cannot answer", func() {
		alone := filepath.Join(GinkgoT().TempDir(), "overnight")
		bin, why := harness.InitBinaryBeside(alone, "build-a")
		Expect(bin).To(Equal(alone))
		Expect(why).To(ContainSubstring("no overnight-sandbox beside"))

		mute := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(mute, harness.SandboxBinaryName), []byte("not a program"), 0o644)).To(Succeed())
		bin, why = harness.InitBinaryBeside(filepath.Join(mute, "overnight"), "build-a")
		Expect(bin).To(Equal(filepath.Join(mute, "overnight")))
		Expect(why).To(ContainSubstring("--build-id failed"))
	})
})
