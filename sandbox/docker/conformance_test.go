package docker_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/sandbox/sandboxtest"
)

// buildInit compiles the sandbox binary of pkg — overnight-sandbox, the
// one the harness injects, or the full overnight CLI, which serves the
// same sandbox side (the kit's probes are their hidden probe subcommand) —
// into a temporary dir; its sandbox image goes with the spec.
func buildInit(ctx context.Context, pkg string) string {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-X main.buildNonce="+suiteID, "-o", bin, "../../cmd/"+pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build %s: %s", pkg, out)
	DeferCleanup(func(ctx SpecContext) {
		eng := docker.New(cli, docker.Options{})
		if ref, err := eng.ImageRef(ctx, docker.ImageSpec{InitBinary: bin}); err == nil {
			Expect(eng.RemoveImage(ctx, ref)).To(Succeed())
		}
	})
	return bin
}

// bare is the Docker backend with every optional capability hidden: its
// sandboxes are plain sandbox.Sandbox values. declared is what its type
// says it has anyway.
type bare struct {
	sandbox.Backend
	declared []sandbox.Capability
}

type plain struct{ sandbox.Sandbox }

func (b bare) Type() sandbox.Type {
	t := b.Backend.Type()
	t.Name, t.Capabilities = "bare", b.declared
	return t
}

func (b bare) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := b.Backend.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return plain{sb}, nil
}

func bareType(declared ...sandbox.Capability) sandbox.Type {
	return sandbox.Type{Name: "bare", Capabilities: declared, Open: func(ctx context.Context, cfg sandbox.Config) (sandbox.Backend, error) {
		b, err := docker.Using(cli).Open(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return bare{Backend: b, declared: declared}, nil
	}}
}

var _ = Describe("the sandbox conformance kit", Ordered, func() {
	bins := map[string]string{}
	BeforeAll(func(ctx SpecContext) {
		for _, pkg := range []string{"overnight-sandbox", "overnight"} {
			bins[pkg] = buildInit(ctx, pkg)
		}
	}, NodeTimeout(5*time.Minute))

	// The slim binary the harness injects and the full CLI a user may
	// inject instead (--init-binary) dispatch one sandbox side: every rule
	// — init, exec, probe, a standby a cold start cannot be told from —
	// holds under both.
	DescribeTable("passes on the Docker backend, every rule and every capability", func(ctx SpecContext, pkg string) {
		results := sandboxtest.Check(ctx, sandboxtest.Config{Type: docker.Using(cli), InitBinary: bins[pkg]})
		Expect(results).To(HaveLen(len(sandboxtest.Rules())))
		for _, r := range results {
			GinkgoWriter.Println(r)
			Expect(r.Skipped).To(BeFalse(), "Docker declares every capability: %s", r)
		}
		Expect(sandboxtest.Failed(results)).To(BeEmpty())
	},
		Entry("with overnight-sandbox as init", SpecTimeout(5*time.Minute), "overnight-sandbox"),
		Entry("with the full overnight as init", SpecTimeout(5*time.Minute), "overnight"),
	)

	It("fails a backend that declares a capability its sandboxes do not have, and skips what it does not declare", func(ctx SpecContext) {
		results := sandboxtest.Check(ctx, sandboxtest.Config{Type: bareType(sandbox.CapFreeze), InitBinary: bins["overnight-sandbox"]})
		var lines []string
		for _, r := range results {
			lines = append(lines, r.String())
		}
		text := strings.Join(lines, "\n")
		GinkgoWriter.Println(text)
		failed := map[string]string{}
		for _, r := range sandboxtest.Failed(results) {
			failed[r.Rule] = r.Detail
		}
		Expect(failed).To(HaveKeyWithValue("type", ContainSubstring("freeze: declared true, implemented false")))
		Expect(failed).To(HaveKeyWithValue("freeze", ContainSubstring("no sandbox.Freezer")))
		Expect(text).To(MatchRegexp(`(?m)^SKIP  link `), "what it does not declare is skipped")
		Expect(text).To(MatchRegexp(`(?m)^PASS  signal `), "the contract's own rules still pass")
	}, SpecTimeout(5*time.Minute))
})
