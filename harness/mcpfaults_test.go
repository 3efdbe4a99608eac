package harness

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// keyed calls name with args under key, returning the answer and the error.
func keyed(ctx context.Context, cs *mcp.ClientSession, name, key string, args map[string]any) (*mcp.CallToolResult, error) {
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: mcp.Meta{scenarios.MCPMetaIdempotencyKey: key}})
}

// effectByKey is the journaled effect of key.
func (lr *liveRun) effectByKey(key string) history.EffectRecord {
	GinkgoHelper()
	for _, e := range lr.effects() {
		if e.Key == key {
			return e
		}
	}
	Fail("no effect with key " + key)
	return history.EffectRecord{}
}

// refusals are the run's journaled refused tools/calls.
func (lr *liveRun) refusals() []history.MCPRefusal {
	GinkgoHelper()
	events, err := lr.h.history.Events(lr.r.rec.ID)
	Expect(err).NotTo(HaveOccurred())
	return history.MCPRefusals(events)
}

// mcpCounts are the run's MCP counts as its result will show them.
func (lr *liveRun) mcpCounts() history.MCPCounts {
	GinkgoHelper()
	events, err := lr.h.history.Events(lr.r.rec.ID)
	Expect(err).NotTo(HaveOccurred())
	c := mcpCounts(lr.effects(), events)
	Expect(c).NotTo(BeNil())
	return *c
}

// faultRecord is the run's journaled record of its only fault.
func (lr *liveRun) faultRecord() history.FaultRecord {
	GinkgoHelper()
	recs, err := lr.h.history.Faults(lr.r.rec.ID)
	Expect(err).NotTo(HaveOccurred())
	Expect(recs).To(HaveLen(1))
	return recs[0]
}

// finished ends the run as the harness does (its faults settled from
// the journal, the invariants judged, the result journaled) and returns
// its result and the faults-fired invariant's judgement.
func (lr *liveRun) finished(ctx context.Context) (*Result, InvariantResult) {
	GinkgoHelper()
	res, err := lr.r.finish(ctx, endState{})
	Expect(err).NotTo(HaveOccurred())
	for _, inv := range res.Invariants {
		if inv.Name == InvFaultsFired {
			return res, inv
		}
	}
	Fail("the run's result has no faults-fired invariant")
	return nil, InvariantResult{}
}

