package docker_test

import (
	"github.com/overnight-dev/overnight/sandbox/docker"

	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// labelSuite marks everything one run of this suite creates, so the AfterSuite can prove that
// nothing is left behind, and so tests never touch other people's containers on the shared engine.
const labelSuite = "overnight.test.suite"

var (
	suiteID    string         // unique per suite run
	cli        *client.Client // the real engine, for inspecting what the package did
	api        *countingAPI   // what the suite's engines call through
	initBinary string         // testinit, built for this suite
	image      string         // the sandbox image built in BeforeSuite
	runSeq     atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	benchTeardown()
	os.Exit(code)
}

func TestSandbox(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "sandbox")
}

// countingAPI is the real client, counting image builds.
type countingAPI struct {
	*client.Client
	builds atomic.Int32
}

func (c *countingAPI) ImageBuild(ctx context.Context, r io.Reader, o build.ImageBuildOptions) (build.ImageBuildResponse, error) {
	c.builds.Add(1)
	return c.Client.ImageBuild(ctx, r, o)
}

func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// buildTestInit compiles ../internal/testinit as a static linux/amd64 binary into dir. The nonce
// makes the binary, and so the image hash, unique.
func buildTestInit(ctx context.Context, dir, nonce string) (string, error) {
	out := filepath.Join(dir, "overnight")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -X main.nonce="+nonce, "-o", out, "../internal/testinit")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build testinit: %w\n%s", err, msg)
	}
	return out, nil
}

var _ = BeforeSuite(func(ctx SpecContext) {
	suiteID = randomID()
	var err error
	cli, err = docker.Connect(ctx)
	Expect(err).NotTo(HaveOccurred(), "these tests need the Docker engine")
	DeferCleanup(cli.Close)
	api = &countingAPI{Client: cli}

	initBinary, err = buildTestInit(ctx, GinkgoT().TempDir(), suiteID)
	Expect(err).NotTo(HaveOccurred())

	e := docker.New(api, docker.Options{StateHash: "suite-" + suiteID})
	DeferCleanup(func(ctx context.Context) {
		if image != "" {
			Expect(e.RemoveImage(ctx, image)).To(Succeed())
		}
	})
	image, err = e.EnsureImage(ctx, docker.ImageSpec{InitBinary: initBinary})
	Expect(err).NotTo(HaveOccurred())
	Expect(api.builds.Load()).To(Equal(int32(1)))
}, NodeTimeout(3*time.Minute))

var _ = AfterSuite(func(ctx SpecContext) {
	if cli == nil {
		return
	}
	f := filters.NewArgs(filters.Arg("label", labelSuite+"="+suiteID))
	left, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	Expect(err).NotTo(HaveOccurred())
	Expect(left).To(BeEmpty(), "containers this suite created are left behind")
	vols, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	Expect(err).NotTo(HaveOccurred())
	Expect(vols.Volumes).To(BeEmpty(), "volumes this suite created are left behind")
})
