package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/scenarios"
)

// countersBinary builds the specs' MCP server (testdata/mcpcounters, the
// official Go SDK over stdio) into a temp dir of the spec.
func countersBinary() string {
	GinkgoHelper()
	bin, err := buildCounters(GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	return bin
}

// buildCounters builds testdata/mcpcounters into dir and returns its path.
func buildCounters(dir string) (string, error) {
	bin := filepath.Join(dir, "mcpcounters")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/mcpcounters")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build mcpcounters: %w\n%s", err, out)
	}
	return bin, nil
}

// countersScenario is a scenario of the counters server alone, with keys
// and whatever more (gate:, reflect:) extra says.
func countersScenario(bin, keys, extra string) *scenarios.Scenario {
	GinkgoHelper()
	text := countersScenarioYAML(bin, keys, extra)
	sc, err := scenarios.Parse(filepath.Join(GinkgoT().TempDir(), "counters.yaml"), []byte(text))
	Expect(err).NotTo(HaveOccurred())
	return sc
}

// countersScenarioYAML is countersScenario's text.
func countersScenarioYAML(bin, keys, extra string) string {
	return fmt.Sprintf(`apiVersion: overnight/v1
kind: Scenario
name: counters
agent: {builtin: deployer}
mcp:
  servers:
    - name: counters
      command: [%q]
      env: {COUNTERS_STATE: "{{data_dir}}/counters.json"}
  keys: %s
limits: {horizon: 10d}
%s`, bin, keys, extra)
}

// liveMCPRun creates a run of scen on a harness of opts (a fresh state dir)
// and serves it with the real gateway; its MCP server runs as a real process.
func liveMCPRun(scen *scenarios.Scenario, opts Options) *liveRun {
	GinkgoHelper()
	ctx := context.Background()
	opts.StateDir = GinkgoT().TempDir()
	h, err := Open(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	id, err := h.create(ctx, RunRequest{Scenario: scen})
	Expect(err).NotTo(HaveOccurred())
	return liveRunOf(h, id)
}

// mcpSession connects the official SDK's client to the gateway's MCP
// endpoint with token, as an agent does with $OVERNIGHT_MCP_URL.
func (lr *liveRun) mcpSession(ctx context.Context, token string) *mcp.ClientSession {
	GinkgoHelper()
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", lr.sock)
		},
	}}
	c := mcp.NewClient(&mcp.Implementation{Name: "spec-agent", Version: "v1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://gateway" + gateway.MCPPathPrefix + token,
		HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cs.Close)
	return cs
}

// countersState is the counters server's own state file: its counters and
// every call it executed.
func (lr *liveRun) countersState() (counters map[string]int, calls []json.RawMessage) {
	GinkgoHelper()
	s, ok := lr.r.scen.MCPServer("counters")
	Expect(ok).To(BeTrue())
	b, err := os.ReadFile(filepath.Join(mcpDir(lr.h.state, lr.r.rec.ID, s), "data", "counters.json"))
	if os.IsNotExist(err) {
		return map[string]int{}, nil
	}
	Expect(err).NotTo(HaveOccurred())
	var st struct {
		Counters map[string]int    `json:"counters"`
		Calls    []json.RawMessage `json:"calls"`
	}
	Expect(json.Unmarshal(b, &st)).To(Succeed())
	return st.Counters, st.Calls
}

// tool calls name (as the agent sees it) with args and no key of its own,
// and returns the result, failing the spec on an error.
func tool(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	GinkgoHelper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	Expect(err).NotTo(HaveOccurred())
	return res
}

func value(res *mcp.CallToolResult) any {
	return res.StructuredContent.(map[string]any)["value"]
}

func (lr *liveRun) effects() []history.EffectRecord {
	GinkgoHelper()
	effects, err := lr.h.history.Effects(lr.r.rec.ID)
	Expect(err).NotTo(HaveOccurred())
	return effects
}