var _ = Describe("MCP faults through the gateway, against a real MCP server process", func() {
	var bin string
	BeforeEach(func() { bin = countersBinary() })

	run := func(fault string) *liveRun {
		return liveMCPRun(countersScenario(bin, "agent", "faults: ["+fault+"]\n"), Options{})
	}

	It("mcp-error answers the tool's error result without reaching the server; a retry under the key runs it", func(ctx SpecContext) {
		lr := run("mcp-error:counters__add@effect:2")
		cs := lr.mcpSession(ctx, lr.attempt())
		tool(ctx, cs, "counters__get", map[string]any{"name": "a"}) // effect 1: a read, outside the scope anyway
		res, err := keyed(ctx, cs, "counters__add", "k1", map[string]any{"name": "a", "n": 1})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.IsError).To(BeTrue())
		Expect(text(res)).To(ContainSubstring("fault mcp-error:counters__add@effect:2"))
		_, calls := lr.countersState()
		Expect(calls).To(BeEmpty(), "the server never saw it")
		e := lr.effectByKey("k1")
		Expect(e.Status).To(Equal(protocol.StatusFailed))
		Expect(e.Error.Transient).To(BeTrue())
		Expect(e.Executions).To(Equal(0))

		res, err = keyed(ctx, cs, "counters__add", "k1", map[string]any{"name": "a", "n": 1})
		Expect(err).NotTo(HaveOccurred())
		Expect(value(res)).To(BeEquivalentTo(1))
		counters, calls := lr.countersState()
		Expect(counters["a"]).To(Equal(1))
		Expect(calls).To(HaveLen(1))
		f := lr.faultRecord()
		Expect(f.Applied).To(BeTrue())
		Expect(f.Met).To(BeTrue(), f.MetDetail)
	})

	It("mcp-error with a scope leaves the calls outside it alone, and waits for one inside it", func(ctx SpecContext) {
		lr := run("mcp-error:counters__set@effect:1")
		cs := lr.mcpSession(ctx, lr.attempt())
		Expect(value(tool(ctx, cs, "counters__add", map[string]any{"name": "a", "n": 2}))).To(BeEquivalentTo(2))
		res := tool(ctx, cs, "counters__set", map[string]any{"name": "a", "value": 7})
		Expect(res.IsError).To(BeTrue())
		Expect(value(tool(ctx, cs, "counters__set", map[string]any{"name": "a", "value": 7}))).To(BeEquivalentTo(7), "a one-shot fault is spent")
	})

	It("mcp-rpc-error answers a JSON-RPC internal error without reaching the server", func(ctx SpecContext) {
		lr := run("mcp-rpc-error:counters@effect:1")
		cs := lr.mcpSession(ctx, lr.attempt())
		_, err := keyed(ctx, cs, "counters__add", "k1", map[string]any{"name": "a", "n": 1})
		Expect(err).To(HaveOccurred())
		var rpc *jsonrpc.Error
		Expect(errors.As(err, &rpc)).To(BeTrue(), "%v", err)
		Expect(rpc.Code).To(BeEquivalentTo(jsonrpc.CodeInternalError))
		Expect(rpc.Message).To(ContainSubstring("fault mcp-rpc-error:counters@effect:1"))
		_, calls := lr.countersState()
		Expect(calls).To(BeEmpty())
		Expect(lr.effectByKey("k1").Error.Code).To(Equal(CodeMCPRPCError))
	})

	It("mcp-timeout lets the server act and loses its answer: unknown, reconciled on a retry under the key", func(ctx SpecContext) {
		lr := run("mcp-timeout@effect:1")
		cs := lr.mcpSession(ctx, lr.attempt())
		start := time.Now()
		_, err := keyed(ctx, cs, "counters__add", "k1", map[string]any{"name": "a", "n": 1})
		held := time.Since(start)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("did not answer in time (fault mcp-timeout@effect:1)"))
		Expect(held).To(BeNumerically(">=", chaos.MaxMCPTimeout), "held")
		Expect(lr.effectByKey("k1").Status).To(Equal(protocol.StatusUnknown))
		_, calls := lr.countersState()
		Expect(calls).To(HaveLen(1), "the server acted")

		res, err := keyed(ctx, cs, "counters__add", "k1", map[string]any{"name": "a", "n": 1})
		Expect(err).NotTo(HaveOccurred())
		Expect(value(res)).To(BeEquivalentTo(1), "what the server did, from the world's journal")
		Expect(res.Meta[scenarios.MCPMetaReplayed]).To(BeTrue())
		counters, calls := lr.countersState()
		Expect(counters["a"]).To(Equal(1))
		Expect(calls).To(HaveLen(1), "not executed twice")
		Expect(lr.effectByKey("k1").Reconciled).To(BeTrue())
	})

	It("mcp-slow moves the run's virtual clock on by its delay for each call it hits", func(ctx SpecContext) {
		lr := run("mcp-slow:2h:counters__add@effect:1/1d")
		tok := lr.attempt()
		cs := lr.mcpSession(ctx, tok)
		before, err := lr.sdk(tok).Now(ctx)
		Expect(err).NotTo(HaveOccurred())
		tool(ctx, cs, "counters__add", map[string]any{"name": "a", "n": 1})
		tool(ctx, cs, "counters__get", map[string]any{"name": "a"})
		tool(ctx, cs, "counters__add", map[string]any{"name": "a", "n": 1})
		after, err := lr.sdk(tok).Now(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(after.Sub(before)).To(BeNumerically(">=", 4*time.Hour), "two adds, 2h each")
		Expect(after.Sub(before)).To(BeNumerically("<", 5*time.Hour), "the read was not slowed")
		counters, _ := lr.countersState()
		Expect(counters["a"]).To(Equal(2))
	})

	It("mcp-crash SIGKILLs the stdio server after it acted on the call: unknown, and the server is started again", func(ctx SpecContext) {
		lr := run("mcp-crash:counters@effect:1")
		cs := lr.mcpSession(ctx, lr.attempt())
		s, _ := lr.r.scen.MCPServer("counters")
		dir := mcpDir(lr.h.state, lr.r.rec.ID, s)
		_, err := keyed(ctx, cs, "counters__add", "k1", map[string]any{"name": "a", "n": 1})
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("was killed (fault mcp-crash:counters@effect:1)"))
		_, calls := lr.countersState()
		Expect(calls).To(HaveLen(1), "the server received and acted on the call")
		Expect(lr.effectByKey("k1").Status).To(Equal(protocol.StatusUnknown))

		_, err = keyed(ctx, cs, "counters__add", "k1", map[string]any{"name": "a", "n": 1})
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(CodeInDoubt), "add is not idempotent: a retry under its key is not run")
		res, err := keyed(ctx, cs, "counters__add", "k2", map[string]any{"name": "a", "n": 1})
		Expect(err).NotTo(HaveOccurred())
		Expect(value(res)).To(BeEquivalentTo(2), "the server was started again on its data")
		log, err := os.ReadFile(filepath.Join(dir, "server.log"))
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Count(string(log), "--- overnight: starting")).To(Equal(2), string(log))
		Expect(lr.faultRecord().Met).To(BeTrue())
	})

	It("mcp-crash with a lookup for the tool: the call in doubt is reconciled through the server's read-only tool, done, never run twice", func(ctx SpecContext) {
		text := strings.Replace(countersScenarioYAML(bin, "agent", "faults: [mcp-crash:counters__add@effect:1]\n"), "  keys: agent\n",
			"      lookups:\n        add: {tool: calls, found: 'response.structuredContent.calls.exists(c, c.key == key)'}\n  keys: agent\n", 1)
		scen, err := scenarios.Parse(filepath.Join(GinkgoT().TempDir(), "counters.yaml"), []byte(text))
		Expect(err).NotTo(HaveOccurred())
		Expect(scen.MCPServers()[0].Lookups).To(HaveKey("add"))
		lr := liveMCPRun(scen, Options{})
		cs := lr.mcpSession(ctx, lr.attempt())
		_, err = keyed(ctx, cs, "counters__add", "k1", map[string]any{"name": "a", "n": 1})
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("was killed (fault mcp-crash:counters__add@effect:1)"))
		Expect(lr.effectByKey("k1").Status).To(Equal(protocol.StatusUnknown), "in doubt as the server died")

		res, err := keyed(ctx, cs, "counters__add", "k1", map[string]any{"name": "a", "n": 1})
		Expect(err).NotTo(HaveOccurred(), "the retry under its key is reconciled, not refused in_doubt")
		Expect(res.IsError).To(BeFalse())
		Expect(res.Meta[scenarios.MCPMetaReconciled]).To(BeTrue())
		e := lr.effectByKey("k1")
		Expect(e.Status).To(Equal(protocol.StatusDone))
		Expect(e.Reconciled).To(BeTrue())
		counters, calls := lr.countersState()
		Expect(calls).To(HaveLen(1), "the server's own state: the call ran once")
		Expect(counters["a"]).To(Equal(1))

		// A call the server never received — its intent durable, the
		// harness gone before it was sent — is found not to have
		// happened, and a retry under its key runs it.
		w := lr.r.world
		out, found, err := world.LookupOf(ctx, w, world.Request{Key: "k/never", Kind: "mcp.counters.add", Args: json.RawMessage(`{"name":"a","n":5}`)})
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeFalse(), "%+v", out)
	})
})

