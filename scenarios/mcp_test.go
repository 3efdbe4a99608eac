package scenarios_test

import (
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/invariant"
)

// mcpHeader is the valid start of a scenario of MCP servers alone (no
// world:); cases append to it.
const mcpHeader = `apiVersion: overnight/v1
kind: Scenario
name: tickets
agent: {binary: /bin/agent}
mcp:
  servers:
    - name: tickets
      command: [python3, tickets.py]
      env: {TICKETS_DB: "{{data_dir}}/tickets.json"}
      replayable: true
`

var _ = Describe("mcp:", func() {
	It("reads stdio and URL servers and keys: agent, with no world", func() {
		sc := mustParse("dir/mcp.yaml", mcpHeader+`    - {name: search_2, url: "http://127.0.0.1:8931/mcp"}
  keys: agent
`)
		Expect(sc.HasWorld()).To(BeFalse())
		Expect(sc.HasAPIs()).To(BeTrue())
		Expect(sc.MCP.Keys).To(Equal(scenarios.MCPKeysAgent))
		servers := sc.MCPServers()
		Expect(servers).To(HaveLen(2))
		t := servers[0]
		Expect(t.Command).To(Equal([]string{"python3", "tickets.py"}))
		Expect(t.Env).To(Equal(map[string]string{"TICKETS_DB": "{{data_dir}}/tickets.json"}))
		Expect(t.Replayable).To(BeTrue())
		abs, err := filepath.Abs("dir")
		Expect(err).NotTo(HaveOccurred())
		Expect(t.Dir).To(Equal(abs), "a command server runs in the scenario file's directory")
		Expect(t.EffectKind("create")).To(Equal("mcp.tickets.create"))
		Expect(t.ToolName("create")).To(Equal("tickets__create"))
		Expect(t.CheckToolName("create")).To(Succeed())
		Expect(t.CheckToolName(strings.Repeat("x", 60))).To(MatchError(ContainSubstring("is not a tool name an agent's model accepts")))
		Expect(t.CheckToolName("a.b")).To(HaveOccurred())
		s, ok := sc.MCPServer("search_2")
		Expect(ok).To(BeTrue())
		Expect(s.URL).To(Equal("http://127.0.0.1:8931/mcp"))
		Expect(s.Dir).To(BeEmpty())
		Expect(sc.Invariants).To(Equal([]string{invariant.NoDuplicateEffects, invariant.NoLostProgress}),
			"without world: or goal:, the defaults leave goal-reached out")
	})

	It("defaults keys to agent", func() {
		Expect(mustParse("mcp.yaml", mcpHeader).MCP.Keys).To(Equal(scenarios.MCPKeysAgent))
		Expect(mustParse("mcp.yaml", mcpHeader+"  keys: derived\n").MCP.Keys).To(Equal(scenarios.MCPKeysDerived))
	})

	It("reads replay: the run whose recording answers every call", func() {
		sc := mustParse("mcp.yaml", mcpHeader+"  replay: 20261203-101500-a1b2c3\n")
		Expect(sc.MCP.Replay).To(Equal("20261203-101500-a1b2c3"))
		Expect(sc.ReplaysMCP()).To(BeTrue())
		Expect(sc.ReplayingMCP("other").MCP.Replay).To(Equal("other"), "--mcp-replay wins")
		Expect(mustParse("mcp.yaml", mcpHeader).ReplaysMCP()).To(BeFalse())
	})

	DescribeTable("reports each problem at its file:line:column",
		func(text string, want ...string) {
			_, err := scenarios.Parse("mcp.yaml", []byte(text))
			Expect(positioned("mcp.yaml", err)).To(Equal(want))
		},
		Entry("a replay naming no run", mcpHeader+"  replay: ''\n", `11:11: mcp.replay: "" is not a run's id: name the run whose recording answers the calls (overnight runs lists them)`),
		Entry("a replay that is not a run id", mcpHeader+"  replay: 'run 1'\n", `11:11: mcp.replay: "run 1" is not a run's id: name the run whose recording answers the calls (overnight runs lists them)`),
		Entry("a misspelt field", mcpHeader+"  replya: run-1\n", `11:3: mcp: unknown field "replya" (did you mean "replay"?); allowed: keys, replay, servers`),
		Entry("an image server", mcpHeader+"    - {name: pay, image: 'pay-mcp:1'}\n",
			`11:26: mcp.servers[1].image: an MCP server run as an image is not supported yet (give command: for a stdio server, or url: for one already running)`),
		Entry("both command and url", mcpHeader+"    - {name: two, command: [x], url: 'http://a'}\n",
			`11:38: mcp.servers[1]: give one of command and url, not command and url`),
		Entry("neither command nor url", mcpHeader+"    - {name: none}\n",
			`11:7: mcp.servers[1]: give command: (a stdio server the harness starts) or url: (a streamable HTTP server already running)`),
		Entry("a name repeated, and one of an HTTP API", mcpHeader+"    - {name: tickets, url: 'http://a'}\n    - {name: etcd, url: 'http://a'}\nhttp:\n  - {name: etcd, base_url: 'http://x', routes: [{route: GET /a, kind: a}]}\n",
			`11:14: mcp.servers[1].name: "tickets" is already declared at line 7 column 13`,
			`12:14: mcp.servers[2].name: "etcd" is already the name of the HTTP API at line 14 column 12`),
		Entry("a name with the separator", strings.Replace(mcpHeader, "- name: tickets", "- name: my__tickets", 1),
			`7:13: mcp.servers[0].name: "my__tickets" holds "__", which separates a server's name from a tool's as the agent sees them`),
		Entry("a name the schema refuses", strings.Replace(mcpHeader, "- name: tickets", "- name: Tickets", 1),
			`7:13: mcp.servers[0].name: "Tickets" does not match ^[a-z][a-z0-9_-]*$`),
		Entry("a placeholder that is not data_dir, and a reserved variable", strings.Replace(mcpHeader, "{{data_dir}}/tickets.json", "{{url}}", 1)+"      # x\n",
			`9:25: mcp.servers[0].env.TICKETS_DB: "{{url}}": the only placeholder is {{data_dir}}`),
		Entry("env on a URL server", mcpHeader+"    - {name: u, url: 'http://a', env: {A: b}}\n",
			`11:39: mcp.servers[1].env: only a command server has an environment (this one runs at http://a)`),
		Entry("neither world, http nor mcp", "apiVersion: overnight/v1\nkind: Scenario\nname: t\nagent: {builtin: x}\n",
			`1:1: missing required field "world"`),
	)
})
