package docker_test

import (
	"github.com/overnight-dev/overnight/sandbox/docker"

	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"time"

	dimage "github.com/docker/docker/api/types/image"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox"
)

// importImage makes an image the way a user without a registry does
// (`docker import` of a root filesystem), holding the suite's testinit as
// /usr/local/bin/agent, with the given Dockerfile-style changes; it is
// removed when the spec ends.
func importImage(ctx context.Context, changes ...string) string {
	GinkgoHelper()
	bin, err := os.ReadFile(initBinary)
	Expect(err).NotTo(HaveOccurred())
	var rootfs bytes.Buffer
	tw := tar.NewWriter(&rootfs)
	for _, d := range []string{"usr/", "usr/local/", "usr/local/bin/", "app/"} {
		Expect(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755})).To(Succeed())
	}
	Expect(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "usr/local/bin/agent", Mode: 0o755, Size: int64(len(bin))})).To(Succeed())
	_, err = tw.Write(bin)
	Expect(err).NotTo(HaveOccurred())
	Expect(tw.Close()).To(Succeed())
	ref := "overnight-test-import:" + randomID()
	rc, err := cli.ImageImport(ctx, dimage.ImportSource{Source: &rootfs, SourceName: "-"}, ref, dimage.ImportOptions{Changes: changes})
	Expect(err).NotTo(HaveOccurred())
	_, _ = bytes.NewBuffer(nil).ReadFrom(rc)
	Expect(rc.Close()).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		_, err := cli.ImageRemove(ctx, ref, dimage.RemoveOptions{Force: true, PruneChildren: true})
		Expect(err).NotTo(HaveOccurred())
	})
	return ref
}

var _ = Describe("an agent's own image", func() {
	// runImage runs img as the harness does: unchanged, under the init
	// mounted at /overnight, with a workspace volume seeded from the
	// suite's sandbox image.
	runImage := func(ctx context.Context, e *docker.Engine, ref string, command, args []string, workdir string) (int, string, string) {
		GinkgoHelper()
		cfg, err := e.InspectAgentImage(ctx, ref)
		Expect(err).NotTo(HaveOccurred())
		cmd, _, err := sandbox.AgentCommand(ref, command, args, cfg)
		Expect(err).NotTo(HaveOccurred())
		spec := agentSpec()
		spec.Image, spec.Cmd = cfg.ID, cmd
		spec.Entrypoint = []string{sandbox.InitPath, "init", "--"}
		spec.InitBinary, spec.SeedImage = initBinary, image
		spec.Workspace = "overnight-ws-" + spec.RunID
		spec.WorkingDir = workdir
		return runToEnd(ctx, e, spec)
	}

	It("runs unchanged under the init, with no image built on top of it", func(ctx SpecContext) {
		ref := importImage(ctx, `ENTRYPOINT ["/usr/local/bin/agent"]`, `CMD ["echo", "the image's own command", "-", "0"]`)
		e := newEngine()
		before := api.builds.Load()
		code, out, errOut := runImage(ctx, e, ref, nil, nil, "")
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal("the image's own command\n"))
		Expect(api.builds.Load()).To(Equal(before), "nothing built")
	}, NodeTimeout(2*time.Minute))

	It("gives it a /workspace its user can write, and a working directory", func(ctx SpecContext) {
		ref := importImage(ctx, `ENTRYPOINT ["/usr/local/bin/agent"]`)
		e := newEngine()
		code, out, errOut := runImage(ctx, e, ref, nil, []string{"write"}, "/workspace")
		Expect(code).To(Equal(0), errOut)
		var res map[string]string
		Expect(json.Unmarshal([]byte(out), &res)).To(Succeed())
		Expect(res).To(HaveKeyWithValue("workspace", "ok"), "the seeded volume belongs to the sandbox user")
		Expect(res).To(HaveKeyWithValue("tmp", "ok"))
		Expect(res["root"]).To(ContainSubstring("read-only file system"))

		code, out, errOut = runImage(ctx, e, ref, nil, []string{"pwd"}, "/workspace")
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal("/workspace\n"))
		code, out, errOut = runImage(ctx, e, ref, nil, []string{"pwd"}, "/app")
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal("/app\n"))
	}, NodeTimeout(2*time.Minute))

	It("takes command and args as Kubernetes and Compose do", func(ctx SpecContext) {
		cfg := sandbox.ImageConfig{Entrypoint: []string{"/usr/bin/python3", "-u"}, Cmd: []string{"/agent/main.py"}}
		cmd, note, err := sandbox.AgentCommand("py", nil, nil, cfg)
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd).To(Equal([]string{"/usr/bin/python3", "-u", "/agent/main.py"}), "ENTRYPOINT + CMD")
		Expect(note).To(BeEmpty())

		cmd, note, err = sandbox.AgentCommand("py", nil, []string{"/agent/other.py"}, cfg)
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd).To(Equal([]string{"/usr/bin/python3", "-u", "/agent/other.py"}), "args replace CMD only")
		Expect(note).To(ContainSubstring("set them as agent.command"), "warned: args used to replace the entrypoint too")

		cmd, _, err = sandbox.AgentCommand("py", []string{"/bin/sh", "-c"}, nil, cfg)
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd).To(Equal([]string{"/bin/sh", "-c"}), "a command drops the CMD")

		cmd, note, err = sandbox.AgentCommand("py", nil, []string{"python3", "/agent/agent.py"}, sandbox.ImageConfig{})
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd).To(Equal([]string{"python3", "/agent/agent.py"}), "no ENTRYPOINT: args are the whole command, as in Docker")
		Expect(note).To(BeEmpty())

		_, _, err = sandbox.AgentCommand("empty:1", nil, nil, sandbox.ImageConfig{})
		Expect(err).To(MatchError(sandbox.ErrInvalidSpec))
		Expect(err.Error()).To(ContainSubstring("image empty:1 has no ENTRYPOINT or CMD, and the scenario gives no agent.command"))
	})
})
