package scenarios_test

import (
	"encoding/json"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios"
)

// rulesJSON joins a scenario's rules into one JSON list, for MatchJSON.
func rulesJSON(l *scenarios.LLM) string {
	GinkgoHelper()
	b, err := json.Marshal(l.Rules)
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

var _ = Describe("the llm block", func() {
	It("reads every field", func() {
		sc, err := scenarios.Load("testdata/llm.yaml")
		Expect(err).NotTo(HaveOccurred())
		Expect(sc.LLM).NotTo(BeNil())
		Expect(sc.LLM.Model).To(Equal("scripted"))
		Expect(sc.LLM.Budget).To(Equal(scenarios.LLMBudget{Calls: 40, Tokens: 200000, CostUSD: 0.5}))
		Expect(sc.LLM.Prices).To(Equal(&scenarios.LLMPrices{PromptPer1K: 0.00015, CompletionPer1K: 0.0006}))
		Expect(sc.LLM.Rules).To(HaveLen(3))
		Expect(rulesJSON(sc.LLM)).To(MatchJSON(`[
			{"when": {"tool_offered": "plan_deployment"},
			 "tool_calls": [{"name": "plan_deployment", "arguments": {"steps": ["create_network", "create_database"]}}]},
			{"when": {"last_message_contains": "field_renamed", "last_role": "tool"},
			 "tool_calls": [{"name": "correct_request", "arguments": {"rename": "$details.renamed", "note": "$$ not a reference", "retries": 2}}]},
			{"when": {}, "reply": "OK"}
		]`))
		Expect(string(sc.LLM.Rules[2])).To(Equal(`{"reply":"OK","when":{}}`), "each rule is one compact JSON object")
	})

	It("is nil when absent or null, and defaults the model to scripted", func() {
		Expect(mustParse("a.yaml", header).LLM).To(BeNil())
		Expect(mustParse("n.yaml", header+"llm:\n").LLM).To(BeNil())

		l := mustParse("d.yaml", header+"llm: {rules: [{when: {}, reply: hi}]}\n").LLM
		Expect(l.Model).To(Equal(scenarios.DefaultLLMModel))
		Expect(l.Budget).To(Equal(scenarios.LLMBudget{}))
		Expect(l.Prices).To(BeNil())
		Expect(rulesJSON(l)).To(MatchJSON(`[{"when": {}, "reply": "hi"}]`))

		empty := mustParse("e.yaml", header+"llm:\n  budget:\n  prices:\n  rules:\n").LLM
		Expect(empty).To(Equal(&scenarios.LLM{Model: "scripted"}))
		Expect(mustParse("e.yaml", header+"llm: {rules: []}\n").LLM.Rules).To(BeNil())
	})

	It("accepts each provider, with model names that hold colons, and prices of zero", func() {
		for _, model := range []string{"scripted", "openai:gpt-4o-mini", "anthropic:claude-3-5-haiku-latest", "ollama:llama3:8b", "openai:org/model-v1.2"} {
			l := mustParse("m.yaml", header+"llm: {model: \""+model+"\", prices: {prompt_per_1k: 0, completion_per_1k: 1}}\n").LLM
			Expect(l.Model).To(Equal(model))
			Expect(l.Prices).To(Equal(&scenarios.LLMPrices{PromptPer1K: 0, CompletionPer1K: 1}))
			Expect(l.Rules).To(BeNil())
		}
	})

	It("accepts whole-object and escaped references, and numbers written as floats", func() {
		l := mustParse("r.yaml", header+`llm:
  budget: {calls: 1e3, cost_usd: 2}
  rules:
    - when: {last_role: tool}
      tool_calls: [{name: f, arguments: {all: "$.", field: "$.a.b", list: ["$x.0", {deep: "$$"}], money: "$$5"}}, {name: g}]
`).LLM
		Expect(l.Budget).To(Equal(scenarios.LLMBudget{Calls: 1000, CostUSD: 2}))
		Expect(rulesJSON(l)).To(MatchJSON(`[{"when": {"last_role": "tool"}, "tool_calls": [
			{"name": "f", "arguments": {"all": "$.", "field": "$.a.b", "list": ["$x.0", {"deep": "$$"}], "money": "$$5"}},
			{"name": "g"}]}]`))
	})

	DescribeTable("reports each problem at its file:line:column",
		func(block string, want ...string) {
			_, err := scenarios.Parse("t.yaml", []byte(header+block))
			Expect(positioned("t.yaml", err)).To(Equal(want))
		},
		// The block starts on line 6; "llm: {model: " puts the model's value at column 14.
		Entry("replay in a file", "llm: {model: \"replay:run-1\"}\n",
			`6:15: llm.model: "replay:run-1": replay is chosen on the command line (--llm replay:RUN-ID), not in a scenario; want scripted, openai:MODEL, anthropic:MODEL or ollama:MODEL`),
		Entry("an unknown provider, with a suggestion", "llm: {model: opnai:gpt-4o}\n",
			`6:14: llm.model: "opnai:gpt-4o": unknown provider "opnai" (did you mean "openai"?); want scripted, openai:MODEL, anthropic:MODEL or ollama:MODEL`),
		Entry("a provider without a model", "llm: {model: anthropic}\n",
			`6:14: llm.model: "anthropic": anthropic needs a model name: anthropic:MODEL, such as openai:gpt-4o-mini or ollama:llama3`),
		Entry("an empty model after the colon", "llm:\n  model: 'ollama:'\n",
			`7:17: llm.model: "ollama:": ollama needs a model name: ollama:MODEL, such as openai:gpt-4o-mini or ollama:llama3`),
		Entry("a model name for the scripted model", "llm: {model: scripted:v2}\n",
			`6:22: llm.model: "scripted:v2": the scripted model takes no model name; write scripted`),
		Entry("a space in a model name", "llm: {model: \"ollama:llama 3\"}\n",
			`6:27: llm.model: "ollama:llama 3": a model name has no spaces`),
		Entry("an empty model", "llm: {model: \"\"}\n",
			`6:14: llm.model: must not be empty`),
		Entry("a model that is not text", "llm: {model: 4}\n",
			`6:14: llm.model: got number, want string (quote it to make it text: "4")`),
		Entry("an unknown field of the block", "llm: {modle: scripted}\n",
			`6:7: llm: unknown field "modle" (did you mean "model"?); allowed: budget, model, prices, rules`),
		Entry("budgets out of range or of the wrong type", "llm:\n  budget:\n    calls: 0\n    tokens: 1.5\n    cost_usd: 0\n",
			`8:12: llm.budget.calls: 0 is too small (at least 1)`,
			`9:13: llm.budget.tokens: got number, want integer`,
			`10:15: llm.budget.cost_usd: 0 is too small (it must be greater than 0)`),
		Entry("a negative budget and an unknown budget key", "llm: {budget: {cost_usd: -0.25, call: 3}}\n",
			`6:26: llm.budget.cost_usd: -0.25 is too small (it must be greater than 0)`,
			`6:33: llm.budget: unknown field "call" (did you mean "calls"?); allowed: calls, cost_usd, tokens`),
		Entry("prices missing one and negative", "llm: {prices: {prompt_per_1k: -1}}\n",
			`6:15: llm.prices: missing required field "completion_per_1k"`,
			`6:31: llm.prices.prompt_per_1k: -1 is too small (at least 0)`),
		Entry("rules that are not a list", "llm: {rules: {when: {}}}\n",
			`6:14: llm.rules: got object, want null or array`),
		Entry("a rule with both reply and tool_calls, at the second", "llm:\n  rules:\n    - when: {}\n      tool_calls: [{name: f}]\n      reply: hi\n",
			`10:7: llm.rules[0]: reply and tool_calls are both set; set exactly one`),
		Entry("a rule with both, reply first: at tool_calls", "llm: {rules: [{when: {}, reply: x, tool_calls: [{name: f}]}]}\n",
			`6:36: llm.rules[0]: reply and tool_calls are both set; set exactly one`),
		Entry("a rule with neither, and one without when", "llm:\n  rules:\n    - when: {last_role: user}\n    - reply: hi\n",
			`8:7: llm.rules[0]: set reply (a text answer) or tool_calls (a list of {name, arguments})`,
			`9:7: llm.rules[1]: missing required field "when"`),
		Entry("a null when", "llm: {rules: [{when: , reply: x}]}\n",
			`6:22: llm.rules[0].when: got null, want object (the value is empty)`),
		Entry("unknown match keys, with a suggestion", "llm: {rules: [{when: {tool_offerd: f, last_message: x}, reply: x}]}\n",
			`6:23: llm.rules[0].when: unknown field "tool_offerd" (did you mean "tool_offered"?); allowed: last_message_contains, last_role, prompt_contains, tool_offered`,
			`6:39: llm.rules[0].when: unknown field "last_message"; allowed: last_message_contains, last_role, prompt_contains, tool_offered`),
		Entry("an unknown role and empty conditions", "llm: {rules: [{when: {last_role: robot, tool_offered: \"\", last_message_contains: ''}, reply: x}]}\n",
			`6:34: llm.rules[0].when.last_role: got "robot", want one of "system", "developer", "user", "assistant", "tool"`,
			`6:55: llm.rules[0].when.tool_offered: must not be empty`,
			`6:82: llm.rules[0].when.last_message_contains: must not be empty`),
		Entry("an empty reply", "llm: {rules: [{when: {}, reply: ''}]}\n",
			`6:33: llm.rules[0].reply: must not be empty`),
		Entry("an empty list of tool calls", "llm: {rules: [{when: {}, tool_calls: []}]}\n",
			`6:38: llm.rules[0].tool_calls: a list of 0 is too short (at least 1)`),
		Entry("tool calls without a name, with an empty one, with an unknown key", "llm:\n  rules:\n    - when: {}\n      tool_calls:\n        - {arguments: {}}\n        - {name: \"\"}\n        - {name: f, args: {}}\n",
			`10:11: llm.rules[0].tool_calls[0]: missing required field "name"`,
			`11:18: llm.rules[0].tool_calls[1].name: must not be empty`,
			`12:21: llm.rules[0].tool_calls[2]: unknown field "args"; allowed: arguments, name`),
		Entry("arguments that are not a mapping", "llm: {rules: [{when: {}, tool_calls: [{name: f, arguments: [1]}]}]}\n",
			`6:60: llm.rules[0].tool_calls[0].arguments: got array, want null or object`),
		Entry("invalid references, nested, at their positions", "llm:\n  rules:\n    - when: {}\n      tool_calls:\n        - name: f\n          arguments:\n            a: \"$\"\n            b: [ok, \"$x..y\"]\n            c: {d: \"$.\", e: \"$..\"}\n",
			`12:16: llm.rules[0].tool_calls[0].arguments.a: invalid reference "$": write $task.PATH for a field of the scenario's task, $message.PATH (or $PATH) for a field of the last message's JSON object, $task or $message for the whole of one, or $$ for a literal $`,
			`13:21: llm.rules[0].tool_calls[0].arguments.b[1]: invalid reference "$x..y": empty field name between dots (write $$ at the start for a literal $)`,
			`14:29: llm.rules[0].tool_calls[0].arguments.c.e: invalid reference "$..": empty field name between dots (write $$ at the start for a literal $)`),
		// The task is written on lines 6-7; the rules start on line 8.
		Entry("$task paths the scenario's task does not hold, at the step that fails",
			"task: {network: prod-net, service: {name: api}, hosts: [a, b]}\n"+
				"llm:\n  rules:\n    - when: {}\n      tool_calls:\n        - name: f\n          arguments:\n"+
				"            a: $task.netwrk\n"+
				"            b: \"$task.service.image\"\n"+
				"            c: [$task.hosts.2, $task.network.name]\n"+
				"            d: $task.\n",
			`13:22: llm.rules[0].tool_calls[0].arguments.a: "$task.netwrk": the scenario's task has no field "netwrk" at $task (did you mean "network"?); fields there: hosts, network, service`,
			`14:31: llm.rules[0].tool_calls[0].arguments.b: "$task.service.image": the scenario's task has no field "image" at $task.service; fields there: name`,
			`15:29: llm.rules[0].tool_calls[0].arguments.c[0]: "$task.hosts.2": $task.hosts is a list of 2, and "2" is not an index into it`,
			`15:46: llm.rules[0].tool_calls[0].arguments.c[1]: "$task.network.name": $task.network is the string "prod-net", which has no field "name"`,
			`16:16: llm.rules[0].tool_calls[0].arguments.d: invalid reference "$task.": empty field name after the dot (write $task for the whole of it)`),
		Entry("a $task path in a scenario without a task", "llm: {rules: [{when: {}, tool_calls: [{name: f, arguments: {n: $task.network}}]}]}\n",
			`6:70: llm.rules[0].tool_calls[0].arguments.n: "$task.network": the scenario's task has no field "network" at $task; fields there: none`),
	)

	It("accepts $task paths the task holds, and $message paths whatever they name", func() {
		l := mustParse("ok.yaml", header+`task: {network: prod-net, migration: 3, hosts: [a, b], service: {name: api}}
llm:
  rules:
    - when: {}
      tool_calls: [{name: f, arguments: {all: $task, n: $task.network, m: $task.migration, h: $task.hosts.1, s: $task.service.name,
        msg: $message, e: $message.error.details.renamed, short: $error.details.renamed, t: $.task.anything, w: $message.task.x}}]
`).LLM
		Expect(l.Rules).To(HaveLen(1))
	})

	It("names the llm fields in the schema editors read", func() {
		var schema struct {
			Properties struct {
				LLM struct {
					Properties map[string]json.RawMessage `json:"properties"`
				} `json:"llm"`
			} `json:"properties"`
			Defs map[string]json.RawMessage `json:"$defs"`
		}
		Expect(json.Unmarshal(scenarios.SchemaJSON(), &schema)).To(Succeed())
		Expect(schema.Properties.LLM.Properties).To(HaveKey("model"))
		Expect(schema.Properties.LLM.Properties).To(HaveKey("budget"))
		Expect(schema.Properties.LLM.Properties).To(HaveKey("prices"))
		Expect(schema.Properties.LLM.Properties).To(HaveKey("rules"))
		Expect(schema.Defs).To(HaveKey("llmRule"))
		Expect(strings.Contains(string(schema.Defs["llmRule"]), `"last_message_contains"`)).To(BeTrue())
	})
})
