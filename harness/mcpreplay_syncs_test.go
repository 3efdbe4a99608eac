package harness

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
)

var _ = Describe("A tools/call answered from a recording (--mcp-replay)", func() {
	It("costs no sync: nothing outside the journal acts on it, so its records wait for the next synced commit", func(ctx SpecContext) {
		state := GinkgoT().TempDir()
		bin := countersBinary()
		scen := countersScenario(bin, scenarios.MCPKeysAgent, "")
		// call makes one keyed call on a fresh run of req (its gateway
		// served, its server started unless replayed) and returns the
		// answer and the journal's syncs while it was made.
		call := func(req RunRequest) (*mcp.CallToolResult, uint64, *liveRun) {
			h, err := Open(ctx, Options{StateDir: state})
			Expect(err).NotTo(HaveOccurred())
			id, err := h.create(ctx, req)
			Expect(err).NotTo(HaveOccurred())
			lr := liveRunOf(h, id)
			cs := lr.mcpSession(ctx, lr.attempt())
			before := h.j.Stats().Syncs
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "counters__add", Arguments: map[string]any{"name": "a", "n": 2},
				Meta: mcp.Meta{scenarios.MCPMetaIdempotencyKey: "add-1"}})
			syncs := h.j.Stats().Syncs - before
			Expect(err).NotTo(HaveOccurred())
			Expect(res.IsError).To(BeFalse())
			Expect(cs.Close()).To(Succeed())
			lr.stop()
			lr.stop = func() {}
			return res, syncs, lr
		}
		live, liveSyncs, recorded := call(RunRequest{Scenario: scen})
		Expect(liveSyncs).To(BeEquivalentTo(2), "live: intent, result (the server's answer rides on the result's sync)")

		replayed, replaySyncs, replay := call(RunRequest{Scenario: scen.ReplayingMCP(recorded.r.rec.ID), MCPReplay: recorded.r.rec.ID})
		Expect(replaySyncs).To(BeZero(), "replayed: intent, the recorded answer's journal and result, all unsynced")
		Expect(value(replayed)).To(Equal(value(live)), "the recorded answer")
		fx := replay.r.fx.effects[history.KeyedID("add-1")]
		Expect(fx).NotTo(BeNil())
		Expect(fx.Intents).To(Equal(1))
		Expect(fx.Status).To(Equal(protocol.StatusDone))
		h, err := Open(ctx, Options{StateDir: state}) // the replay's harness is closed
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(h.Close)
		journaled, err := h.history.Effects(replay.r.rec.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(journaled).To(HaveLen(1))
		Expect(journaled[0].Status).To(Equal(protocol.StatusDone), "in the journal, read by the next harness on the state dir")
		Expect(h.Close()).To(Succeed())

		// The scenario's own mcp.replay does the same, and the run's
		// record names the run it replays.
		own := countersScenario(bin, scenarios.MCPKeysAgent+"\n  replay: "+recorded.r.rec.ID, "")
		Expect(own.MCP.Replay).To(Equal(recorded.r.rec.ID))
		fromYAML, yamlSyncs, yamlRun := call(RunRequest{Scenario: own})
		Expect(yamlSyncs).To(BeZero())
		Expect(value(fromYAML)).To(Equal(value(live)))
		Expect(yamlRun.r.rec.MCPReplay).To(Equal(recorded.r.rec.ID))
	}, SpecTimeout(120e9))
})