var _ = Describe("MCP keys: derived", func() {
	var bin string
	BeforeEach(func() { bin = countersBinary() })

	// killedAndResumed plays an agent that sends no keys: attempt 1
	// checkpoints, reads, adds 1 to a, and dies; attempt 2 resumes, reads
	// twice and repeats the add, then makes its next add (the same call
	// again, on purpose). It returns the results of attempt 2's two adds.
	killedAndResumed := func(ctx context.Context, lr *liveRun) (repeat, next *mcp.CallToolResult) {
		tok := lr.attempt()
		_, err := lr.sdk(tok).Checkpoint(ctx, 1, map[string]int{"step": 1})
		Expect(err).NotTo(HaveOccurred())
		cs := lr.mcpSession(ctx, tok)
		Expect(value(tool(ctx, cs, "counters__get", map[string]any{"name": "a"}))).To(BeEquivalentTo(0))
		Expect(value(tool(ctx, cs, "counters__add", map[string]any{"name": "a", "n": 1}))).To(BeEquivalentTo(1))

		tok = lr.attempt() // attempt 1 is gone; attempt 2 resumes from its checkpoint
		cp, err := lr.sdk(tok).Resume(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(cp.Step).To(Equal(1))
		cs = lr.mcpSession(ctx, tok)
		tool(ctx, cs, "counters__get", map[string]any{"name": "a"})
		tool(ctx, cs, "counters__get", map[string]any{"name": "b"})
		repeat = tool(ctx, cs, "counters__add", map[string]any{"name": "a", "n": 1})
		next = tool(ctx, cs, "counters__add", map[string]any{"name": "a", "n": 1})
		return repeat, next
	}

	It("answers a resumed agent's repeat of a mutating call from the journal, however many reads came first", func(ctx SpecContext) {
		lr := liveMCPRun(countersScenario(bin, "derived", ""), Options{})
		repeat, next := killedAndResumed(ctx, lr)
		Expect(value(repeat)).To(BeEquivalentTo(1), "the recorded answer")
		Expect(repeat.Meta[scenarios.MCPMetaReplayed]).To(BeTrue())
		Expect(value(next)).To(BeEquivalentTo(2), "the next mutating call since the checkpoint is a new call")
		Expect(next.Meta[scenarios.MCPMetaReplayed]).To(BeNil())

		counters, calls := lr.countersState()
		Expect(counters["a"]).To(Equal(2), "the server's own state: the repeat was not executed")
		Expect(calls).To(HaveLen(2))
		var adds []history.EffectRecord
		for _, e := range lr.effects() {
			if e.Kind == "mcp.counters.add" {
				adds = append(adds, e)
			} else {
				Expect(e.Unkeyed).To(BeTrue(), "a read stays unkeyed: %s", e.ID)
			}
		}
		Expect(adds).To(HaveLen(2))
		Expect(adds[0].Key).To(MatchRegexp(`^mcp-cp1/0/counters__add/[0-9a-f]{16}$`))
		Expect(adds[0].Replays).To(Equal(1))
		Expect(adds[1].Key).To(MatchRegexp(`^mcp-cp1/1/counters__add/[0-9a-f]{16}$`))
		Expect(string(calls[0])).To(ContainSubstring(`"key":"`+adds[0].ID+`"`), "the server was sent the effect's key")
	})

	It("lets a key the agent gives win, and counts from each new checkpoint", func(ctx SpecContext) {
		lr := liveMCPRun(countersScenario(bin, "derived", ""), Options{})
		tok := lr.attempt()
		cs := lr.mcpSession(ctx, tok)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "counters__add", Arguments: map[string]any{"name": "a", "n": 5},
			Meta: mcp.Meta{scenarios.MCPMetaIdempotencyKey: "mine"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(value(res)).To(BeEquivalentTo(5))
		tool(ctx, cs, "counters__add", map[string]any{"name": "a", "n": 5})
		_, err = lr.sdk(tok).Checkpoint(ctx, 1, nil)
		Expect(err).NotTo(HaveOccurred())
		tool(ctx, cs, "counters__add", map[string]any{"name": "a", "n": 5})
		var keys []string
		for _, e := range lr.effects() {
			keys = append(keys, e.Key)
		}
		Expect(keys).To(HaveLen(3))
		Expect(keys[0]).To(Equal("mine"))
		Expect(keys[1]).To(HavePrefix("mcp-cp0/0/counters__add/"))
		Expect(keys[2]).To(HavePrefix("mcp-cp1/0/counters__add/"))
		counters, _ := lr.countersState()
		Expect(counters["a"]).To(Equal(15))
	})

	It("keeps the key of a retry of a call left in doubt: never run twice, and an idempotent tool's runs again", func(ctx SpecContext) {
		lr := liveMCPRun(countersScenario(bin, "derived", ""), Options{})
		cs := lr.mcpSession(ctx, lr.attempt())
		add := map[string]any{"name": "die:a", "n": 1}
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "counters__add", Arguments: add})
		Expect(err).To(MatchError(ContainSubstring("unknown")), "the server died after it acted")
		tool(ctx, cs, "counters__get", map[string]any{"name": "die:a"})
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "counters__add", Arguments: add})
		Expect(err).To(MatchError(ContainSubstring(CodeInDoubt)), "the retry is the same call: reconciled, not run again")
		set := map[string]any{"name": "die:s", "value": 4}
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "counters__set", Arguments: set})
		Expect(err).To(MatchError(ContainSubstring("unknown")))
		Expect(value(tool(ctx, cs, "counters__set", set))).To(BeEquivalentTo(4), "idempotentHint: run again under its key")
		counters, _ := lr.countersState()
		Expect(counters["die:a"]).To(Equal(1))
		var keys []string
		for _, e := range lr.effects() {
			if !e.Unkeyed {
				keys = append(keys, e.Key)
			}
		}
		Expect(keys).To(HaveLen(2))
		Expect(keys[0]).To(HavePrefix("mcp-cp0/0/counters__add/"))
		Expect(keys[1]).To(HavePrefix("mcp-cp0/1/counters__set/"))
	})

	It("under keys: agent, runs the same agent's repeat again: the server holds it twice", func(ctx SpecContext) {
		lr := liveMCPRun(countersScenario(bin, "agent", ""), Options{})
		repeat, _ := killedAndResumed(ctx, lr)
		Expect(value(repeat)).To(BeEquivalentTo(2))
		counters, calls := lr.countersState()
		Expect(counters["a"]).To(Equal(3))
		Expect(calls).To(HaveLen(3))
		for _, e := range lr.effects() {
			Expect(e.Unkeyed).To(BeTrue())
		}
	})
})

