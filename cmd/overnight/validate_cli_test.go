package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/agents"
)

// validHeader is a scenario the cloud world can judge; cases add to it, so
// their problems are on line 7 and after.
const validHeader = `apiVersion: overnight/v1
kind: Scenario
name: t
world: cloud
agent: {builtin: deployer}
task: {network: n, database: d, migration: 1, service: {name: s, image: "i:1"}, dns: a.example}
`

// validateOutput is the JSON validate prints.
type validateOutput struct {
	Files []struct {
		File   string `json:"file"`
		Valid  bool   `json:"valid"`
		Errors []struct {
			Message  string  `json:"message"`
			Line     int     `json:"line"`
			Column   int     `json:"column"`
			Pointer  *string `json:"pointer"`
			Expected string  `json:"expected"`
		} `json:"errors"`
		Routing []harness.Route `json:"routing"`
	} `json:"files"`
}

// unindented is stdout's lines that do not begin with a space: validate's
// line per file or problem, without the details under them.
func unindented(stdout string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		if !strings.HasPrefix(l, " ") {
			lines = append(lines, l)
		}
	}
	return lines
}

// decodeValidate checks that stdout is exactly one JSON document of
// validate's shape, with nothing unknown in it.
func decodeValidate(stdout string) validateOutput {
	GinkgoHelper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	var out validateOutput
	Expect(dec.Decode(&out)).To(Succeed(), "stdout must be validate's JSON:\n%s", stdout)
	_, err := dec.Token()
	Expect(err).To(Equal(io.EOF), "nothing after the JSON document:\n%s", stdout)
	return out
}

// scenarioFile writes text to a new file name in dir and returns its path.
func scenarioFile(dir, name, text string) string {
	GinkgoHelper()
	file := filepath.Join(dir, name)
	Expect(os.WriteFile(file, []byte(text), 0o644)).To(Succeed())
	return file
}

