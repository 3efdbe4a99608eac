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

	It("tags the image for each state directory that uses it, and reaps only its own", func(ctx SpecContext) {
		mine, theirs := newEngine(), newEngine()
		nonce := randomID()
		bin, err := buildTestInit(ctx, GinkgoT().TempDir(), suiteID+"-reap-"+nonce)
		Expect(err).NotTo(HaveOccurred())
		ref, err := mine.EnsureImage(ctx, sandbox.ImageSpec{InitBinary: bin})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) {
			for _, t := range []string{mine.StateTag(ref), theirs.StateTag(ref), ref} {
				_ = mine.RemoveImage(ctx, t)
			}
		})
		_, err = theirs.EnsureImage(ctx, sandbox.ImageSpec{InitBinary: bin})
		Expect(err).NotTo(HaveOccurred())
		info, err := cli.ImageInspect(ctx, ref)
		Expect(err).NotTo(HaveOccurred())
		Expect(info.RepoTags).To(ContainElements(ref, mine.StateTag(ref), theirs.StateTag(ref)))

		removed, err := mine.ReapImages(ctx, false, image)
		Expect(err).NotTo(HaveOccurred())
		Expect(removed).To(ConsistOf(mine.StateTag(ref)), "only its claim: another state directory still uses the image")
		_, err = cli.ImageInspect(ctx, ref)
		Expect(err).NotTo(HaveOccurred())

		removed, err = theirs.ReapImages(ctx, false, image)
		Expect(err).NotTo(HaveOccurred())
		Expect(removed).To(ConsistOf(theirs.StateTag(ref), ref), "the last claim goes, and the image with it")
		_, err = cli.ImageInspect(ctx, ref)
		Expect(err).To(HaveOccurred())
		_, err = cli.ImageInspect(ctx, image)
		Expect(err).NotTo(HaveOccurred(), "kept: the suite's image, and no claim of these engines")
	}, NodeTimeout(2*time.Minute))

	It("refuses what cannot run in a scratch image, and an agent image the engine lacks", func(ctx SpecContext) {
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

		_, err = e.InspectAgentImage(ctx, "overnight-no-such-image:"+suiteID)
		Expect(err).To(MatchError(sandbox.ErrNotFound))
		Expect(err.Error()).To(ContainSubstring("can pull nothing"))
	})
})
