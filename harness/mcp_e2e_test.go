package harness_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/report"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world/mcpworld"
)

// mcpScenario is examples/mcp/scenario.yaml with its agent at bin (or the
// image agentImage, when given) and the notes server at notes.
func mcpScenario(bin, notes, agentImage string, replace ...string) *scenarios.Scenario {
	GinkgoHelper()
	path := filepath.Join(harnesstest.ModuleRoot(), "examples", "mcp", "scenario.yaml")
	raw, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	text := strings.NewReplacer(replace...).Replace(string(raw))
	text = strings.ReplaceAll(text, "./bin/mcp-agent", bin)
	text = strings.ReplaceAll(text, "./bin/notes", notes)
	if agentImage != "" {
		text = strings.Replace(text, "agent:\n  binary: "+bin+"\n", "agent: {image: "+agentImage+"}\n", 1)
		text = strings.Replace(text, "agents:\n  nokeys:\n    binary: "+bin+"\n", "agents:\n  nokeys:\n    image: "+agentImage+"\n", 1)
		text = strings.Replace(text, "args: [--no-keys]", "args: [python3, /agent/client.py, --no-keys]", 1)
	}
	s, err := scenarios.Parse(path, []byte(text))
	Expect(err).NotTo(HaveOccurred())
	return s
}

// ticket is one ticket as tickets.py keeps it in its own file.
type ticket struct {
	ID    int     `json:"id"`
	Title string  `json:"title"`
	Key   *string `json:"key"`
}

// tickets reads tickets.py's own file of run runID.
func tickets(h *harness.Harness, runID string) []ticket {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join(h.StateDir(), "mcp", "tickets-"+runID, "data", "tickets.json"))
	Expect(err).NotTo(HaveOccurred())
	var state struct {
		Tickets []ticket `json:"tickets"`
	}
	Expect(json.Unmarshal(raw, &state)).To(Succeed())
	return state.Tickets
}

func titles(ts []ticket) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Title)
	}
	return out
}