var _ = Describe("overnight validate", func() {
	It("accepts a valid file and the built-in scenarios by name, exit 0", func(ctx SpecContext) {
		file := scenarioFile(GinkgoT().TempDir(), "ok.yaml", validHeader)
		o := overnight(ctx, GinkgoT().TempDir(), nil, "validate", file, "deploy", "week", "deploy-v2")
		Expect(o.code).To(Equal(0), o.stdout+o.stderr)
		Expect(unindented(o.stdout)).To(Equal([]string{file + ": valid", "deploy: valid", "week: valid", "deploy-v2: valid"}))
		Expect(o.stdout).To(ContainSubstring(file+": valid\n  effect kinds, routed by prefix"), "each valid file's routing under it")
		Expect(o.stderr).To(BeEmpty())

		o = overnight(ctx, GinkgoT().TempDir(), nil, "validate", "--output", "json", "deploy", file)
		Expect(o.code).To(Equal(0), o.stderr)
		out := decodeValidate(o.stdout)
		Expect(out.Files).To(HaveLen(2))
		for i, want := range []string{"deploy", file} {
			Expect(out.Files[i].File).To(Equal(want))
			Expect(out.Files[i].Valid).To(BeTrue())
			Expect(out.Files[i].Errors).NotTo(BeNil(), `"errors": [] rather than null`)
			Expect(out.Files[i].Errors).To(BeEmpty())
		}
	})

	DescribeTable("rejects a bad scenario at the line:column of the problem, with a useful message and the expected shape, exit 3",
		func(ctx SpecContext, text string, line, column int, pointer, message, expected string) {
			file := scenarioFile(GinkgoT().TempDir(), "bad.yaml", text)
			o := overnight(ctx, GinkgoT().TempDir(), nil, "validate", file, "-o", "json")
			Expect(o.code).To(Equal(3), o.stdout+o.stderr)
			out := decodeValidate(o.stdout)
			Expect(out.Files).To(HaveLen(1))
			f := out.Files[0]
			Expect(f.File).To(Equal(file))
			Expect(f.Valid).To(BeFalse())
			Expect(f.Errors).To(HaveLen(1), "exactly this one problem: %+v", f.Errors)
			e := f.Errors[0]
			Expect([]int{e.Line, e.Column}).To(Equal([]int{line, column}), e.Message)
			Expect(e.Pointer).To(HaveValue(Equal(pointer)))
			Expect(e.Message).To(ContainSubstring(message))
			Expect(e.Expected).To(ContainSubstring(expected))

			// The same, for people: file:line:column: message, then the expected shape.
			o = overnight(ctx, GinkgoT().TempDir(), nil, "validate", file)
			Expect(o.code).To(Equal(3))
			first := fmt.Sprintf("%s:%d:%d: %s\n", file, line, column, e.Message)
			if e.Expected == "" {
				Expect(o.stdout).To(Equal(first))
			} else {
				Expect(o.stdout).To(Equal(first + "    expected: " + e.Expected + "\n"))
			}
			Expect(o.stderr).To(BeEmpty(), "the report is the output; there is no other error")
		},
		Entry("an unknown key", validHeader+"colour: red\n",
			7, 1, "/colour", `unknown field "colour"; allowed: agent, agents, apiVersion`, ""),
		Entry("a wrong type", validHeader+"limits: {max_attempts: \"10\"}\n",
			7, 24, "/limits/max_attempts", `limits.max_attempts: got string, want integer`, "an integer from 1 to 1000 — Maximum number of attempts"),
		Entry("a bad enum", validHeader+"sandbox: {network: wifi}\n",
			7, 20, "/sandbox/network", `sandbox.network: got "wifi", want one of "none", "internal"`, `one of "none", "internal" — none (the default`),
		Entry("a bad pattern", validHeader+"agents: {v: {image: \"a b\"}}\n",
			7, 21, "/agents/v/image", `agents.v.image: "a b" does not match ^[^\s]+$`, "An image already on the engine."),
		Entry("a bad fault syntax, at the trigger", validHeader+"faults: [kill@stp:3]\n",
			7, 15, "/faults/0", `faults[0]: invalid fault "kill@stp:3": unknown trigger "stp" (want step:N`, "Fault specs, KIND[:ARG]@TRIGGER[/DURATION]"),
		Entry("an unknown fault kind", validHeader+"faults: [kill@step:1, meteor@step:2]\n",
			7, 23, "/faults/1", `faults[1]: fault "meteor@step:2": unknown fault kind "meteor" (known kinds: harness-crash, kill,`, "a string — Fault specs"),
		Entry("a network fault without a network", validHeader+"faults: [\"disconnect@t:1d/1h\"]\n",
			7, 10, "/faults/0", "faults[0]: disconnect acts on the sandbox's network, and this scenario gives its sandbox none: add `sandbox: {network: internal}`", "Fault specs"),
		Entry("a reach kind --chaos random cannot draw for that reach", validHeader+"reach: {steps: 5, kinds: [kill, llm-429]}\n",
			7, 33, "/reach/kinds/1", "reach.kinds[1]: llm-429 is not drawn at random for this run: it is drawn only at an LLM call (llm:N), and the run reaches none", "The only fault kinds --chaos random draws"),
		Entry("a bad duration, at its unit", validHeader+"limits: {timeout: 5x}\n",
			7, 20, "/limits/timeout", `limits.timeout: invalid duration "5x": unknown unit "x" (want ns, us, ms, s, m, h or d)`, "Wall-clock limit of a run, e.g. 2m"),
		Entry("a missing required field", strings.Replace(validHeader, "agent: {builtin: deployer}\n", "", 1),
			1, 1, "/agent", `missing required field "agent"`, "a mapping with keys args, binary, builtin, command, env, image — The agent to run"),
		Entry("both builtin and binary, at the second", validHeader+"agents: {v: {builtin: deployer, binary: /bin/a}}\n",
			7, 33, "/agents/v", `agents.v: builtin and binary are both set; set exactly one of builtin, binary or image`, "a mapping with keys args, binary, builtin"),
		Entry("a bad gate policy", validHeader+"gate: [{kinds: \"*\", policy: maybe}]\n",
			7, 29, "/gate/0/policy", `gate[0].policy: got "maybe", want one of "allow", "verify", "approve", "deny"`, "deny (never executed)"),
		Entry("a verify gate without reflection", validHeader+"gate: [{kinds: \"cloud.*\", policy: verify}]\n",
			7, 35, "/gate/0/policy", `gate[0].policy: verify guards effects with reflection, which is off: add a reflect: block`, ""),
		Entry("a bad reflect block", validHeader+"reflect: {replays: 0}\n",
			7, 20, "/reflect/replays", `reflect.replays: 0 is too small (at least 1)`, "an integer from 1 to 10 — Isolated replays of the failing attempt (default 3)."),
		Entry("an unknown key in the reflect block", validHeader+"reflect:\n  retries: 2\n",
			8, 3, "/reflect/retries", `reflect: unknown field "retries"; allowed: max, replays`, ""),
		Entry("an unknown world", strings.Replace(validHeader, "world: cloud", "world: mars", 1),
			4, 8, "/world", `world: unknown world "mars" (worlds: [cloud fleet]; see `+"`overnight worlds`)", "The world the agent acts on: a built-in's name"),
		Entry("an invariant the harness's registry lacks", validHeader+"invariants: [goal-reached, fast]\n",
			7, 28, "/invariants/1", `invariants[1]: unknown invariant "fast" (invariants: "no-duplicate-effects", "goal-reached", "no-lost-progress", "effects-resolved", "faults-fired", "state-consistent")`, "Invariant names: the built-in"),
		Entry("an unknown built-in agent", strings.Replace(validHeader, "builtin: deployer", "builtin: nobody", 1),
			5, 18, "/agent/builtin", `agent.builtin: no built-in agent "nobody" (built-in agents: [`, "An example agent built into the overnight binary"),
		Entry("a task the world's goal cannot judge", strings.Replace(validHeader, ", dns: a.example", "", 1),
			6, 7, "/task/dns", `task.dns: missing: the cloud world's deployment goal needs dns`, ""),
		Entry("an unknown llm provider", validHeader+"llm: {model: opnai:gpt-4o, rules: [{when: {}, reply: OK}]}\n",
			7, 14, "/llm/model", `llm.model: "opnai:gpt-4o": unknown provider "opnai" (did you mean "openai"?)`, "Default model: scripted"),
		Entry("a scalar where a mapping goes", validHeader+"limits: 5\n",
			7, 9, "/limits", `limits: got number, want`, "a mapping with keys approval, horizon, max_attempts, recovery, timeout (or nothing)"),
	)

	It("reports every problem of every file at once, valid files and built-ins among them, exit 3", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		good := scenarioFile(dir, "good.yaml", validHeader)
		bad1 := scenarioFile(dir, "bad1.yaml", strings.Replace(validHeader, "name: t", "name: Bad_Name", 1)+
			"faults: [kill@stp:3]\nlimits: {timeout: 5x, max_atempts: 2}\n")
		// The file's own problems and those of what it names, together.
		bad2 := scenarioFile(dir, "bad2.yaml", strings.Replace(validHeader, "builtin: deployer", "builtin: nobody", 1)+
			"gate: [{kinds: a, policy: maybe}]\nfaults: [meteor@step:1]\n")
		missing := filepath.Join(dir, "missing.yaml")
		args := []string{"validate", good, bad1, "deploy", bad2, missing}

		o := overnight(ctx, GinkgoT().TempDir(), nil, args...)
		Expect(o.code).To(Equal(3), o.stderr)
		// Without the expected shapes and the valid files' routing, both indented.
		Expect(unindented(o.stdout)).To(Equal([]string{
			good + ": valid",
			bad1 + `:3:7: name: "Bad_Name" does not match ^[a-z0-9][a-z0-9-]*$`,
			bad1 + `:7:15: faults[0]: invalid fault "kill@stp:3": unknown trigger "stp" (want step:N, effect:N[:before|after], llm:N, t:DURATION, every:DURATION, rate:R/DURATION)`,
			bad1 + `:8:20: limits.timeout: invalid duration "5x": unknown unit "x" (want ns, us, ms, s, m, h or d)`,
			bad1 + `:8:23: limits: unknown field "max_atempts" (did you mean "max_attempts"?); allowed: approval, horizon, max_attempts, recovery, timeout`,
			"deploy: valid",
			bad2 + `:5:18: agent.builtin: no built-in agent "nobody" (built-in agents: ` + fmt.Sprint(agents.Names()) + `)`,
			bad2 + `:7:27: gate[0].policy: got "maybe", want one of "allow", "verify", "approve", "deny"`,
			bad2 + `:8:10: faults[0]: fault "meteor@step:1": unknown fault kind "meteor" (known kinds: harness-crash, kill, pause, restart, stop, blackhole, disconnect, latency, netdrop, llm-429, llm-5xx, llm-malformed-tool-call, llm-timeout, llm-truncated, api-version, dep-update, effect-5xx, effect-slow, world-crash, mcp-crash, mcp-error, mcp-rpc-error, mcp-schema, mcp-slow, mcp-timeout, mcp-tool-gone, clock-jump; see ` + "`overnight faults`)",
			"load scenario " + missing + ": no such file (give the path of a scenario .yaml file or a built-in scenario's name): open " + missing + ": no such file or directory",
		}))
		Expect(o.stderr).To(BeEmpty())

		o = overnight(ctx, GinkgoT().TempDir(), nil, append(args, "--output", "json")...)
		Expect(o.code).To(Equal(3), o.stderr)
		out := decodeValidate(o.stdout)
		Expect(out.Files).To(HaveLen(5))
		type summary struct {
			file   string
			valid  bool
			errors int
		}
		var got []summary
		for _, f := range out.Files {
			got = append(got, summary{f.File, f.Valid, len(f.Errors)})
		}
		Expect(got).To(Equal([]summary{{good, true, 0}, {bad1, false, 4}, {"deploy", true, 0}, {bad2, false, 3}, {missing, false, 1}}))
		Expect(out.Files[1].Errors[0].Pointer).To(HaveValue(Equal("/name")))
		Expect(out.Files[4].Errors[0].Line).To(BeZero(), "a file that cannot be read has no position")
		Expect(out.Files[4].Errors[0].Pointer).To(BeNil())
		Expect(out.Files[4].Errors[0].Message).To(ContainSubstring("no such file"))
	})

	It("shows where a valid scenario's effect kinds go: each HTTP API by its prefix, its world: for every other kind; so does overnight worlds FILE", func(ctx SpecContext) {
		file := scenarioFile(GinkgoT().TempDir(), "two.yaml", validHeader+`http:
  - name: store
    base_url: http://127.0.0.1:9
    routes:
      - {route: "POST /v1/put", kind: put, identity: args.key}
      - {route: "GET /v1/get", kind: get, read_only: true}
`)
		o := overnight(ctx, GinkgoT().TempDir(), nil, "validate", file)
		Expect(o.code).To(Equal(0), o.stdout+o.stderr)
		lines := strings.Split(o.stdout, "\n")
		Expect(lines[0]).To(Equal(file + ": valid"))
		Expect(strings.Fields(lines[2])).To(Equal([]string{"http.store.*", "->", "HTTP", "API", "store", "at", "http://127.0.0.1:9"}))
		Expect(strings.Fields(lines[3])).To(Equal([]string{"http.store.put", "POST", "/v1/put,", "identity", "args.key"}))
		Expect(strings.Fields(lines[4])).To(Equal([]string{"http.store.get", "GET", "/v1/get,", "read-only"}))
		Expect(strings.Fields(lines[5])).To(Equal([]string{"every", "other", "kind", "->", "world", "cloud", "(built-in)"}))
		Expect(o.stdout).To(ContainSubstring("cloud.create_network"))

		o = overnight(ctx, GinkgoT().TempDir(), nil, "validate", file, "-o", "json")
		Expect(o.code).To(Equal(0), o.stderr)
		routes := decodeValidate(o.stdout).Files[0].Routing
		Expect(routes).To(HaveLen(2))
		Expect(routes[0]).To(MatchFields(IgnoreExtras, Fields{"Prefix": Equal("http.store."), "World": Equal("store"), "Via": Equal("http"), "Target": Equal("http://127.0.0.1:9")}))
		Expect(routes[0].Kinds).To(Equal([]harness.RoutedKind{
			{Kind: "http.store.put", Route: "POST /v1/put", Identity: "args.key"},
			{Kind: "http.store.get", Route: "GET /v1/get", ReadOnly: true},
		}))
		Expect(routes[1]).To(MatchFields(IgnoreExtras, Fields{"Prefix": Equal(""), "World": Equal("cloud"), "Via": Equal("built-in")}))
		Expect(routes[1].Kinds).To(ContainElement(harness.RoutedKind{Kind: "cloud.list", ReadOnly: true, Idempotent: true}))

		o = overnight(ctx, GinkgoT().TempDir(), nil, "worlds", file, "-o", "json")
		Expect(o.code).To(Equal(0), o.stderr)
		var worlds struct {
			Scenarios []struct {
				File    string          `json:"file"`
				Routing []harness.Route `json:"routing"`
			} `json:"scenarios"`
		}
		Expect(json.Unmarshal([]byte(o.stdout), &worlds)).To(Succeed())
		Expect(worlds.Scenarios).To(HaveLen(1))
		Expect(worlds.Scenarios[0].Routing).To(Equal(routes), "worlds FILE shows what validate shows")
		o = overnight(ctx, GinkgoT().TempDir(), nil, "worlds", file)
		Expect(o.code).To(Equal(0), o.stderr)
		Expect(o.stdout).To(HavePrefix(file + "\neffect kinds, routed by prefix"))
	})

	It("shows an MCP server's route by its prefix, its tools listed when the run starts", func(ctx SpecContext) {
		file := scenarioFile(GinkgoT().TempDir(), "mcp.yaml", validHeader+`mcp:
  servers:
    - {name: tickets, command: [python3, tickets.py]}
    - {name: notes, url: "http://127.0.0.1:9/mcp"}
`)
		o := overnight(ctx, GinkgoT().TempDir(), nil, "validate", file)
		Expect(o.code).To(Equal(0), o.stdout+o.stderr)
		Expect(o.stdout).To(MatchRegexp(`mcp\.tickets\.\*\s+-> MCP server tickets \(python3 tickets\.py\)`))
		Expect(o.stdout).To(MatchRegexp(`mcp\.notes\.\*\s+-> MCP server notes \(http://127\.0\.0\.1:9/mcp\)`))
		o = overnight(ctx, GinkgoT().TempDir(), nil, "validate", file, "-o", "json")
		Expect(o.code).To(Equal(0), o.stderr)
		routes := decodeValidate(o.stdout).Files[0].Routing
		Expect(routes).To(HaveLen(3))
		Expect(routes[0]).To(MatchFields(IgnoreExtras, Fields{"Prefix": Equal("mcp.tickets."), "World": Equal("tickets"), "Via": Equal("mcp"), "Target": Equal("python3 tickets.py")}))
		Expect(routes[1]).To(MatchFields(IgnoreExtras, Fields{"Prefix": Equal("mcp.notes."), "Via": Equal("mcp"), "Target": Equal("http://127.0.0.1:9/mcp")}))
		Expect(routes[2].Via).To(Equal("built-in"))
	})

	It("prints an MCP server's declared lookups, in text and JSON", func(ctx SpecContext) {
		file := scenarioFile(GinkgoT().TempDir(), "lookups.yaml", validHeader+`mcp:
  servers:
    - name: tickets
      command: [python3, tickets.py]
      lookups:
        create_ticket:
          tool: list_tickets
          found: 'response.structuredContent.tickets.exists(t, t.key == key)'
        close_ticket: {tool: get_ticket, args: '{"id": args.id}', found: 'response.structuredContent.closed'}
`)
		o := overnight(ctx, GinkgoT().TempDir(), nil, "validate", file)
		Expect(o.code).To(Equal(0), o.stdout+o.stderr)
		Expect(o.stdout).To(MatchRegexp(`lookup mcp\.tickets\.create_ticket\s+in doubt: calls list_tickets\(\{\}\), done when response\.structuredContent\.tickets\.exists\(t, t\.key == key\)`))
		Expect(o.stdout).To(MatchRegexp(`lookup mcp\.tickets\.close_ticket\s+in doubt: calls get_ticket\(\{"id": args\.id\}\), done when response\.structuredContent\.closed`))
		o = overnight(ctx, GinkgoT().TempDir(), nil, "worlds", file, "-o", "json")
		Expect(o.code).To(Equal(0), o.stderr)
		var worlds struct {
			Scenarios []struct {
				Routing []harness.Route `json:"routing"`
			} `json:"scenarios"`
		}
		Expect(json.Unmarshal([]byte(o.stdout), &worlds)).To(Succeed())
		Expect(worlds.Scenarios[0].Routing[0].Lookups).To(Equal([]harness.RouteLookup{
			{Kind: "mcp.tickets.close_ticket", Tool: "get_ticket", Args: `{"id": args.id}`, Found: "response.structuredContent.closed", At: file + ":15:23"},
			{Kind: "mcp.tickets.create_ticket", Tool: "list_tickets", Found: "response.structuredContent.tickets.exists(t, t.key == key)", At: file + ":13:11"},
		}))
	})

	It("is a usage error without a file, as JSON too", func(ctx SpecContext) {
		o := overnight(ctx, GinkgoT().TempDir(), nil, "validate", "-o", "json")
		Expect(o.code).To(Equal(3))
		Expect(errorJSON(o)).To(HaveKeyWithValue("code", "usage"))
	})
})