// recordingGate allows every effect and keeps what it was asked.
type recordingGate struct {
	mu  sync.Mutex
	got []GateRequest
}

func (g *recordingGate) Admit(_ context.Context, req GateRequest) (GateDecision, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.got = append(g.got, req)
	return GateDecision{Allow: true, Policy: "allow"}, nil
}

var _ = Describe("MCP tools' annotations on the effect path", func() {
	var bin string
	BeforeEach(func() { bin = countersBinary() })

	It("tell the gate which tools are read-only", func(ctx SpecContext) {
		lr := liveMCPRun(countersScenario(bin, "agent", ""), Options{})
		g := &recordingGate{}
		lr.r.mu.Lock()
		lr.r.hooks.Gate = g
		lr.r.mu.Unlock()
		cs := lr.mcpSession(ctx, lr.attempt())
		tool(ctx, cs, "counters__get", map[string]any{"name": "a"})
		tool(ctx, cs, "counters__add", map[string]any{"name": "a", "n": 1})
		tool(ctx, cs, "counters__pay", map[string]any{"to": "bob", "amount": 3})
		g.mu.Lock()
		defer g.mu.Unlock()
		Expect(g.got).To(HaveLen(3))
		Expect(g.got[0].Kind).To(Equal("mcp.counters.get"))
		Expect(g.got[0].ReadOnly).To(BeTrue(), "readOnlyHint")
		Expect(g.got[1].ReadOnly).To(BeFalse())
		Expect(g.got[2].ReadOnly).To(BeFalse(), "a tool without annotations")
	})

	It("retry an idempotent tool's call in doubt under its key, and leave a non-idempotent one in doubt", func(ctx SpecContext) {
		lr := liveMCPRun(countersScenario(bin, "agent", ""), Options{})
		cs := lr.mcpSession(ctx, lr.attempt())
		keyed := func(name, key string, args map[string]any) (*mcp.CallToolResult, error) {
			return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: mcp.Meta{scenarios.MCPMetaIdempotencyKey: key}})
		}
		set := map[string]any{"name": "die:s", "value": 7}
		_, err := keyed("counters__set", "set-1", set)
		Expect(err).To(MatchError(ContainSubstring("unknown")), "the server died after it acted: in doubt")
		res, err := keyed("counters__set", "set-1", set)
		Expect(err).NotTo(HaveOccurred(), "idempotentHint: the retry runs it again on the server started again")
		Expect(value(res)).To(BeEquivalentTo(7))
		e := lr.effect("set-1")
		Expect(e.Status).To(Equal("done"))
		Expect(e.Executions).To(Equal(2))

		add := map[string]any{"name": "die:a", "n": 1}
		_, err = keyed("counters__add", "add-1", add)
		Expect(err).To(MatchError(ContainSubstring("unknown")))
		_, err = keyed("counters__add", "add-1", add)
		Expect(err).To(MatchError(ContainSubstring(CodeInDoubt)), "not idempotent: never run twice")
		counters, _ := lr.countersState()
		Expect(counters).To(HaveKeyWithValue("die:s", 7))
		Expect(counters).To(HaveKeyWithValue("die:a", 1), "executed once, by the first call")
	})
})
