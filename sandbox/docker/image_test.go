package docker_test

import (
	"github.com/overnight-dev/overnight/sandbox/docker"

	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/docker/docker/api/types/container"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox"
)

var _ = Describe("EnsureImage", func() {
	It("builds once per content hash: a second call, even from a new Engine, finds the image", func(ctx SpecContext) {
		Expect(image).To(MatchRegexp(`^overnight-sandbox:[0-9a-f]{12}$`))
		before := api.builds.Load()
		for _, e := range []*docker.Engine{newEngine(), newEngine()} {
			again, err := e.EnsureImage(ctx, docker.ImageSpec{InitBinary: initBinary})
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
		ref, err := mine.EnsureImage(ctx, docker.ImageSpec{InitBinary: bin})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) { _ = mine.RemoveImage(ctx, ref) })
		_, err = theirs.EnsureImage(ctx, docker.ImageSpec{InitBinary: bin})
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

	It("RemoveImage removes every build of the same inputs, with every claim on them", func(ctx SpecContext) {
		first, second := newEngine(), newEngine()
		bin, err := buildTestInit(ctx, GinkgoT().TempDir(), suiteID+"-rm-"+randomID())
		Expect(err).NotTo(HaveOccurred())
		spec := docker.ImageSpec{InitBinary: bin}
		ref, err := first.EnsureImage(ctx, spec)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) { _ = first.RemoveImage(ctx, ref) })
		_, err = second.EnsureImage(ctx, spec)
		Expect(err).NotTo(HaveOccurred())
		rebuilt, err := cli.ImageInspect(ctx, ref)
		Expect(err).NotTo(HaveOccurred())
		// Another build of the same inputs holding the first state
		// directory's claim, as two processes building at once leave: an
		// image of its own with the same LabelImageHash (a commit keeps the
		// image's labels).
		c, err := cli.ContainerCreate(ctx, &container.Config{Image: ref, Cmd: []string{"version"}}, nil, nil, nil, "")
		Expect(err).NotTo(HaveOccurred())
		commit, err := cli.ContainerCommit(ctx, c.ID, container.CommitOptions{Reference: first.StateTag(ref)})
		Expect(err).NotTo(HaveOccurred())
		Expect(cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})).To(Succeed())
		old, err := cli.ImageInspect(ctx, commit.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(old.ID).NotTo(Equal(rebuilt.ID))
		Expect(old.Config.Labels).To(HaveKeyWithValue(docker.LabelImageHash, rebuilt.Config.Labels[docker.LabelImageHash]))

		Expect(first.RemoveImage(ctx, ref)).To(Succeed())
		for _, id := range []string{old.ID, rebuilt.ID} {
			_, err := cli.ImageInspect(ctx, id)
			Expect(err).To(HaveOccurred(), "image %s left behind", id)
		}
		Expect(first.RemoveImage(ctx, first.StateTag(ref))).To(MatchError(sandbox.ErrInvalidSpec))
	}, NodeTimeout(2*time.Minute))

	It("refuses what cannot run in a scratch image, and an agent image the engine lacks", func(ctx SpecContext) {
		e := newEngine()
		_, err := e.EnsureImage(ctx, docker.ImageSpec{})
		Expect(err).To(MatchError(sandbox.ErrInvalidSpec))

		text := filepath.Join(GinkgoT().TempDir(), "agent.sh")
		Expect(os.WriteFile(text, []byte("#!/bin/sh\necho hi\n"), 0o755)).To(Succeed())
		_, err = e.EnsureImage(ctx, docker.ImageSpec{InitBinary: text})
		Expect(err).To(MatchError(sandbox.ErrInvalidSpec))
		Expect(err.Error()).To(ContainSubstring("not a linux executable"))

		if _, statErr := os.Stat("/bin/ls"); statErr == nil { // dynamically linked on every distro
			_, err = e.EnsureImage(ctx, docker.ImageSpec{InitBinary: "/bin/ls"})
			Expect(err).To(MatchError(sandbox.ErrInvalidSpec))
			Expect(err.Error()).To(ContainSubstring("CGO_ENABLED=0"))
		}

		missing := filepath.Join(GinkgoT().TempDir(), "bin", "agent")
		_, err = e.EnsureImage(ctx, docker.ImageSpec{InitBinary: initBinary, AgentBinary: missing})
		Expect(err).To(MatchError(sandbox.ErrInvalidSpec), "an agent.binary that is not there is the agent's problem, not an internal one")
		Expect(err.Error()).To(ContainSubstring(missing))

		_, err = e.InspectAgentImage(ctx, "overnight-no-such-image:"+suiteID)
		Expect(err).To(MatchError(sandbox.ErrNotFound))
		Expect(err.Error()).To(ContainSubstring("can pull nothing"))
	})
})
