package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox"
)

var _ = Describe("EnsureImage", func() {
	It("builds once per content hash: a second call, even from a new Engine, finds the image", func(ctx SpecContext) {
		Expect(image).To(MatchRegexp(`^overnight-sandbox:[0-9a-f]{12}$`))
		before := api.builds.Load()
		for _, e := range []*sandbox.Engine{newEngine(), newEngine()} {
			again, err := e.EnsureImage(ctx, sandbox.ImageSpec{InitBinary: initBinary})
			Expect(err).NotTo(HaveOccurred())
			Expect(again).To(Equal(image))
		}
		Expect(api.builds.Load()).To(Equal(before), "no rebuild for the same inputs")

		info, err := cli.ImageInspect(ctx, image)
		Expect(err).NotTo(HaveOccurred())
		Expect(info.Config.User).To(Equal("65534:65534"))
		Expect(info.Config.Entrypoint).To(Equal([]string{"/overnight", "init", "--"}))
		Expect(info.Config.WorkingDir).To(Equal("/workspace"))
		Expect(info.Config.Labels).To(HaveKeyWithValue(sandbox.LabelManaged, "true"))
		Expect(info.RootFS.Layers).To(HaveLen(1), "one layer: a FROM-scratch image with one ADD")
	})

	It("layers the init onto a base image, with the agent binary as the default command", func(ctx SpecContext) {
		e := newEngine()
		var derived string
		DeferCleanup(func(ctx context.Context) {
			if derived != "" {
				Expect(e.RemoveImage(ctx, derived)).To(Succeed())
			}
		})
		before := api.builds.Load()
		var err error
		derived, err = e.EnsureImage(ctx, sandbox.ImageSpec{InitBinary: initBinary, AgentBinary: initBinary, BaseImage: image})
		Expect(err).NotTo(HaveOccurred())
		Expect(derived).NotTo(Equal(image))
		Expect(api.builds.Load()).To(Equal(before + 1))

		spec := agentSpec()
		spec.Image, spec.Cmd = derived, []string{sandbox.AgentPath, "echo", "from /agent", "-", "0"}
		code, out, _ := runToEnd(ctx, e, spec)
		Expect(code).To(Equal(0))
		Expect(out).To(Equal("from /agent\n"))

		// No command: the image's default, /agent, runs under the init (and prints its usage).
		spec = agentSpec()
		spec.Image, spec.Cmd = derived, nil
		code, _, errOut := runToEnd(ctx, e, spec)
		Expect(code).To(Equal(2))
		Expect(errOut).To(ContainSubstring("usage: testinit"))
	}, NodeTimeout(2*time.Minute))

	It("refuses what cannot run in a scratch image, and a base image the engine lacks", func(ctx SpecContext) {
		e := newEngine()
		_, err := e.EnsureImage(ctx, sandbox.ImageSpec{})
		Expect(err).To(MatchError(sandbox.ErrInvalidSpec))

		text := filepath.Join(GinkgoT().TempDir(), "agent.sh")
		Expect(os.WriteFile(text, []byte("#!/bin/sh\necho hi\n"), 0o755)).To(Succeed())
		_, err = e.EnsureImage(ctx, sandbox.ImageSpec{InitBinary: text})
		Expect(err).To(MatchError(sandbox.ErrInvalidSpec))
		Expect(err.Error()).To(ContainSubstring("not a linux executable"))

		if _, statErr := os.Stat("/bin/ls"); statErr == nil { // dynamically linked on every distro
			_, err = e.EnsureImage(ctx, sandbox.ImageSpec{InitBinary: "/bin/ls"})
			Expect(err).To(MatchError(sandbox.ErrInvalidSpec))
			Expect(err.Error()).To(ContainSubstring("CGO_ENABLED=0"))
		}

		_, err = e.EnsureImage(ctx, sandbox.ImageSpec{InitBinary: initBinary, BaseImage: "overnight-no-such-image:" + suiteID})
		Expect(err).To(MatchError(sandbox.ErrNotFound))
		Expect(err.Error()).To(ContainSubstring("can pull nothing"))
	})
})