var _ = Describe("MCP faults in a scenario", func() {
	It("are refused for a scenario without mcp:, and for a server it does not declare, at the fault's place in the file", func() {
		scen, err := scenarios.Parse("nomcp.yaml", []byte(`apiVersion: overnight/v1
kind: Scenario
name: nomcp
world: cloud
agent: {builtin: deployer}
faults: [mcp-error@effect:1]
`))
		Expect(err).NotTo(HaveOccurred())
		err = CheckScenario(scen, CheckOptions{Faults: chaos.Default()})
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("nomcp.yaml:6:"))
		Expect(err.Error()).To(ContainSubstring("faults[0]: mcp-error acts on the scenario's MCP servers, and this scenario has no mcp: block"))

		scen = countersScenario("/bin/true", "agent", "faults: [kill@step:1, mcp-crash:search@effect:1]\n")
		err = CheckScenario(scen, CheckOptions{Faults: chaos.Default()})
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`faults[1]: mcp-crash names MCP server "search", which this scenario does not declare (its servers: counters)`))
		Expect(CheckScenario(countersScenario("/bin/true", "agent", "faults: [mcp-crash:counters__add@effect:1]\n"), CheckOptions{Faults: chaos.Default()})).To(Succeed())
	})

	It("are drawn by --chaos random only for a scenario with mcp:", func() {
		reg := chaos.Default()
		scen, err := scenarios.Parse("nomcp.yaml", []byte(`apiVersion: overnight/v1
kind: Scenario
name: nomcp
world: cloud
agent: {builtin: deployer}
reach: {effects: 4, kinds: [kill, mcp-error]}
`))
		Expect(err).NotTo(HaveOccurred())
		err = CheckScenario(scen, CheckOptions{Faults: reg})
		Expect(err).To(MatchError(ContainSubstring("nomcp.yaml:6:")))
		Expect(err).To(MatchError(ContainSubstring("reach.kinds[1]: mcp-error is not drawn at random for this run: it acts on the scenario's MCP servers, and the scenario has no mcp: block")))

		h := &Harness{opts: Options{Faults: reg}}
		reach, err := h.randomReach(countersScenario("/bin/true", "agent", "reach: {effects: 4, kinds: [mcp-error, mcp-slow]}\n"), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(reach.MCP).To(BeTrue())
		drawn, err := chaos.RandomSchedule(chaos.NewStreams(1).For("random-chaos"), reg, reach, 2)
		Expect(err).NotTo(HaveOccurred())
		for _, s := range drawn {
			Expect(s.Kind).To(HavePrefix("mcp-"))
		}
	})
})

