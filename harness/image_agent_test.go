package harness_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/sandbox"
)

// importAgentImage makes an agent image the way a user without a registry
// does — `docker import` of a root filesystem — holding bin at
// /usr/local/bin/agent, with Dockerfile-style changes (ENTRYPOINT, CMD,
// ENV, WORKDIR). It is removed when the spec ends.
func importAgentImage(ctx context.Context, bin string, changes ...string) string {
	GinkgoHelper()
	data, err := os.ReadFile(bin)
	Expect(err).NotTo(HaveOccurred())
	var rootfs bytes.Buffer
	tw := tar.NewWriter(&rootfs)
	for _, d := range []string{"usr/", "usr/local/", "usr/local/bin/", "app/"} {
		Expect(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755})).To(Succeed())
	}
	Expect(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "usr/local/bin/agent", Mode: 0o755, Size: int64(len(data))})).To(Succeed())
	_, err = tw.Write(data)
	Expect(err).NotTo(HaveOccurred())
	Expect(tw.Close()).To(Succeed())
	ref := fmt.Sprintf("overnight-test-agent:%d", time.Now().UnixNano())
	rc, err := dockerCli.ImageImport(ctx, image.ImportSource{Source: &rootfs, SourceName: "-"}, ref, image.ImportOptions{Changes: changes})
	Expect(err).NotTo(HaveOccurred())
	_, _ = io.Copy(io.Discard, rc)
	Expect(rc.Close()).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		_, err := dockerCli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true})
		Expect(err).NotTo(HaveOccurred())
	})
	return ref
}

// stdout is what attempt n printed.
func stdout(h *harness.Harness, runID string, n int) string {
	GinkgoHelper()
	logs, err := h.Logs(runID)
	Expect(err).NotTo(HaveOccurred())
	Expect(len(logs)).To(BeNumerically(">=", n))
	return logs[n-1].Stdout
}

var _ = Describe("an agent brought in its own image", func() {
	It("runs the image unchanged under the init — no image built per base — through a kill and a resume", func(ctx SpecContext) {
		ref := importAgentImage(ctx, initBinary, `ENTRYPOINT ["/usr/local/bin/agent", "agent"]`, `CMD ["deployer"]`)
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{
			Scenario: deployWith(fmt.Sprintf("  own: {image: %s}\n", ref)), Agent: "own",
			Faults: faults("kill@step:3"),
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Attempts).To(Equal(2))
		Expect(stdout(h, res.RunID, 2)).To(ContainSubstring("starting after step 3"), "its workspace and checkpoint carried over")
		// An image built on the agent's would hold the agent image's layer.
		agentImg, err := dockerCli.ImageInspect(ctx, ref)
		Expect(err).NotTo(HaveOccurred())
		managed, err := dockerCli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelManaged+"=true"))})
		Expect(err).NotTo(HaveOccurred())
		for _, img := range managed {
			info, err := dockerCli.ImageInspect(ctx, img.ID)
			if err != nil {
				continue // another suite removed it meanwhile
			}
			Expect(info.RootFS.Layers).NotTo(ContainElement(agentImg.RootFS.Layers[0]), "no image is built on top of the agent's (%v)", img.RepoTags)
		}
	}, SpecTimeout(3*time.Minute))

	It("gives the agent args as Kubernetes does, a writable HOME and /workspace, and the environment documented", func(ctx SpecContext) {
		ref := importAgentImage(ctx, testBinary, `ENTRYPOINT ["/usr/local/bin/agent"]`, `CMD ["echo", "the image's CMD", "-", "0"]`, `ENV IMAGE_SAYS=hello`)
		Expect(os.Setenv("OPENAI_API_KEY", "sk-never-in-a-sandbox")).To(Succeed())
		DeferCleanup(func() { _ = os.Unsetenv("OPENAI_API_KEY") })
		h := newHarness(ctx, nil)
		probe := func(variant string) string {
			GinkgoHelper()
			scen := deployWith(fmt.Sprintf("  probe: %s\n", variant))
			scen.Limits.MaxAttempts = 1
			res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, Agent: "probe"})
			Expect(err).NotTo(HaveOccurred())
			return stdout(h, res.RunID, 1)
		}
		Expect(probe(fmt.Sprintf("{image: %s}", ref))).To(Equal("the image's CMD\n"), "ENTRYPOINT + CMD")
		env := probe(fmt.Sprintf("{image: %s, args: [env], env: {MINE: yes}}", ref))
		Expect(env).To(ContainSubstring("HOME=/workspace\n"))
		Expect(env).To(ContainSubstring("IMAGE_SAYS=hello\n"), "the image's ENV reaches the agent")
		Expect(env).To(ContainSubstring("MINE=yes\n"))
		Expect(env).To(MatchRegexp(`(?m)^PATH=`))
		Expect(env).To(MatchRegexp(`(?m)^HOSTNAME=`))
		Expect(env).To(ContainSubstring("OVERNIGHT_URL=http://127.0.0.1:7070\n"))
		Expect(env).NotTo(ContainSubstring("sk-never-in-a-sandbox"), "provider keys never enter the sandbox")
		Expect(probe(fmt.Sprintf("{image: %s, args: [pwd]}", ref))).To(Equal("/workspace\n"), "no WORKDIR: /workspace")
		Expect(probe(fmt.Sprintf("{image: %s, args: [write]}", ref))).To(ContainSubstring(`"workspace":"ok"`))
		Expect(probe(fmt.Sprintf("{image: %s, command: [/usr/local/bin/agent, echo], args: [replaced, -, '0']}", ref))).To(Equal("replaced\n"), "command replaces the ENTRYPOINT")

		withDir := importAgentImage(ctx, testBinary, `ENTRYPOINT ["/usr/local/bin/agent"]`, `WORKDIR /app`)
		Expect(probe(fmt.Sprintf("{image: %s, args: [pwd]}", withDir))).To(Equal("/app\n"), "the image's WORKDIR")
	}, SpecTimeout(4*time.Minute))

	It("refuses an image with nothing to run before any attempt", func(ctx SpecContext) {
		ref := importAgentImage(ctx, testBinary)
		h := newHarness(ctx, nil)
		_, err := h.Run(ctx, harness.RunRequest{Scenario: deployWith(fmt.Sprintf("  empty: {image: %s}\n", ref)), Agent: "empty"})
		Expect(err).To(MatchError(sandbox.ErrInvalidSpec))
		Expect(err.Error()).To(ContainSubstring("has no ENTRYPOINT or CMD, and the scenario gives no agent.command"))
		runs, err := h.Runs()
		Expect(err).NotTo(HaveOccurred())
		Expect(runs).To(BeEmpty(), "no run recorded")
	}, SpecTimeout(time.Minute))
})
