package scenarios_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/internal/schemagen"
)

var _ = Describe("the schema's source", func() {
	It("is generated from the Go types of spec.go: scenario.schema.json is what go generate writes", func() {
		want, err := schemagen.Generate(".")
		Expect(err).NotTo(HaveOccurred())
		Expect(string(scenarios.SchemaJSON())).To(Equal(string(want)),
			"scenario.schema.json is stale: run `go generate ./scenarios` and commit the result")
	})

	It("makes a scenario of the spec's Go values that Parse reads back", func() {
		seed := int64(7)
		sc, err := scenarios.FromValue(scenarios.ScenarioFile{
			APIVersion: scenarios.APIVersion, Kind: scenarios.KindScenario, Name: "typed",
			World:      scenarios.WorldFile{Name: "cloud", Options: map[string]any{"region": "eu"}},
			Agent:      scenarios.AgentFile{Builtin: "deployer", Args: []string{"--plan", "x"}, Env: map[string]string{"A": "1"}},
			Agents:     map[string]scenarios.AgentFile{"img": {Image: "a:1", Command: []string{"python3"}}},
			Task:       map[string]any{"service": "shop"},
			Faults:     []string{"kill@step:3"},
			Draws:      []scenarios.DrawFile{{Kinds: []string{"restart"}, Count: 2, Between: []string{"1d", "6d"}}},
			Sandbox:    &scenarios.SandboxFile{Network: "internal"},
			Reach:      &scenarios.ReachFile{Steps: 5, Virtual: "7d"},
			Invariants: []string{"goal-reached"},
			Limits:     &scenarios.LimitsFile{Timeout: "2m", MaxAttempts: 3},
			Reflect:    &scenarios.ReflectFile{},
			Gate:       []scenarios.GateRuleFile{{Kinds: "cloud.*", Policy: scenarios.PolicyVerify}},
			Seed:       &seed,
			LLM: &scenarios.LLMFile{
				Budget: &scenarios.LLMBudgetFile{Calls: 4},
				Prices: &scenarios.LLMPricesFile{PromptPer1K: 0, CompletionPer1K: 1},
				Rules: []scenarios.LLMRuleFile{
					{When: scenarios.LLMWhenFile{ToolOffered: "plan"}, ToolCalls: []scenarios.LLMToolCallFile{{Name: "plan", Arguments: map[string]any{"s": "$task.service"}}}},
					{Reply: "OK"},
				},
			},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(sc.Source).To(Equal("go:typed"))
		Expect(sc.World).To(Equal(scenarios.World{Name: "cloud", Options: map[string]any{"region": "eu"}}))
		Expect(sc.Agent).To(Equal(scenarios.AgentSpec{Builtin: "deployer", Args: []string{"--plan", "x"}, Env: map[string]string{"A": "1"}}))
		Expect(sc.Agents).To(Equal(map[string]scenarios.AgentSpec{"img": {Image: "a:1", Command: []string{"python3"}}}))
		Expect(sc.FaultText).To(Equal([]string{"kill@step:3"}))
		Expect(sc.Draws).To(HaveLen(1))
		Expect(sc.Sandbox.Network).To(Equal("internal"))
		Expect(sc.Reach.Steps).To(Equal(5))
		Expect(sc.Limits.MaxAttempts).To(Equal(3))
		Expect(sc.Reflect).To(Equal(&scenarios.Reflect{Replays: scenarios.DefaultReplays, Max: scenarios.DefaultReflections}))
		Expect(sc.Gate).To(Equal([]scenarios.GateRule{{Kinds: "cloud.*", Policy: "verify"}}))
		Expect(sc.Seed).To(HaveValue(Equal(seed)))
		Expect(sc.LLM.Budget.Calls).To(Equal(4))
		Expect(sc.LLM.Prices).To(Equal(&scenarios.LLMPrices{PromptPer1K: 0, CompletionPer1K: 1}))
		Expect(sc.LLM.Rules).To(HaveLen(2))
	})
})

var _ = Describe("Error.Pointer", func() {
	DescribeTable("names the value each problem is about",
		func(text string, want ...string) {
			_, err := scenarios.Parse("p.yaml", []byte(text))
			list, ok := scenarios.Problems(err)
			Expect(ok).To(BeTrue(), "%v", err)
			got := make([]string, len(list))
			for i, e := range list {
				got[i] = e.Pointer
			}
			Expect(got).To(Equal(want), err.Error())
		},
		Entry("a value of the wrong type", strings.Replace(header, "name: t", "name: 5", 1), "/name"),
		Entry("an unknown key: the key's own", header+"colour: red\n", "/colour"),
		Entry("a missing required field: the field", header+"gate:\n  - {kinds: \"cloud.*\"}\n", "/gate/0/policy"),
		Entry("a world with no name and no way to reach one: the world", strings.Replace(header, "world: cloud", "world: {options: {}}", 1), "/world"),
		Entry("a missing top-level field", "apiVersion: overnight/v1\nkind: Scenario\nname: t\nworld: cloud\n", "/agent"),
		Entry("a bad fault in a list", header+"faults: [kill@step:1, kill@stp:3]\n", "/faults/1"),
		Entry("two agent sources: the agent", header+"agents: {v: {image: i, builtin: b}}\n", "/agents/v"),
		Entry("env keys: the env mapping", strings.Replace(header, "agent: {builtin: deployer}", "agent: {builtin: d, env: {1BAD: x, OVERNIGHT_X: y}}", 1), "/agent/env", "/agent/env"),
		Entry("a duplicate key: the mapping", header+"task: {a: 1, a: 2}\n", "/task"),
		Entry("a duration, inside its text", header+"limits: {timeout: 5x}\n", "/limits/timeout"),
		Entry("the llm model", header+"llm: {model: opnai:x}\n", "/llm/model"),
		Entry("a gate policy", header+"gate: [{kinds: a, policy: verify}]\n", "/gate/0/policy"),
		Entry("reply and tool_calls: the rule", header+"llm: {rules: [{when: {}, reply: x, tool_calls: [{name: f}]}]}\n", "/llm/rules/0"),
		Entry("a $task reference", header+"llm: {rules: [{when: {}, tool_calls: [{name: f, arguments: {a: $task.nope}}]}]}\n", "/llm/rules/0/tool_calls/0/arguments/a"),
		Entry("not YAML: the document", header+"task:\n  a: 1\n b: 2\n", ""),
		Entry("another apiVersion", strings.Replace(header, "overnight/v1", "overnight/v2", 1), "/apiVersion"),
	)

	It("is kept by ErrorAt, for checks that run after Parse", func() {
		sc := mustParse("p.yaml", header+"task: {service: {}}\n")
		e := sc.ErrorAt("/task/service/name", "missing")
		Expect(e.Pointer).To(Equal("/task/service/name"))
		Expect(e.Line).To(Equal(6), "the nearest written value: task.service")
		Expect(e.Column).To(Equal(17))
	})
})

var _ = Describe("Expected", func() {
	DescribeTable("says what the schema expects at a pointer, from the spec's tags and doc comments",
		func(pointer, want string) {
			Expect(scenarios.Expected(pointer)).To(Equal(want))
		},
		Entry("a constrained string", "/name",
			"a string matching ^[a-z0-9][a-z0-9-]*$ of at most 63 characters — Scenario name: lowercase letters, digits and '-', starting with a letter or digit."),
		Entry("a string or a mapping", "/world",
			"a string matching ^[a-z0-9][a-z0-9-]*$ or a mapping with keys command, env, image, name, options, port, url — The world the agent acts on: a built-in's name (overnight worlds lists them), or {name, options}, or a world of your own over the world protocol — {url}, {command} or {image, port} (docs/worlds.md). Required unless the scenario declares http: APIs or mcp: servers."),
		Entry("an integer range", "/limits/max_attempts", "an integer from 1 to 1000 — Maximum number of attempts (default 10)."),
		Entry("an exclusive minimum", "/llm/budget/cost_usd", "a number greater than 0 and at most 1000000 — Maximum cost in US dollars."),
		Entry("an enum", "/gate/3/policy",
			`one of "allow", "verify", "approve", "deny" — allow; verify (guarded by reflection, which needs a reflect block); approve (held for a person); deny (never executed).`),
		Entry("a list item takes its list's description", "/faults/0",
			"a string — Fault specs, KIND[:ARG]@TRIGGER[/DURATION], such as kill@step:3 or netdrop@t:36h/2h (overnight faults lists the kinds)."),
		Entry("a pair", "/draws/0/between", "a list of 2 strings — The virtual-time window [from, to) the faults fire in, such as [1d, 6d]."),
		Entry("a mapping's keys", "/agent/env",
			"a mapping of names matching ^[A-Za-z_][A-Za-z0-9_]*$ to a string (or nothing) — Environment variables of the agent; OVERNIGHT_* is reserved for the harness."),
		Entry("through a $ref", "/agents/naive/builtin", "a string matching ^[a-z0-9][a-z0-9-]*$ — An example agent built into the overnight binary (deployer, maintainer, ...)."),
		Entry("nullable", "/seed", "an integer (or nothing) — Default seed of a run (int64); --seed overrides it, and without either the seed is 1."),
		Entry("an unknown key", "/limits/nope", ""),
		Entry("inside a free-form value", "/task/service/name", ""),
		Entry("not a pointer", "name", ""),
	)
})