var _ = Describe("MCP tool changes the gateway makes, against a real MCP server process", func() {
	var bin string
	BeforeEach(func() { bin = countersBinary() })

	toolNamed := func(ctx context.Context, cs *mcp.ClientSession, name string) *mcp.Tool {
		res, err := cs.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		for _, t := range res.Tools {
			if t.Name == name {
				return t
			}
		}
		return nil
	}

	It("mcp-tool-gone drops the tool from tools/list and answers a call to it with a tool error saying it is gone", func(ctx SpecContext) {
		lr := liveMCPRun(countersScenario(bin, "agent", "faults: [mcp-tool-gone:counters__pay@step:1]\n"), Options{})
		tok := lr.attempt()
		cs := lr.mcpSession(ctx, tok)
		Expect(toolNamed(ctx, cs, "counters__pay")).NotTo(BeNil())
		_, err := lr.sdk(tok).Checkpoint(ctx, 1, nil)
		Expect(err).NotTo(HaveOccurred())

		Expect(toolNamed(ctx, cs, "counters__pay")).To(BeNil(), "the next tools/list shows it gone")
		Expect(toolNamed(ctx, cs, "counters__add")).NotTo(BeNil())
		res := tool(ctx, cs, "counters__pay", map[string]any{"to": "bob", "amount": 5})
		Expect(res.IsError).To(BeTrue())
		Expect(text(res)).To(ContainSubstring("tool counters__pay is gone"))
		_, calls := lr.countersState()
		Expect(calls).To(BeEmpty(), "the server never saw it")
		Expect(value(tool(ctx, cs, "counters__add", map[string]any{"name": "a", "n": 1}))).To(BeEquivalentTo(1))

		refused := lr.refusals()
		Expect(refused).To(HaveLen(1), "the refused call is journaled")
		Expect(refused[0]).To(gstruct.MatchFields(gstruct.IgnoreExtras, gstruct.Fields{"Tool": Equal("counters__pay"), "Fault": Equal("mcp-tool-gone:counters__pay@step:1"),
			"Attempt": Equal(1), "ArgsDigest": Equal(hashHex([]byte(`{"amount":5,"to":"bob"}`)))}))
		Expect(refused[0].Reason).To(ContainSubstring("tool counters__pay is gone"))
		effects := lr.effects()
		Expect(effects).To(HaveLen(1), "and is no effect")
		Expect(effects[0].Kind).To(Equal("mcp.counters.add"))
		Expect(lr.mcpCounts()).To(gstruct.MatchFields(gstruct.IgnoreExtras, gstruct.Fields{"Calls": Equal(1), "Refused": Equal(1)}))

		result, fired := lr.finished(ctx)
		Expect(fired.Verdict).To(Equal("pass"), fired.Detail)
		Expect(result.Faults[0].MetDetail).To(Equal("the agent called counters__pay once after it changed (1 refused)"))
		Expect(result.MCP.Refusals).To(HaveLen(1), "the result lists the refused call")
		Expect(result.MCP.Refusals[0].Tool).To(Equal("counters__pay"))
		Expect(result.MCP.Refusals[0].Virtual).NotTo(BeZero())
	})

	It("mcp-schema serves the changed schema, explains a call in the old shape, and translates one in the new shape to the server's", func(ctx SpecContext) {
		lr := liveMCPRun(countersScenario(bin, "agent", "faults: [\"mcp-schema:counters__add:rename=n>amount,require=reason@step:1\"]\n"), Options{})
		tok := lr.attempt()
		cs := lr.mcpSession(ctx, tok)
		Expect(value(tool(ctx, cs, "counters__add", map[string]any{"name": "a", "n": 1}))).To(BeEquivalentTo(1), "before the change")
		_, err := lr.sdk(tok).Checkpoint(ctx, 1, nil)
		Expect(err).NotTo(HaveOccurred())

		add := toolNamed(ctx, cs, "counters__add")
		Expect(add).NotTo(BeNil())
		schema := schemaMap(add.InputSchema)
		Expect(schema["properties"]).To(HaveKey("amount"))
		Expect(schema["properties"]).To(HaveKey("reason"))
		Expect(schema["properties"]).NotTo(HaveKey("n"))
		Expect(schema["required"]).To(ContainElement("reason"))

		res := tool(ctx, cs, "counters__add", map[string]any{"name": "a", "n": 1})
		Expect(res.IsError).To(BeTrue())
		Expect(text(res)).To(ContainSubstring(`tool counters__add's input schema changed: argument "n" is now "amount"; "reason" is now required. This call sends "n"`))
		res = tool(ctx, cs, "counters__add", map[string]any{"name": "a", "amount": 2})
		Expect(res.IsError).To(BeTrue())
		Expect(text(res)).To(ContainSubstring(`This call lacks "reason"`))
		_, calls := lr.countersState()
		Expect(calls).To(HaveLen(1), "neither refused call reached the server")

		Expect(value(tool(ctx, cs, "counters__add", map[string]any{"name": "a", "amount": 2, "reason": "spec"}))).To(BeEquivalentTo(3))
		counters, calls := lr.countersState()
		Expect(counters["a"]).To(Equal(3), "the server's own state shows the call")
		Expect(calls).To(HaveLen(2))
		Expect(string(calls[1])).To(ContainSubstring(`"args":{"n":2,"name":"a"}`), "in the server's shape")

		refused := lr.refusals()
		Expect(refused).To(HaveLen(2), "both refused calls are journaled")
		for _, r := range refused {
			Expect(r.Tool).To(Equal("counters__add"))
			Expect(r.Fault).To(HavePrefix("mcp-schema:counters__add:rename=n>amount,require=reason"))
		}
		Expect(refused[0].Reason).To(ContainSubstring(`This call sends "n"`))
		Expect(refused[1].Reason).To(ContainSubstring(`This call lacks "reason"`))
		Expect(refused[0].ArgsDigest).NotTo(Equal(refused[1].ArgsDigest))
		Expect(lr.effects()).To(HaveLen(2), "the call before the change and the one in the new shape; no refused one")
		Expect(lr.mcpCounts()).To(gstruct.MatchFields(gstruct.IgnoreExtras, gstruct.Fields{"Calls": Equal(2), "Refused": Equal(2)}))

		result, fired := lr.finished(ctx)
		Expect(fired.Verdict).To(Equal("pass"), fired.Detail)
		Expect(result.Faults[0].MetDetail).To(Equal("the agent called counters__add 3 times after it changed (2 refused, 1 in the new shape)"))
	})

	It("faults-fired: a tool change the agent never met by calling that tool is not met, whatever other tools it calls", func(ctx SpecContext) {
		lr := liveMCPRun(countersScenario(bin, "agent", "faults: [mcp-tool-gone:counters__pay@step:1]\n"), Options{})
		tok := lr.attempt()
		cs := lr.mcpSession(ctx, tok)
		Expect(value(tool(ctx, cs, "counters__add", map[string]any{"name": "a", "n": 1}))).To(BeEquivalentTo(1))
		_, err := lr.sdk(tok).Checkpoint(ctx, 1, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(toolNamed(ctx, cs, "counters__pay")).To(BeNil(), "the fault fired")
		Expect(value(tool(ctx, cs, "counters__add", map[string]any{"name": "a", "n": 2}))).To(BeEquivalentTo(3), "an effect after the change, of another tool")

		res, fired := lr.finished(ctx)
		Expect(res.Faults[0].Applied).To(BeTrue())
		Expect(res.Faults[0].Met).To(BeFalse())
		Expect(res.Faults[0].MetDetail).To(Equal("the agent never called counters__pay after it changed (calls of other tools do not meet the change)"))
		Expect(fired.Verdict).To(Equal("unknown"))
		Expect(fired.Detail).To(ContainSubstring("fired but the agent never met them: mcp-tool-gone:counters__pay@step:1 (the agent never called counters__pay after it changed"))
		Expect(lr.faultRecord().Evidence.Tool).To(Equal(&chaos.ToolWindow{FromOrder: 1}), "the window is journaled with the fault")
	})

	It("faults-fired: a run loaded again after its harness stopped (a resume) judges a tool change from the journal as the live run would", func(ctx SpecContext) {
		scen := countersScenario(bin, "agent", "faults: [\"mcp-schema:counters__add:rename=n>amount@step:1\"]\n")
		state := GinkgoT().TempDir()
		h, err := Open(ctx, Options{StateDir: state})
		Expect(err).NotTo(HaveOccurred())
		id, err := h.create(ctx, RunRequest{Scenario: scen})
		Expect(err).NotTo(HaveOccurred())
		lr := liveRunOf(h, id)
		tok := lr.attempt()
		cs := lr.mcpSession(ctx, tok)
		_, err = lr.sdk(tok).Checkpoint(ctx, 1, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(tool(ctx, cs, "counters__add", map[string]any{"name": "a", "n": 1}).IsError).To(BeTrue(), "the old shape, refused")
		Expect(value(tool(ctx, cs, "counters__add", map[string]any{"name": "a", "amount": 2}))).To(BeEquivalentTo(2), "the new shape, run")
		Expect(value(tool(ctx, cs, "counters__get", map[string]any{"name": "a"}))).To(BeEquivalentTo(2), "another tool: no count")
		lr.stop() // the harness goes away before the run's end: nothing judged in memory survives

		h, err = Open(ctx, Options{StateDir: state})
		Expect(err).NotTo(HaveOccurred())
		lr = liveRunOf(h, id)
		_, fired := lr.finished(ctx)
		Expect(fired.Verdict).To(Equal("pass"), fired.Detail)
		Expect(lr.faultRecord().MetDetail).To(Equal("the agent called counters__add twice after it changed (1 refused, 1 in the new shape)"))
	})

	It("faults-fired: a call of the tool after the change healed did not meet it", func(ctx SpecContext) {
		lr := liveMCPRun(countersScenario(bin, "agent", "faults: [\"mcp-schema:counters__add:rename=n>amount@step:1/1h\"]\n"), Options{})
		tok := lr.attempt()
		cs := lr.mcpSession(ctx, tok)
		_, err := lr.sdk(tok).Checkpoint(ctx, 1, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(value(tool(ctx, cs, "counters__get", map[string]any{"name": "a"}))).To(BeEquivalentTo(0), "another tool, while the change holds")
		_, err = lr.sdk(tok).Sleep(ctx, 2*time.Hour)
		Expect(err).NotTo(HaveOccurred())
		Expect(value(tool(ctx, cs, "counters__add", map[string]any{"name": "a", "n": 1}))).To(BeEquivalentTo(1), "healed: the old shape runs")

		res, fired := lr.finished(ctx)
		Expect(res.Faults[0].HealedVirtualMS).To(HaveValue(BeNumerically(">", 0)))
		Expect(res.Faults[0].MetDetail).To(Equal("the agent never called counters__add after it changed (calls of other tools do not meet the change)"))
		Expect(fired.Verdict).To(Equal("unknown"))
		Expect(lr.faultRecord().Evidence.Tool).To(Equal(&chaos.ToolWindow{FromOrder: 0, Healed: true, ToOrder: 1}))
	})
})
