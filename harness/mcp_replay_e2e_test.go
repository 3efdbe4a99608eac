package harness_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/sandbox/docker"
)

var _ = Describe("an MCP run replayed from its recording (--mcp-replay)", Ordered, func() {
	var agentBin, serverDir string
	BeforeAll(func(ctx SpecContext) {
		dir, err := os.MkdirTemp("", "ovn-mcp-replay-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		agentBin = filepath.Join(dir, "mcp-agent")
		Expect(harnesstest.Build(ctx, "./examples/mcp/agent", agentBin, fmt.Sprintf("mcp-replay-%d", time.Now().UnixNano()))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			eng := docker.New(dockerCli, docker.Options{})
			if ref, err := eng.ImageRef(ctx, docker.ImageSpec{InitBinary: initBinary, AgentBinary: agentBin}); err == nil {
				Expect(eng.RemoveImage(ctx, ref)).To(Succeed())
			}
		})
		// The servers' binaries live where the spec can take them away.
		serverDir = filepath.Join(dir, "servers")
		Expect(os.MkdirAll(serverDir, 0o755)).To(Succeed())
		Expect(harnesstest.Build(ctx, "./examples/mcp/notes", filepath.Join(serverDir, "notes"), "")).To(Succeed())
		raw, err := os.ReadFile(filepath.Join(harnesstest.ModuleRoot(), "examples", "mcp", "tickets.py"))
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(serverDir, "tickets.py"), raw, 0o644)).To(Succeed())
	}, NodeTimeout(5*time.Minute))

	It("passes offline with the servers' binaries gone, starting no server; a call the recording cannot answer is the first divergence, never sent, and the world's invariants are unknown", func(ctx SpecContext) {
		if _, err := exec.LookPath("python3"); err != nil {
			Skip("python3 is not installed: tickets.py cannot run")
		}
		h := newHarness(ctx, nil)
		scen := func(replace ...string) []string {
			return append([]string{
				"command: [python3, tickets.py]", "command: [python3, " + filepath.Join(serverDir, "tickets.py") + "]",
			}, replace...)
		}
		notes := filepath.Join(serverDir, "notes")
		recorded, err := h.Run(ctx, harness.RunRequest{Scenario: mcpScenario(agentBin, notes, "", scen()...)})
		Expect(err).NotTo(HaveOccurred())
		Expect(recorded.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v", recorded.Reason, recorded.Invariants)
		Expect(titles(tickets(h, recorded.RunID))).To(Equal([]string{"disk full", "cert expired", "backup failed"}))

		Expect(os.RemoveAll(serverDir)).To(Succeed(), "neither server can be started now")

		res, err := h.Run(ctx, harness.RunRequest{Scenario: mcpScenario(agentBin, notes, "", scen()...), MCPReplay: recorded.RunID})
		Expect(err).NotTo(HaveOccurred())
		logs, _ := h.Logs(res.RunID)
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v\n%+v", res.Reason, res.Invariants, logs)
		Expect(res.ReplayDivergence).To(BeNil())
		Expect(res.Effects.Executed).To(Equal(recorded.Effects.Executed))
		Expect(res.Effects.Deduplicated).To(Equal(1), "the call killed in flight is answered from this run's journal")
		Expect(filepath.Join(h.StateDir(), "mcp", "tickets-"+res.RunID)).NotTo(BeAnExistingFile(), "no server was started")
		Expect(res.HistoryDigest).NotTo(BeEmpty())
		run, err := h.History().Load(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(run.Ledger).To(HaveLen(3), "the replayed answers, journaled as the run's ledger")

		// Another task: the third ticket's title is one the recording never saw.
		res, err = h.Run(ctx, harness.RunRequest{Scenario: mcpScenario(agentBin, notes, "", scen("backup failed", "printer jam")...), MCPReplay: recorded.RunID})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).NotTo(Equal(harness.VerdictPass), res.Reason)
		d := res.ReplayDivergence
		Expect(d).NotTo(BeNil(), "%+v", res.Invariants)
		Expect(d.API).To(Equal("tickets"))
		Expect(d.Kind).To(Equal("mcp.tickets.create_ticket"))
		Expect(d.Route).To(Equal("tools/call create_ticket"))
		Expect(d.Recording).To(Equal(recorded.RunID))
		Expect(d.Message).To(ContainSubstring("it was not sent to the server"))
		Expect(invariant(res, harness.InvNoDuplicateEffects).Verdict).To(Equal(harness.VerdictUnknown))

		_, err = h.Run(ctx, harness.RunRequest{Scenario: mcpScenario(agentBin, notes, "", scen()...), MCPReplay: "r-nosuchrun"})
		Expect(err).To(MatchError(harness.ErrNoRecording))
	}, SpecTimeout(4*time.Minute))
})
