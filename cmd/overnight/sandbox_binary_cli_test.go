package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/harnesstest"
)

// runBinary runs path with args in an empty environment (no gateway: what
// the sandbox side answers outside a sandbox), bounded in time.
func runBinary(ctx context.Context, path string, args ...string) outcome {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	return runProcess(cmd)
}

var _ = Describe("overnight-sandbox, the slim sandbox side", func() {
	// Inside sandboxes both are checked by the sandbox conformance kit
	// (sandbox/docker) and by every run of these specs (the CLI injects
	// overnight-sandbox); here, their argv handling side by side.
	DescribeTable("answers the sandbox subcommands as the full overnight does", func(ctx SpecContext, args ...string) {
		full, slim := runBinary(ctx, bin, args...), runBinary(ctx, sandboxBin, args...)
		Expect(slim).To(Equal(full))
		Expect(full.stdout + full.stderr).NotTo(BeEmpty())
	},
		Entry("init runs the agent command and passes on its exit code", "init", "--", "/bin/sh", "-c", "echo out; echo err >&2; exit 5"),
		Entry("init without a command", "init"),
		Entry("probe", "probe", "exit", "4", "out", "err"),
		Entry("probe without a mode", "probe"),
		Entry("agent without a name", "agent"),
		Entry("an unknown agent", "agent", "nosuch"),
		Entry("a built-in agent outside a sandbox", "agent", "deployer"),
	)

	It("is what the CLI injects when it was built with it, and a stale one is not", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		cli, sibling := filepath.Join(dir, "overnight"), filepath.Join(dir, "overnight-sandbox")
		Expect(os.Link(bin, cli)).To(Succeed())
		Expect(os.Link(sandboxBin, sibling)).To(Succeed())
		run := func() outcome {
			GinkgoHelper()
			o := runProcess(exec.CommandContext(ctx, cli, "--state", stateDir(), "-v", "run", "deploy", "--seed", "1"))
			Expect(o.code).To(BeZero(), o.stderr)
			return o
		}
		o := run()
		Expect(o.stderr).To(ContainSubstring(fmt.Sprintf(`msg="sandbox init binary" path=%s why=`, sibling)))

		// A sibling built apart (another build id) is left alone: the CLI
		// injects itself, and the run passes all the same.
		Expect(os.Remove(sibling)).To(Succeed())
		Expect(harnesstest.BuildSandboxAs(ctx, sibling, "", "another-build")).To(Succeed())
		o = run()
		Expect(o.stderr).To(ContainSubstring(fmt.Sprintf(`msg="sandbox init binary" path=%s why=`, cli)))
		Expect(o.stderr).To(ContainSubstring("(a stale sibling)"))
	}, SpecTimeout(5*time.Minute))
})
