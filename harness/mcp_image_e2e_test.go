package harness_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world/mcpworld"
)

// imageMCPScenario is a scenario of one MCP server, counters, run as a
// container of image (port 8080, path /mcp: the defaults).
func imageMCPScenario(image string) *scenarios.Scenario {
	GinkgoHelper()
	text := fmt.Sprintf(`apiVersion: overnight/v1
kind: Scenario
name: counters-image
agent: {builtin: deployer}
mcp:
  servers:
    - name: counters
      image: %q
      env: {COUNTERS_STATE: "{{data_dir}}/counters.json"}
limits: {horizon: 10d}
`, image)
	sc, err := scenarios.Parse(filepath.Join(GinkgoT().TempDir(), "counters-image.yaml"), []byte(text))
	Expect(err).NotTo(HaveOccurred())
	return sc
}

// imageMCPOptions are a harness's options on the real engine, its state
// dir the spec's; the cleanup checks no container of it is left.
func imageMCPOptions() harness.Options {
	return harness.Options{InitBinary: initBinary, Sandbox: docker.Using(dockerCli),
		Logger: slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelDebug}))}
}

var _ = Describe("Image MCP servers: an MCP server the harness runs per run as a container beside the sandbox", Ordered, func() {
	var tag string
	BeforeAll(func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		bin := filepath.Join(dir, "mcpcounters")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./testdata/mcpcounters")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		tag = fmt.Sprintf("overnight-test/counters-mcp:%d", GinkgoParallelProcess()*1_000_000_000+int(time.Now().UnixNano()%1_000_000_000))
		DeferCleanup(func(ctx SpecContext) { Expect(harnesstest.RemoveImage(ctx, dockerCli, tag)).To(Succeed()) })
		Expect(harnesstest.BinaryImage(ctx, dockerCli, bin, tag, 8080)).To(Succeed())
	}, NodeTimeout(3*time.Minute))

	It("starts it labelled and out of the agent's reach, fronts its tools, starts it again on its data when it dies, and removes it at the run's end keeping its log", func(ctx SpecContext) {
		live := harness.StartLiveMCPOf(imageMCPScenario(tag), imageMCPOptions())
		state, runID := live.Harness().StateDir(), live.RunID()
		DeferCleanup(func(ctx SpecContext) {
			Expect(harnesstest.Leftovers(ctx, dockerCli, state)).To(BeEmpty(), "containers left behind by the run")
		})

		// One container, the run's, labelled like every container; on the
		// default bridge (no sandbox has a network), published on the
		// host's loopback alone.
		ids, err := harnesstest.Containers(ctx, dockerCli, state)
		Expect(err).NotTo(HaveOccurred())
		Expect(ids).To(HaveLen(1))
		info, err := dockerCli.ContainerInspect(ctx, ids[0])
		Expect(err).NotTo(HaveOccurred())
		Expect(info.Config.Labels).To(HaveKeyWithValue(sandbox.LabelManaged, "true"))
		Expect(info.Config.Labels).To(HaveKeyWithValue(sandbox.LabelRun, runID))
		Expect(info.Config.Labels).To(HaveKey(sandbox.LabelState))
		Expect(info.Config.Labels).To(HaveKeyWithValue(docker.LabelService, "mcp.counters"))
		Expect(string(info.HostConfig.NetworkMode)).To(Equal("bridge"))
		for _, binds := range info.HostConfig.PortBindings {
			for _, b := range binds {
				Expect(b.HostIP).To(Equal("127.0.0.1"))
			}
		}
		Expect(info.Config.Env).To(ContainElements("OVERNIGHT_MCP_ADDR=0.0.0.0:8080", "COUNTERS_STATE=/data/counters.json"))

		cs := live.Session(ctx, live.Attempt())
		tools, err := cs.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, t := range tools.Tools {
			names = append(names, t.Name)
		}
		Expect(names).To(Equal([]string{"counters__add", "counters__calls", "counters__get", "counters__pay", "counters__set"}))

		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "counters__add", Arguments: map[string]any{"name": "a", "n": 2},
			Meta: mcp.Meta{scenarios.MCPMetaIdempotencyKey: "add-1"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.IsError).To(BeFalse())
		Expect(res.StructuredContent).To(HaveKeyWithValue("value", BeNumerically("==", 2)))

		// The server's own state, written in the container to its data
		// dir under the state dir, as the harness's user.
		file := filepath.Join(live.DataDir("counters"), "counters.json")
		raw, err := os.ReadFile(file)
		Expect(err).NotTo(HaveOccurred())
		var st struct {
			Counters map[string]int `json:"counters"`
			Calls    []struct {
				Key string `json:"key"`
			} `json:"calls"`
		}
		Expect(json.Unmarshal(raw, &st)).To(Succeed())
		Expect(st.Counters).To(Equal(map[string]int{"a": 2}))
		Expect(st.Calls).To(HaveLen(1))
		Expect(st.Calls[0].Key).To(Equal("k/add-1"), "the effect's id reached the server in _meta")
		fi, err := os.Stat(file)
		Expect(err).NotTo(HaveOccurred())
		Expect(fi.Sys()).To(HaveField("Uid", BeEquivalentTo(os.Getuid())))

		// The server dies after it acted on a call ("die:" counters): the
		// call is in doubt; the next call starts it again on its data.
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "counters__add", Arguments: map[string]any{"name": "die:x", "n": 1},
			Meta: mcp.Meta{scenarios.MCPMetaIdempotencyKey: "die-1"}})
		Expect(err).To(MatchError(ContainSubstring("unknown")))
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "counters__add", Arguments: map[string]any{"name": "a", "n": 3},
			Meta: mcp.Meta{scenarios.MCPMetaIdempotencyKey: "add-2"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.StructuredContent).To(HaveKeyWithValue("value", BeNumerically("==", 5)), "its counters survived on its data dir")
		ids2, err := harnesstest.Containers(ctx, dockerCli, state)
		Expect(err).NotTo(HaveOccurred())
		Expect(ids2).To(HaveLen(1))
		Expect(ids2[0]).NotTo(Equal(ids[0]), "a new container")

		// The run's end removes it; its output is kept in server.log.
		live.Stop()
		left, err := harnesstest.Containers(ctx, dockerCli, state)
		Expect(err).NotTo(HaveOccurred())
		Expect(left).To(BeEmpty())
		logRaw, err := os.ReadFile(filepath.Join(filepath.Dir(live.DataDir("counters")), "server.log"))
		Expect(err).NotTo(HaveOccurred())
		log := string(logRaw)
		Expect(strings.Count(log, "--- overnight: starting image "+tag+" for run "+runID)).To(Equal(2), log)
		Expect(log).To(ContainSubstring("counters: serving MCP on http://0.0.0.0:8080/mcp"))
		Expect(log).To(ContainSubstring("its container exited (code 1)"))
		Expect(log).To(ContainSubstring("stopped by the harness"))
	}, SpecTimeout(3*time.Minute))

	It("refuses an image that is not on the engine before the run exists, naming the server and the image", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		_, err := h.Run(ctx, harness.RunRequest{Scenario: imageMCPScenario("overnight-test/no-such-mcp:1")})
		Expect(err).To(MatchError(sandbox.ErrImageNotFound))
		Expect(err).To(MatchError(mcpworld.ErrServer))
		Expect(err.Error()).To(And(ContainSubstring("MCP server counters (image overnight-test/no-such-mcp:1)"),
			ContainSubstring("image overnight-test/no-such-mcp:1 is not on the engine, which pulls nothing")))
		runs, err := h.History().Runs()
		Expect(err).NotTo(HaveOccurred())
		Expect(runs).To(BeEmpty())
	}, SpecTimeout(time.Minute))

	It("refuses a container that answers HTTP but not MCP before the run exists, with the end of its output, and removes it", func(ctx SpecContext) {
		notMCP := tag + "-world"
		DeferCleanup(func(ctx SpecContext) { Expect(harnesstest.RemoveImage(ctx, dockerCli, notMCP)).To(Succeed()) })
		Expect(harnesstest.WorldImage(ctx, dockerCli, overnightBinary, notMCP, "cloud", 8080)).To(Succeed())
		h := newHarness(ctx, nil)
		_, err := h.Run(ctx, harness.RunRequest{Scenario: imageMCPScenario(notMCP)})
		Expect(err).To(MatchError(mcpworld.ErrServer))
		Expect(err.Error()).To(And(ContainSubstring("MCP server counters (image "+notMCP+")"), ContainSubstring("initialize"),
			ContainSubstring("serving world cloud")))
		runs, err := h.History().Runs()
		Expect(err).NotTo(HaveOccurred())
		Expect(runs).To(BeEmpty())
		left, err := harnesstest.Containers(ctx, dockerCli, h.StateDir())
		Expect(err).NotTo(HaveOccurred())
		Expect(left).To(BeEmpty())
	}, SpecTimeout(2*time.Minute))
})