var _ = Describe("an agent whose tools are MCP servers, through the gateway's MCP endpoint", Ordered, func() {
	var agentBin, notesBin string
	BeforeAll(func(ctx SpecContext) {
		dir, err := os.MkdirTemp("", "ovn-mcp-agent-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		agentBin, notesBin = filepath.Join(dir, "mcp-agent"), filepath.Join(dir, "notes")
		Expect(harnesstest.Build(ctx, "./examples/mcp/agent", agentBin, fmt.Sprintf("mcp-e2e-%d", time.Now().UnixNano()))).To(Succeed())
		Expect(harnesstest.Build(ctx, "./examples/mcp/notes", notesBin, "")).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			eng := docker.New(dockerCli, docker.Options{})
			if ref, err := eng.ImageRef(ctx, docker.ImageSpec{InitBinary: initBinary, AgentBinary: agentBin}); err == nil {
				Expect(eng.RemoveImage(ctx, ref)).To(Succeed())
			}
		})
	}, NodeTimeout(5*time.Minute))

	It("killed after the server opened its second ticket, passes when it keys its calls: tickets.py's own file has each ticket once", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: mcpScenario(agentBin, notesBin, "")})
		Expect(err).NotTo(HaveOccurred())
		logs, _ := h.Logs(res.RunID)
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v\n%+v", res.Reason, res.Invariants, logs)
		Expect(res.Attempts).To(Equal(2), "the attempt killed, and the one that resumed: %+v\n%s", res.Faults, logs)
		Expect(res.Effects.Executed).To(Equal(3))
		Expect(res.Effects.Deduplicated).To(Equal(1), "the call killed in flight was answered from the journal")
		Expect(res.Effects.Duplicates).To(BeZero())
		Expect(stderr(h, res.RunID, 2)).To(BeEmpty())

		ts := tickets(h, res.RunID)
		Expect(titles(ts)).To(Equal([]string{"disk full", "cert expired", "backup failed"}), "the server's own state: each ticket once")
		Expect(*ts[1].Key).To(Equal("k/ticket-1"), "the effect's id, from the agent's key, reached the server in _meta")

		run, err := h.History().Load(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		var kinds []string
		for _, eff := range run.Effects {
			kinds = append(kinds, eff.Kind+" "+eff.Key)
		}
		Expect(kinds).To(Equal([]string{"mcp.tickets.create_ticket ticket-0", "mcp.tickets.create_ticket ticket-1", "mcp.tickets.create_ticket ticket-2"}))
		Expect(run.Ledger).To(HaveLen(3), "the journal of the server's answers, read with the server gone")
		Expect(filepath.Join(h.StateDir(), "mcp", "tickets-"+res.RunID, "server.log")).To(BeAnExistingFile(), "the server's stderr is kept")
	}, SpecTimeout(3*time.Minute))

	It("fails with no-duplicate-effects when it sends no keys and starts over: tickets.py's own file shows the duplicates", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: mcpScenario(agentBin, notesBin, ""), Agent: "nokeys"})
		Expect(err).NotTo(HaveOccurred())
		logs, _ := h.Logs(res.RunID)
		Expect(res.Verdict).To(Equal(harness.VerdictFail), "%s\n%+v", res.Reason, logs)
		dup := invariant(res, harness.InvNoDuplicateEffects)
		Expect(dup.Verdict).To(Equal(harness.VerdictFail))
		Expect(dup.Detail).To(ContainSubstring(`mcp.tickets.create_ticket`))
		Expect(res.Effects.Duplicates).To(Equal(2))
		Expect(res.Effects.Unkeyed).To(Equal(5), "two calls before the kill, three after")
		Expect(titles(tickets(h, res.RunID))).To(Equal([]string{"disk full", "cert expired", "disk full", "cert expired", "backup failed"}),
			"the server's own file agrees: two tickets opened twice")
	}, SpecTimeout(3*time.Minute))

	It("hears notifications/tools/list_changed through the SDK's ToolListChangedHandler when mcp-tool-gone fires, and finds the tool gone", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		scen := mcpScenario(agentBin, notesBin, "",
			"faults: [kill@effect:2]", "faults: [mcp-tool-gone:tickets__close_ticket@step:1]",
			"agents:\n  nokeys:\n", "agents:\n  watch:\n    binary: ./bin/mcp-agent\n    args: [--watch-tools]\n  nokeys:\n")
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, Agent: "watch"})
		Expect(err).NotTo(HaveOccurred())
		logs, _ := h.Logs(res.RunID)
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v", res.Reason, logs)
		Expect(logs[0].Stdout).To(And(
			ContainSubstring("notified: notifications/tools/list_changed"),
			ContainSubstring("calling tickets__close_ticket: isError true: tool tickets__close_ticket is gone"),
			ContainSubstring("tools gone: [tickets__close_ticket]")), logs[0].Stderr)
		run, err := h.History().Load(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		changes := history.MCPListChanges(run.Events)
		Expect(changes).To(HaveLen(1), "journaled: %+v", run.Events)
		Expect(changes[0].Stream).To(Equal("subscriptions/listen"))
		Expect(changes[0].Changed).To(Equal([]string{"tickets__close_ticket gone (mcp-tool-gone:tickets__close_ticket@step:1)"}))
	}, SpecTimeout(3*time.Minute))

	It("judges an MCP tool change met only by a later call of that tool: a tool it never calls again is not met, a tool it calls is, and the refused calls are in the report", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		never := mcpScenario(agentBin, notesBin, "", "faults: [kill@effect:2]", "faults: [mcp-tool-gone:tickets__close_ticket@step:1]")
		res, err := h.Run(ctx, harness.RunRequest{Scenario: never})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Effects.Executed).To(Equal(3), "the agent opened its tickets after the change: effects of another tool")
		Expect(res.Faults[0].Met).To(BeFalse())
		Expect(res.Faults[0].MetDetail).To(Equal("the agent never called tickets__close_ticket after it changed (calls of other tools do not meet the change)"))
		fired := invariant(res, harness.InvFaultsFired)
		Expect(fired.Verdict).To(Equal(harness.VerdictUnknown), fired.Detail)
		Expect(res.Verdict).To(Equal(harness.VerdictUnknown), res.Reason)

		// The tool it calls next vanishes: its third call is refused, and
		// the agent reports failure (done, outcome failure).
		called := mcpScenario(agentBin, notesBin, "", "faults: [kill@effect:2]", "faults: [mcp-tool-gone:tickets__create_ticket@step:2]")
		res, err = h.Run(ctx, harness.RunRequest{Scenario: called})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Outcome).To(Equal("failure"), res.Reason)
		Expect(res.Faults[0].Met).To(BeTrue(), res.Faults[0].MetDetail)
		Expect(res.Faults[0].MetDetail).To(Equal("the agent called tickets__create_ticket once after it changed (1 refused)"))
		Expect(invariant(res, harness.InvFaultsFired).Verdict).To(Equal(harness.VerdictPass))
		Expect(res.MCP.Refused).To(Equal(1))
		Expect(res.MCP.Refusals).To(HaveLen(1))
		Expect(res.MCP.Refusals[0]).To(gstruct.MatchFields(gstruct.IgnoreExtras, gstruct.Fields{"Tool": Equal("tickets__create_ticket"), "Key": Equal("ticket-2"),
			"Fault": Equal("mcp-tool-gone:tickets__create_ticket@step:2"), "Attempt": Equal(1)}))
		Expect(titles(tickets(h, res.RunID))).To(Equal([]string{"disk full", "cert expired"}), "the server never saw a refused call")

		full, err := h.History().Full(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		var md bytes.Buffer
		Expect(report.RunMarkdown(&md, full)).To(Succeed())
		Expect(md.String()).To(ContainSubstring("## MCP calls refused"))
		Expect(md.String()).To(ContainSubstring("| tickets__create_ticket | 1 | ticket-2 | mcp-tool-gone:tickets__create_ticket@step:2 | tool tickets__create_ticket is gone"))
	}, SpecTimeout(4*time.Minute))

	It("refuses a server that does not speak MCP before the first attempt, naming it and what it said", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		scen := mcpScenario(agentBin, notesBin, "", "command: [python3, tickets.py]", `command: [sh, -c, "echo 'this is not MCP' >&2; echo hello; sleep 30"]`)
		_, err := h.Run(ctx, harness.RunRequest{Scenario: scen})
		Expect(err).To(MatchError(mcpworld.ErrServer))
		Expect(err.Error()).To(And(ContainSubstring("MCP server tickets"), ContainSubstring("initialize"), ContainSubstring("this is not MCP")))
		runs, err := h.History().Runs()
		Expect(err).NotTo(HaveOccurred())
		Expect(runs).To(BeEmpty(), "nothing was recorded")
	}, SpecTimeout(2*time.Minute))

	Context("with client.py, a Python MCP client of the standard library alone, as the agent", func() {
		var tag string
		BeforeAll(func(ctx SpecContext) {
			const base = "overnight-test/debian-python:bookworm"
			if _, err := dockerCli.ImageInspect(ctx, base); err != nil {
				Skip("the Debian+Python image " + base + " is not on the engine: run `make python-image` as root once")
			}
			data, err := os.ReadFile(filepath.Join(harnesstest.ModuleRoot(), "examples", "mcp", "client.py"))
			Expect(err).NotTo(HaveOccurred())
			dockerfile := []byte("FROM " + base + "\nCOPY client.py /agent/\nENV PYTHONUNBUFFERED=1\nCMD [\"python3\", \"/agent/client.py\"]\n")
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for name, b := range map[string][]byte{"Dockerfile": dockerfile, "client.py": data} {
				Expect(tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b))})).To(Succeed())
				_, err = tw.Write(b)
				Expect(err).NotTo(HaveOccurred())
			}
			Expect(tw.Close()).To(Succeed())
			tag = fmt.Sprintf("overnight-test/mcp-client-py:%d", time.Now().UnixNano())
			resp, err := dockerCli.ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true, Version: build.BuilderV1})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) {
				_, err := dockerCli.ImageRemove(ctx, tag, image.RemoveOptions{Force: true, PruneChildren: true})
				Expect(err).NotTo(HaveOccurred())
			})
			body, _ := io.ReadAll(resp.Body)
			Expect(resp.Body.Close()).To(Succeed())
			Expect(string(body)).NotTo(ContainSubstring(`"errorDetail"`), "docker build of client.py's image")
		}, NodeTimeout(5*time.Minute))

		It("passes with keys through the kill, and fails no-duplicate-effects without: the server's file agrees both times", func(ctx SpecContext) {
			h := newHarness(ctx, nil)
			res, err := h.Run(ctx, harness.RunRequest{Scenario: mcpScenario(agentBin, notesBin, tag)})
			Expect(err).NotTo(HaveOccurred())
			logs, _ := h.Logs(res.RunID)
			Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v\n%+v", res.Reason, res.Invariants, logs)
			Expect(res.Effects.Deduplicated).To(Equal(1))
			Expect(titles(tickets(h, res.RunID))).To(Equal([]string{"disk full", "cert expired", "backup failed"}))

			res, err = h.Run(ctx, harness.RunRequest{Scenario: mcpScenario(agentBin, notesBin, tag), Agent: "nokeys"})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Verdict).To(Equal(harness.VerdictFail), res.Reason)
			Expect(invariant(res, harness.InvNoDuplicateEffects).Verdict).To(Equal(harness.VerdictFail))
			Expect(tickets(h, res.RunID)).To(HaveLen(5))
		}, SpecTimeout(4*time.Minute))

		It("reads notifications/tools/list_changed on its session's GET stream when mcp-tool-gone fires, and finds the tool gone", func(ctx SpecContext) {
			h := newHarness(ctx, nil)
			scen := mcpScenario(agentBin, notesBin, "",
				"faults: [kill@effect:2]", "faults: [mcp-tool-gone:tickets__close_ticket@step:1]",
				"agents:\n  nokeys:\n", "agents:\n  watch:\n    image: "+tag+"\n    args: [python3, /agent/client.py, --watch-tools]\n  nokeys:\n")
			res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, Agent: "watch"})
			Expect(err).NotTo(HaveOccurred())
			logs, _ := h.Logs(res.RunID)
			Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v", res.Reason, logs)
			Expect(res.Attempts).To(Equal(1))
			Expect(logs[0].Stdout).To(And(
				ContainSubstring("notified: notifications/tools/list_changed"),
				ContainSubstring("tools gone: ['tickets__close_ticket']"),
				ContainSubstring("calling tickets__close_ticket: isError True: tool tickets__close_ticket is gone")), logs[0].Stderr)

			run, err := h.History().Load(ctx, res.RunID)
			Expect(err).NotTo(HaveOccurred())
			changes := history.MCPListChanges(run.Events)
			Expect(changes).To(HaveLen(1), "journaled: %+v", run.Events)
			Expect(changes[0].Stream).To(Equal("GET"))
			Expect(changes[0].Session).NotTo(BeEmpty())
			Expect(changes[0].Changed).To(Equal([]string{"tickets__close_ticket gone (mcp-tool-gone:tickets__close_ticket@step:1)"}))
			Expect(titles(tickets(h, res.RunID))).To(Equal([]string{"disk full", "cert expired", "backup failed"}))
		}, SpecTimeout(3*time.Minute))
	})
})