var _ = Describe("overnight schema", func() {
	It("prints the embedded schema, a valid draft 2020-12 schema that accepts the built-in scenarios", func(ctx SpecContext) {
		o := overnight(ctx, GinkgoT().TempDir(), nil, "schema")
		Expect(o.code).To(Equal(0), o.stderr)
		Expect(o.stdout).To(Equal(string(scenarios.SchemaJSON())))
		onDisk, err := os.ReadFile(filepath.Join(harnesstest.ModuleRoot(), "scenarios", "scenario.schema.json"))
		Expect(err).NotTo(HaveOccurred())
		Expect(o.stdout).To(Equal(string(onDisk)), "the file editors are pointed at")

		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(o.stdout))
		Expect(err).NotTo(HaveOccurred())
		Expect(doc).To(HaveKeyWithValue("$schema", "https://json-schema.org/draft/2020-12/schema"))
		meta, err := jsonschema.NewCompiler().Compile("https://json-schema.org/draft/2020-12/schema")
		Expect(err).NotTo(HaveOccurred())
		Expect(meta.Validate(doc)).To(Succeed(), "valid against the draft 2020-12 meta-schema")

		c := jsonschema.NewCompiler()
		Expect(c.AddResource("scenario.schema.json", doc)).To(Succeed())
		sch, err := c.Compile("scenario.schema.json")
		Expect(err).NotTo(HaveOccurred())
		for _, name := range []string{"deploy", "deploy-v2", "week", "logopt", "logopt-week", "logopt-rollback", "poison"} {
			raw, err := os.ReadFile(filepath.Join(harnesstest.ModuleRoot(), "scenarios", "builtin", name+".yaml"))
			Expect(err).NotTo(HaveOccurred())
			Expect(sch.Validate(yamlAsJSON(raw))).To(Succeed(), name)
		}
		Expect(sch.Validate(yamlAsJSON([]byte(validHeader + "colour: red\n")))).NotTo(Succeed())
	})
})

