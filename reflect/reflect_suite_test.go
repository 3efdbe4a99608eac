package reflect_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/reflect"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/agents"
	"github.com/overnight-dev/overnight/scenarios/builtin"
)

func TestReflect(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Reflect Suite")
}

// These specs run the reflection loop end to end against the real Docker
// engine: the real run, its isolated replays, counterfactual and
// verification are all real containers.
var (
	initBinary string
	dockerCli  *client.Client
)

var _ = BeforeSuite(func(ctx SpecContext) {
	dir, err := os.MkdirTemp("", "ovn-reflect-bin-")
	Expect(err).NotTo(HaveOccurred())
	initBinary = filepath.Join(dir, "overnight-sandbox")
	DeferCleanup(func(ctx SpecContext) {
		if dockerCli != nil {
			eng := docker.New(dockerCli, docker.Options{})
			if ref, err := eng.ImageRef(ctx, docker.ImageSpec{InitBinary: initBinary}); err == nil {
				Expect(eng.RemoveImage(ctx, ref)).To(Succeed())
			}
		}
		Expect(os.RemoveAll(dir)).To(Succeed())
	})
	Expect(harnesstest.Build(ctx, "./cmd/overnight-sandbox", initBinary, fmt.Sprintf("reflect-%d", time.Now().UnixNano()))).To(Succeed())
	dockerCli, err = docker.Connect(ctx)
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(6*time.Minute))

// open opens a harness with the reflection loop on a fresh state dir; after
// the spec, no container of that state dir may be left.
func open(ctx context.Context) *harness.Harness {
	state := GinkgoT().TempDir()
	ext, err := reflect.New(reflect.Options{})
	Expect(err).NotTo(HaveOccurred())
	h, err := harness.Open(ctx, harness.Options{StateDir: state, InitBinary: initBinary, Sandbox: docker.Using(dockerCli), Extension: ext, BuiltinAgents: agents.Names()})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(h.Close()).To(Succeed())
		Expect(harnesstest.Leftovers(ctx, dockerCli, state)).To(BeEmpty(), "containers left behind")
	})
	return h
}

// deployV2 is the built-in deploy-v2 scenario, edited by the replacements
// old, new, ... of its text (none: as it ships).
func deployV2(edits ...string) *scenarios.Scenario {
	raw, ok := builtin.Lookup("deploy-v2")
	Expect(ok).To(BeTrue())
	text := string(raw)
	for i := 0; i+1 < len(edits); i += 2 {
		Expect(text).To(ContainSubstring(edits[i]))
		text = strings.Replace(text, edits[i], edits[i+1], 1)
	}
	file := "builtin:deploy-v2"
	if len(edits) > 0 {
		file = filepath.Join(GinkgoT().TempDir(), "deploy-v2.yaml")
	}
	s, err := scenarios.Parse(file, []byte(text))
	Expect(err).NotTo(HaveOccurred())
	return s
}
