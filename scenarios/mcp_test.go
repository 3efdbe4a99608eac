package scenarios_test

import (
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/expr"
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

	It("reads an image server, its port and path defaulted, its env's {{data_dir}} kept for the harness", func() {
		sc := mustParse("dir/mcp.yaml", mcpHeader+`    - {name: pay, image: "pay-mcp:1", env: {PAY_DB: "{{data_dir}}/pay.json"}}
    - {name: shop, image: "shop-mcp:2", port: 9000, path: /rpc}
`)
		pay, ok := sc.MCPServer("pay")
		Expect(ok).To(BeTrue())
		Expect(pay.Image).To(Equal("pay-mcp:1"))
		Expect(pay.Port).To(Equal(scenarios.DefaultMCPPort))
		Expect(pay.Path).To(Equal(scenarios.DefaultMCPPath))
		Expect(pay.Env).To(Equal(map[string]string{"PAY_DB": "{{data_dir}}/pay.json"}))
		Expect(pay.Dir).To(BeEmpty())
		Expect(pay.Label()).To(Equal("MCP server pay (image pay-mcp:1)"))
		shop, _ := sc.MCPServer("shop")
		Expect(shop.Port).To(Equal(9000))
		Expect(shop.Path).To(Equal("/rpc"))
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
		Entry("both command and url", mcpHeader+"    - {name: two, command: [x], url: 'http://a'}\n",
			`11:38: mcp.servers[1]: give one of command, url and image, not command and url`),
		Entry("both url and image", mcpHeader+"    - {name: two, url: 'http://a', image: 'pay-mcp:1'}\n",
			`11:43: mcp.servers[1]: give one of command, url and image, not url and image`),
		Entry("neither command, url nor image", mcpHeader+"    - {name: none}\n",
			`11:7: mcp.servers[1]: give command: (a stdio server the harness starts), url: (a streamable HTTP server already running) or image: (a container the harness runs)`),
		Entry("port and path on a server that is not an image", mcpHeader+"    - {name: u, url: 'http://a', port: 80, path: /x}\n",
			`11:40: mcp.servers[1].port: only an image server has one`,
			`11:50: mcp.servers[1].path: only an image server has one`),
		Entry("a port out of range and a path without its slash", mcpHeader+"    - {name: pay, image: 'pay-mcp:1', port: 70000, path: mcp}\n",
			`11:45: mcp.servers[1].port: 70000 is too large (at most 65535)`,
			`11:58: mcp.servers[1].path: "mcp" does not match ^/[^\s]*$`),
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
			`11:39: mcp.servers[1].env: only a command or image server has an environment (this one runs at http://a)`),
		Entry("neither world, http nor mcp", "apiVersion: overnight/v1\nkind: Scenario\nname: t\nagent: {builtin: x}\n",
			`1:1: missing required field "world"`),
		Entry("a lookup by the tool it looks up, and expressions that do not compile", mcpHeader+`      lookups:
        create_ticket: {tool: create_ticket, found: 'response.tickets.exists(t, t.key == kee)'}
        close_ticket: {tool: list_tickets, args: '{"id": args.id} + 1', found: 'true'}
`,
			`12:31: mcp.servers[0].lookups.create_ticket.tool: "create_ticket" is the tool looked up: a call in doubt is looked for with a read-only tool`,
			`12:90: mcp.servers[0].lookups.create_ticket.found: undeclared reference to 'kee'; this expression may use args, key, response`,
			`13:67: mcp.servers[0].lookups.close_ticket.args: found no matching overload for '_+_' applied to '(map(string, dyn), int)'`),
		Entry("a lookup without found", mcpHeader+`      lookups:
        create_ticket: {tool: list_tickets}
`,
			`12:24: mcp.servers[0].lookups.create_ticket: missing required field "found"`),
	)

	It("reads a server's lookups, their expressions over args, key and response", func() {
		sc := mustParse("mcp.yaml", mcpHeader+`      lookups:
        create_ticket:
          tool: list_tickets
          args: '{"status": "open"}'
          found: 'response.structuredContent.tickets.exists(t, t.key == key && t.title == args.title)'
`)
		l := sc.MCPServers()[0].Lookups["create_ticket"]
		Expect(l.Tool).To(Equal("list_tickets"))
		Expect(l.At).To(Equal("mcp.yaml:13:11"))
		Expect(l.Args).NotTo(BeNil())
		Expect(l.Found.Vars()).To(ConsistOf(expr.Args, scenarios.MCPVarKey, expr.Response))
	})
})