// yamlAsJSON reads a YAML document as the JSON value a schema validates.
func yamlAsJSON(raw []byte) any {
	GinkgoHelper()
	var v any
	Expect(yaml.Unmarshal(raw, &v)).To(Succeed())
	b, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	Expect(err).NotTo(HaveOccurred())
	return doc
}

// The problems a command prints for people: validate's on stdout (its lines
// but the "expected:" ones), run's and suite's on stderr, after "overnight: ".
func problemLines(text string) []string {
	GinkgoHelper()
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if !strings.HasPrefix(l, "    expected: ") {
			lines = append(lines, strings.TrimPrefix(l, "overnight: "))
		}
	}
	return lines
}

var _ = Describe("overnight run and suite on scenarios with problems", func() {
	It("report every problem validate reports, each at file:line:column, exit 3, and record nothing", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		unknowns := strings.Replace(strings.Replace(validHeader, "world: cloud", "world: mars", 1), "builtin: deployer", "builtin: nobody", 1)
		// Problems of what the file names only: the world, the agent, a fault's kind, an invariant.
		named := scenarioFile(dir, "named.yaml", unknowns+"faults: [meteor@step:1]\ninvariants: [fast]\n")
		// The same, with a problem of the file itself (a fault's syntax) among them.
		mixed := scenarioFile(dir, "mixed.yaml", strings.Replace(unknowns, "name: t", "name: u", 1)+"faults: [kill@stp:3]\nlimits: {timeout: 5x}\n")

		v := overnight(ctx, GinkgoT().TempDir(), nil, "validate", named, mixed)
		Expect(v.code).To(Equal(3), v.stderr)
		want := problemLines(v.stdout)
		Expect(want).To(HaveLen(8), v.stdout)
		Expect(want).To(ContainElements(
			ContainSubstring(named+`:4:8: world: unknown world "mars"`),
			ContainSubstring(named+`:5:18: agent.builtin: no built-in agent "nobody"`),
			ContainSubstring(named+`:7:10: faults[0]: fault "meteor@step:1": unknown fault kind "meteor"`),
			ContainSubstring(named+`:8:14: invariants[0]: unknown invariant "fast"`),
			ContainSubstring(mixed+`:4:8: world: unknown world "mars"`),
			ContainSubstring(mixed+`:7:15: faults[0]: invalid fault "kill@stp:3"`),
		))

		state := filepath.Join(GinkgoT().TempDir(), "state")
		var fromRun []string
		for _, file := range []string{named, mixed} {
			o := overnight(ctx, state, nil, "-q", "run", file, "--seed", "1")
			Expect(o.code).To(Equal(3), o.stdout+o.stderr)
			Expect(o.stdout).To(BeEmpty())
			fromRun = append(fromRun, problemLines(o.stderr)...)
		}
		Expect(fromRun).To(Equal(want), "run prints the problems validate prints")

		o := overnight(ctx, state, nil, "-q", "suite", named, "deploy", mixed, "--seeds", "1")
		Expect(o.code).To(Equal(3), o.stdout+o.stderr)
		Expect(problemLines(o.stderr)).To(Equal(want), "suite prints the problems of every file, as validate does")

		o = overnight(ctx, state, nil, "run", mixed, "-o", "json")
		Expect(o.code).To(Equal(3))
		e := errorJSON(o)
		Expect(e).To(HaveKeyWithValue("code", "scenario_invalid"))
		Expect(e).To(HaveKeyWithValue("line", 4.0), "at the first problem")
		Expect(strings.Split(e["message"].(string), "\n")).To(Equal(want[4:]))

		Expect(state).NotTo(BeAnExistingFile(), "nothing recorded: not even a state dir")
	})
})
