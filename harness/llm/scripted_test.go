package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/llm"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/builtin"
)

// msg builds a message with text content.
func msg(role, text string) protocol.ChatMessage {
	return protocol.ChatMessage{Role: role, Content: protocol.MessageContent{Text: text}}
}

// tool offers a function by name.
func tool(name string) protocol.ChatTool {
	return protocol.ChatTool{Type: "function", Function: protocol.ChatFunction{Name: name}}
}

func request(tools []protocol.ChatTool, messages ...protocol.ChatMessage) protocol.ChatRequest {
	return protocol.ChatRequest{Model: "whatever", Messages: messages, Tools: tools}
}

func newScripted(rules ...llm.Rule) *llm.Scripted {
	GinkgoHelper()
	s, err := llm.NewScripted("", rules)
	Expect(err).NotTo(HaveOccurred())
	return s
}

func complete(s *llm.Scripted, req protocol.ChatRequest) protocol.ChatResponse {
	GinkgoHelper()
	resp, err := s.Complete(context.Background(), req)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.Choices).To(HaveLen(1))
	return resp
}

// answer is the reply text, or "call NAME ARGS; ..." for tool calls.
func answer(resp protocol.ChatResponse) string {
	m := resp.Choices[0].Message
	if len(m.ToolCalls) == 0 {
		return m.Content.Text
	}
	parts := make([]string, len(m.ToolCalls))
	for i, c := range m.ToolCalls {
		parts[i] = "call " + c.Function.Name + " " + c.Function.Arguments
	}
	return strings.Join(parts, "; ")
}

// est is the documented estimate: four bytes a token, rounded up.
func est(s string) int { return (len(s) + 3) / 4 }

var _ = Describe("Scripted", func() {
	It("declares itself as the scripted test double", func() {
		s := newScripted()
		Expect(s.Provider()).To(Equal("scripted"))
		Expect(s.Name()).To(Equal("scripted"))
		named, err := llm.NewScripted("deploy-double", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(named.Name()).To(Equal("deploy-double"))
		var m llm.Model = named
		resp, err := m.Complete(context.Background(), request(nil, msg("user", "hi")))
		Expect(err).To(MatchError(llm.ErrNoRule))
		Expect(resp.Choices).To(BeEmpty())
	})

	Describe("matching", func() {
		It("answers with the first rule that matches, in order", func() {
			s := newScripted(
				llm.Rule{When: llm.Match{LastMessageContains: "deploy"}, Reply: "first"},
				llm.Rule{When: llm.Match{LastMessageContains: "deploy"}, Reply: "second"},
				llm.Rule{When: llm.Match{}, Reply: "default"},
			)
			Expect(answer(complete(s, request(nil, msg("user", "please deploy"))))).To(Equal("first"))
			Expect(answer(complete(s, request(nil, msg("user", "something else"))))).To(Equal("default"))
		})

		It("matches a substring of the last message only, case-sensitively", func() {
			s := newScripted(
				llm.Rule{When: llm.Match{LastMessageContains: "field_renamed"}, Reply: "renamed"},
				llm.Rule{When: llm.Match{}, Reply: "default"},
			)
			Expect(answer(complete(s, request(nil, msg("tool", `{"code":"field_renamed"}`))))).To(Equal("renamed"))
			Expect(answer(complete(s, request(nil, msg("tool", `{"code":"FIELD_RENAMED"}`))))).To(Equal("default"))
			Expect(answer(complete(s, request(nil, msg("user", "field_renamed earlier"), msg("user", "now"))))).To(Equal("default"),
				"only the last message counts")
		})

		It("matches text given as a list of parts", func() {
			var m protocol.ChatMessage
			Expect(json.Unmarshal([]byte(`{"role":"user","content":[{"type":"text","text":"field_"},{"type":"text","text":"renamed"}]}`), &m)).To(Succeed())
			s := newScripted(llm.Rule{When: llm.Match{LastMessageContains: "field_renamed"}, Reply: "renamed"})
			Expect(answer(complete(s, request(nil, m)))).To(Equal("renamed"))
		})

		It("matches the role of the last message", func() {
			s := newScripted(
				llm.Rule{When: llm.Match{LastRole: "tool"}, Reply: "after a tool"},
				llm.Rule{When: llm.Match{LastRole: "user"}, Reply: "after the user"},
			)
			Expect(answer(complete(s, request(nil, msg("user", "x"), msg("tool", "y"))))).To(Equal("after a tool"))
			Expect(answer(complete(s, request(nil, msg("tool", "y"), msg("user", "x"))))).To(Equal("after the user"))
			_, err := s.Complete(context.Background(), request(nil, msg("system", "x")))
			Expect(err).To(MatchError(llm.ErrNoRule))
		})

		It("matches a tool offered in the request", func() {
			s := newScripted(
				llm.Rule{When: llm.Match{ToolOffered: "plan_deployment"}, Reply: "planning"},
				llm.Rule{When: llm.Match{}, Reply: "default"},
			)
			Expect(answer(complete(s, request([]protocol.ChatTool{tool("other"), tool("plan_deployment")}, msg("user", "x"))))).To(Equal("planning"))
			Expect(answer(complete(s, request([]protocol.ChatTool{tool("plan")}, msg("user", "x"))))).To(Equal("default"))
			Expect(answer(complete(s, request(nil, msg("user", "x"))))).To(Equal("default"))
		})

		It("needs every condition of a rule to hold", func() {
			s := newScripted(
				llm.Rule{When: llm.Match{LastRole: "tool", LastMessageContains: "error", ToolOffered: "fix"}, Reply: "all three"},
				llm.Rule{When: llm.Match{}, Reply: "default"},
			)
			tools := []protocol.ChatTool{tool("fix")}
			Expect(answer(complete(s, request(tools, msg("tool", "an error"))))).To(Equal("all three"))
			Expect(answer(complete(s, request(tools, msg("user", "an error"))))).To(Equal("default"))
			Expect(answer(complete(s, request(tools, msg("tool", "fine"))))).To(Equal("default"))
			Expect(answer(complete(s, request(nil, msg("tool", "an error"))))).To(Equal("default"))
		})

		It("answers a request without messages with a rule that needs none", func() {
			s := newScripted(llm.Rule{When: llm.Match{LastRole: "user"}, Reply: "no"}, llm.Rule{Reply: "yes"})
			Expect(answer(complete(s, request(nil)))).To(Equal("yes"))
		})

		It("says which last message no rule matches, and lists the rules", func() {
			s := newScripted(
				llm.Rule{When: llm.Match{ToolOffered: "plan_deployment"}, Reply: "a"},
				llm.Rule{When: llm.Match{LastMessageContains: "field_renamed", LastRole: "tool"}, Reply: "b"},
			)
			_, err := s.Complete(context.Background(), request([]protocol.ChatTool{tool("x")}, msg("user", "hello there")))
			Expect(errors.Is(err, llm.ErrNoRule)).To(BeTrue())
			Expect(err).To(MatchError(`scripted model: no rule matches the last message "hello there" (role "user"; tools offered: x; ` +
				`rules: [0] {tool_offered: plan_deployment}, [1] {last_message_contains: "field_renamed", last_role: tool}); ` +
				`add a rule that matches it, or a default rule with when: {} at the end`))

			long := strings.Repeat("é", 300)
			_, err = newScripted().Complete(context.Background(), request(nil, msg("user", long)))
			Expect(err).To(MatchError(ContainSubstring(`"` + strings.Repeat("é", 200) + `…"`)))
			Expect(err).To(MatchError(ContainSubstring("rules: none; add rules to the scenario's llm.rules")))
		})
	})

	Describe("the response", func() {
		It("is a chat completion with a text answer", func() {
			s := newScripted(llm.Rule{Reply: "All done."})
			resp := complete(s, request(nil, msg("user", "go")))
			Expect(resp.Object).To(Equal("chat.completion"))
			Expect(resp.Model).To(Equal("scripted"))
			Expect(resp.ID).To(MatchRegexp(`^chatcmpl-scripted-[0-9a-f]{24}$`))
			Expect(resp.Created).To(BeZero())
			Expect(resp.Choices[0].Index).To(Equal(0))
			Expect(resp.Choices[0].FinishReason).To(Equal("stop"))
			Expect(resp.Choices[0].Message.Role).To(Equal("assistant"))
			Expect(resp.Choices[0].Message.Content).To(Equal(protocol.MessageContent{Text: "All done."}))
			Expect(resp.Choices[0].Message.ToolCalls).To(BeEmpty())
		})

		It("answers tool calls in order with ids call_1, call_2 and canonical arguments", func() {
			s := newScripted(llm.Rule{ToolCalls: []llm.ScriptedCall{
				{Name: "plan_deployment", Arguments: map[string]any{
					"steps": []any{"create_network", "create_database"},
					"b":     map[string]any{"z": 1, "a": 2.5, "m": nil},
					"a":     "<&>",
					"big":   json.Number("12345678901234567890"),
				}},
				{Name: "noop"},
			}})
			resp := complete(s, request([]protocol.ChatTool{tool("plan_deployment")}, msg("user", "plan")))
			Expect(resp.Choices[0].FinishReason).To(Equal("tool_calls"))
			m := resp.Choices[0].Message
			Expect(m.Content).To(Equal(protocol.MessageContent{Null: true}))
			Expect(m.ToolCalls).To(Equal([]protocol.ChatToolCall{
				{ID: "call_1", Type: "function", Function: protocol.ChatFunctionCall{Name: "plan_deployment",
					Arguments: `{"a":"<&>","b":{"a":2.5,"m":null,"z":1},"big":12345678901234567890,"steps":["create_network","create_database"]}`}},
				{ID: "call_2", Type: "function", Function: protocol.ChatFunctionCall{Name: "noop", Arguments: `{}`}},
			}))
			b, err := json.Marshal(resp)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(b)).To(ContainSubstring(`"content":null`))
		})

		It("is byte-identical for the same request, and its ID differs for another", func() {
			args := map[string]any{}
			for i := range 40 {
				args[fmt.Sprintf("k%02d", i)] = map[string]any{"x": i, "y": []any{i, "s"}}
			}
			args["ref"] = "$details"
			s := newScripted(llm.Rule{When: llm.Match{LastRole: "tool"}, ToolCalls: []llm.ScriptedCall{{Name: "f", Arguments: args}}})
			details := map[string]any{}
			for i := range 40 {
				details[fmt.Sprintf("d%02d", i)] = i
			}
			content, err := json.Marshal(map[string]any{"details": details})
			Expect(err).NotTo(HaveOccurred())
			req := request([]protocol.ChatTool{tool("f")}, msg("user", "go"), msg("tool", string(content)))

			first, err := json.Marshal(complete(s, req))
			Expect(err).NotTo(HaveOccurred())
			for range 20 {
				again, err := json.Marshal(complete(s, req))
				Expect(err).NotTo(HaveOccurred())
				Expect(again).To(Equal(first))
			}
			other := req
			other.Messages = append([]protocol.ChatMessage{msg("system", "be brief")}, req.Messages...)
			Expect(complete(s, other).ID).NotTo(Equal(complete(s, req).ID))
			renamed, err := llm.NewScripted("other-name", []llm.Rule{{When: llm.Match{LastRole: "tool"}, ToolCalls: []llm.ScriptedCall{{Name: "f", Arguments: args}}}})
			Expect(err).NotTo(HaveOccurred())
			Expect(complete(renamed, req).ID).NotTo(Equal(complete(s, req).ID))
		})

		It("does not change when the caller changes the rules it passed", func() {
			args := map[string]any{"n": 1, "list": []any{"a"}}
			rules := []llm.Rule{{ToolCalls: []llm.ScriptedCall{{Name: "f", Arguments: args}}}}
			s := newScripted(rules...)
			args["n"] = 2
			args["list"].([]any)[0] = "changed"
			rules[0].ToolCalls[0].Name = "g"
			Expect(answer(complete(s, request(nil, msg("user", "x"))))).To(Equal(`call f {"list":["a"],"n":1}`))
		})

		It("estimates usage at four bytes a token over the prompt, the tools and the answer", func() {
			history := protocol.ChatMessage{Role: "assistant", Content: protocol.MessageContent{Null: true}, ToolCalls: []protocol.ChatToolCall{
				{ID: "call_1", Type: "function", Function: protocol.ChatFunctionCall{Name: "x", Arguments: "{}"}},
			}}
			req := request([]protocol.ChatTool{tool("plan_deployment")},
				msg("system", "You deploy."), msg("user", "deploy shop"), history, msg("tool", `{"ok":true}`))
			wantPrompt := est("You deploy.") + est("deploy shop") +
				est(`[{"id":"call_1","type":"function","function":{"name":"x","arguments":"{}"}}]`) + est(`{"ok":true}`) +
				est(`[{"type":"function","function":{"name":"plan_deployment"}}]`)
			Expect(wantPrompt).To(Equal(3+3+19+3+15), "the estimate rule itself: (len+3)/4 per text")

			reply := newScripted(llm.Rule{Reply: "Deployed the shop."})
			Expect(complete(reply, req).Usage).To(Equal(&protocol.ChatUsage{
				PromptTokens: wantPrompt, CompletionTokens: est("Deployed the shop."), TotalTokens: wantPrompt + 5,
			}))

			calls := newScripted(llm.Rule{ToolCalls: []llm.ScriptedCall{{Name: "plan_deployment", Arguments: map[string]any{"steps": []any{"a", "b"}}}}})
			wantCompletion := est(`[{"id":"call_1","type":"function","function":{"name":"plan_deployment","arguments":"{\"steps\":[\"a\",\"b\"]}"}}]`)
			Expect(complete(calls, req).Usage).To(Equal(&protocol.ChatUsage{
				PromptTokens: wantPrompt, CompletionTokens: wantCompletion, TotalTokens: wantPrompt + wantCompletion,
			}))
		})

		It("stops when its context is done", func() {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := newScripted(llm.Rule{Reply: "x"}).Complete(ctx, request(nil, msg("user", "x")))
			Expect(err).To(MatchError(context.Canceled))
		})
	})

	Describe("references into the last message's JSON object", func() {
		fixer := func(args map[string]any) *llm.Scripted {
			return newScripted(llm.Rule{When: llm.Match{LastMessageContains: "field_renamed"},
				ToolCalls: []llm.ScriptedCall{{Name: "correct_request", Arguments: args}}})
		}
		worldError := `The effect failed: {"code":"field_renamed","details":{"renamed":{"database_id":"db_id"},"attempts":[3,{"at":"2024-01-02"}]}} -- retry?`

		It("proposes the correction an error's details describe", func() {
			s := fixer(map[string]any{"rename": "$details.renamed"})
			Expect(answer(complete(s, request(nil, msg("user", "go"), msg("tool", worldError))))).
				To(Equal(`call correct_request {"rename":{"database_id":"db_id"}}`))
		})

		It("resolves references nested in maps and lists, list indexes, and the whole object", func() {
			s := fixer(map[string]any{
				"all":    "$.",
				"same":   "$.details.renamed.database_id",
				"nested": map[string]any{"list": []any{"$code", "$details.attempts.0", map[string]any{"at": "$details.attempts.1.at"}}},
				"plain":  "text $not a reference",
			})
			Expect(answer(complete(s, request(nil, msg("tool", worldError))))).To(Equal(`call correct_request {` +
				`"all":{"code":"field_renamed","details":{"attempts":[3,{"at":"2024-01-02"}],"renamed":{"database_id":"db_id"}}},` +
				`"nested":{"list":["field_renamed",3,{"at":"2024-01-02"}]},` +
				`"plain":"text $not a reference",` +
				`"same":"db_id"}`))
		})

		It("reads $$ as a literal $", func() {
			s := fixer(map[string]any{"price": "$$5.00", "two": "$$$x", "ref": "$code"})
			Expect(answer(complete(s, request(nil, msg("tool", worldError))))).
				To(Equal(`call correct_request {"price":"$5.00","ref":"field_renamed","two":"$$x"}`))
			noRefs := fixer(map[string]any{"price": "$$5.00"})
			Expect(answer(complete(noRefs, request(nil, msg("tool", "field_renamed, no JSON here"))))).
				To(Equal(`call correct_request {"price":"$5.00"}`), "an escaped $ needs no JSON object")
		})

		It("skips braces that do not start a JSON object, and keeps numbers as written", func() {
			s := fixer(map[string]any{"v": "$v", "n": "$n"})
			text := `field_renamed: set {x} to {"broken": } then {"v":{"deep":true},"n":1.50e3} and {"v":2}`
			Expect(answer(complete(s, request(nil, msg("tool", text))))).
				To(Equal(`call correct_request {"n":1.50e3,"v":{"deep":true}}`))
		})

		It("names a path the object does not hold", func() {
			s := fixer(map[string]any{"a": "$details.renamed", "b": map[string]any{"c": "$details.missing.x"}})
			_, err := s.Complete(context.Background(), request(nil, msg("tool", worldError)))
			Expect(errors.Is(err, llm.ErrReference)).To(BeTrue())
			Expect(err).To(MatchError(`scripted model: unresolved reference: rules[0].tool_calls[0].arguments.b.c: "$details.missing.x": ` +
				`the last message's JSON object has no field "missing" at $.details (fields there: attempts, renamed; write $$ for a literal $)`))

			for ref, want := range map[string]string{
				"$details.attempts.2":      `"$details.attempts.2": $.details.attempts is a list of 2, and "2" is not an index into it`,
				"$details.attempts.first":  `"$details.attempts.first": $.details.attempts is a list of 2, and "first" is not an index into it`,
				"$code.length":             `"$code.length": $.code is the string "field_renamed", which has no field "length"`,
				"$details.attempts.0.when": `"$details.attempts.0.when": $.details.attempts.0 is the number 3, which has no field "when"`,
			} {
				_, err := fixer(map[string]any{"x": ref}).Complete(context.Background(), request(nil, msg("tool", worldError)))
				Expect(errors.Is(err, llm.ErrReference)).To(BeTrue())
				Expect(err).To(MatchError(ContainSubstring(want)))
			}
		})

		It("says when the last message holds no JSON object", func() {
			s := fixer(map[string]any{"x": "$code"})
			_, err := s.Complete(context.Background(), request(nil, msg("tool", `field_renamed {"a" [1]} and ["not", "an object"]`)))
			Expect(errors.Is(err, llm.ErrReference)).To(BeTrue())
			Expect(err).To(MatchError(ContainSubstring(`rules[0].tool_calls[0].arguments: the last message holds no JSON object to resolve references against`)))
		})
	})

	Describe("references into the run's task and into the last message", func() {
		task := json.RawMessage(`{"network":"prod-net","migration":3,"ratio":1.50,"service":{"name":"api","image":"registry.local/api:1.4.2"},"hosts":["a.example","b.example"]}`)
		// The last message also holds a "task", different from the run's: $task must not read it.
		brief := `{"error":{"code":"field_renamed","details":{"renamed":{"database_id":"db_id"}}},"message":"refused","task":{"network":"from-the-message"}}`
		withTask := func(args map[string]any) (*llm.Scripted, error) {
			return llm.NewScripted("", []llm.Rule{{ToolCalls: []llm.ScriptedCall{{Name: "f", Arguments: args}}}}, llm.WithTask(task))
		}
		call := func(args map[string]any, last string) string {
			GinkgoHelper()
			s, err := withTask(args)
			Expect(err).NotTo(HaveOccurred())
			return answer(complete(s, request(nil, msg("user", last))))
		}

		It("reads $task from the run's task, not from the last message", func() {
			Expect(call(map[string]any{
				"name":    "$task.network",
				"version": "$task.migration",
				"ratio":   "$task.ratio",
				"image":   "$task.service.image",
				"second":  "$task.hosts.1",
				"service": "$task.service",
			}, brief)).To(Equal(`call f {"image":"registry.local/api:1.4.2","name":"prod-net","ratio":1.50,"second":"b.example",` +
				`"service":{"image":"registry.local/api:1.4.2","name":"api"},"version":3}`))
			Expect(call(map[string]any{"all": "$task"}, brief)).To(Equal(`call f {"all":` +
				`{"hosts":["a.example","b.example"],"migration":3,"network":"prod-net","ratio":1.50,"service":{"image":"registry.local/api:1.4.2","name":"api"}}}`))
		})

		It("needs no JSON object in the last message when every reference is into the task", func() {
			Expect(call(map[string]any{"name": "$task.network", "price": "$$5"}, "plan the deployment")).
				To(Equal(`call f {"name":"prod-net","price":"$5"}`))
		})

		It("reads $message, $PATH and $.PATH from the last message's first JSON object", func() {
			Expect(call(map[string]any{
				"rename":   "$error.details.renamed",
				"same":     "$message.error.details.renamed",
				"dotted":   "$.error.details.renamed.database_id",
				"theirs":   "$message.task.network",
				"theirs2":  "$.task.network",
				"field":    "$.message",
				"name":     "$task.network",
				"wholeMsg": "$message",
			}, "refused: "+brief)).To(Equal(`call f {"dotted":"db_id","field":"refused","name":"prod-net",` +
				`"rename":{"database_id":"db_id"},"same":{"database_id":"db_id"},"theirs":"from-the-message","theirs2":"from-the-message",` +
				`"wholeMsg":` + brief + `}`))
		})

		It("answers the built-in deploy scenario's plan from its task and its corrections from the world's error", func() {
			for _, name := range []string{"deploy", "deploy-v2"} {
				data, ok := builtin.Lookup(name)
				Expect(ok).To(BeTrue())
				sc, err := scenarios.Parse("builtin:"+name, data)
				Expect(err).NotTo(HaveOccurred())
				rules, err := llm.DecodeRules(sc.LLM.Rules)
				Expect(err).NotTo(HaveOccurred())
				s, err := llm.NewScripted(sc.LLM.Model, rules, llm.WithTask(sc.TaskJSON()))
				Expect(err).NotTo(HaveOccurred())

				// The plan comes from the scenario's task, whatever the agent's message says.
				plan := request([]protocol.ChatTool{tool("create_network")}, msg("user", `{"task":{"network":"elsewhere"}}`))
				Expect(answer(complete(s, plan))).To(Equal(`call create_network {"name":"prod-net"}; call create_database {"name":"prod-db"}; `+
					`call run_migration {"version":3}; call deploy_service {"image":"registry.local/api:1.4.2","name":"api"}; call set_dns {"host":"api.example.com"}`), name)

				fix := request([]protocol.ChatTool{tool("correct_request")}, msg("user",
					`{"kind":"cloud.create_database","args":{"name":"prod-db"},"error":{"code":"field_renamed","details":{"renamed":{"database_id":"db_id"}}}}`))
				Expect(answer(complete(s, fix))).To(Equal(`call correct_request {"rename":{"database_id":"db_id"}}`), name)
			}
		})

		DescribeTable("refuses, when it is made, a $task path the task does not hold",
			func(ref, want string) {
				s, err := withTask(map[string]any{"x": map[string]any{"y": ref}})
				Expect(s).To(BeNil())
				Expect(errors.Is(err, llm.ErrConfig)).To(BeTrue())
				Expect(err).To(MatchError("llm configuration: scripted model rules[0].tool_calls[0].arguments.x.y: " + want))
			},
			Entry("a missing field", "$task.netwrk",
				`"$task.netwrk": the task has no field "netwrk" at $task (fields there: hosts, migration, network, ratio, service; write $$ for a literal $)`),
			Entry("a missing nested field", "$task.service.tag",
				`"$task.service.tag": the task has no field "tag" at $task.service (fields there: image, name; write $$ for a literal $)`),
			Entry("a field of a string", "$task.network.name",
				`"$task.network.name": $task.network is the string "prod-net", which has no field "name"`),
			Entry("an index out of range", "$task.hosts.2",
				`"$task.hosts.2": $task.hosts is a list of 2, and "2" is not an index into it`),
			Entry("an empty field name", "$task.",
				`invalid reference "$task.": empty field name after the dot (write $task for the whole of it)`),
		)

		It("refuses a $task reference when it was given no task, and a task that is not JSON", func() {
			_, err := llm.NewScripted("", []llm.Rule{{ToolCalls: []llm.ScriptedCall{{Name: "f", Arguments: map[string]any{"n": "$task.network"}}}}})
			Expect(errors.Is(err, llm.ErrConfig)).To(BeTrue())
			Expect(err).To(MatchError(ContainSubstring(`rules[0].tool_calls[0].arguments.n: "$task.network" refers to the run's task, and the model was given none (llm.WithTask)`)))

			_, err = llm.NewScripted("", nil, llm.WithTask(json.RawMessage(`{"a":`)))
			Expect(errors.Is(err, llm.ErrConfig)).To(BeTrue())
			Expect(err).To(MatchError(ContainSubstring("the task is not JSON")))
		})

		It("names a $message path the last message's object does not hold", func() {
			_, err := newScripted(llm.Rule{ToolCalls: []llm.ScriptedCall{{Name: "f", Arguments: map[string]any{"r": "$message.error.details.gone"}}}}).
				Complete(context.Background(), request(nil, msg("tool", brief)))
			Expect(errors.Is(err, llm.ErrReference)).To(BeTrue())
			Expect(err).To(MatchError(`scripted model: unresolved reference: rules[0].tool_calls[0].arguments.r: "$message.error.details.gone": ` +
				`the last message's JSON object has no field "gone" at $.error.details (fields there: renamed; write $$ for a literal $)`))
		})
	})

	Describe("validation", func() {
		DescribeTable("refuses a bad rule with a message naming it",
			func(rules []llm.Rule, want ...string) {
				s, err := llm.NewScripted("", rules)
				Expect(s).To(BeNil())
				Expect(errors.Is(err, llm.ErrConfig)).To(BeTrue())
				for _, w := range want {
					Expect(err).To(MatchError(ContainSubstring(w)))
				}
				Expect(strings.Count(err.Error(), "\n")).To(Equal(len(want)-1), "one line per problem: %v", err)
			},
			Entry("both a reply and tool calls",
				[]llm.Rule{{Reply: "ok"}, {Reply: "x", ToolCalls: []llm.ScriptedCall{{Name: "f"}}}},
				"llm configuration: scripted model rules[1]: reply and tool_calls are both set; set exactly one"),
			Entry("neither", []llm.Rule{{When: llm.Match{LastRole: "user"}}},
				"rules[0]: set a non-empty reply or tool_calls"),
			Entry("a tool call without a name", []llm.Rule{{ToolCalls: []llm.ScriptedCall{{Name: "f"}, {Arguments: map[string]any{"a": 1}}}}},
				"rules[0].tool_calls[1].name: must not be empty"),
			Entry("an unknown role", []llm.Rule{{When: llm.Match{LastRole: "robot"}, Reply: "x"}},
				`rules[0].when.last_role: unknown role "robot" (want one of system, developer, user, assistant, tool)`),
			Entry("a bare $", []llm.Rule{{ToolCalls: []llm.ScriptedCall{{Name: "f", Arguments: map[string]any{"l": []any{"$"}}}}}},
				`rules[0].tool_calls[0].arguments.l[0]: invalid reference "$": write $task.PATH for a field of the run's task, $message.PATH (or $PATH) for a field of the last message's JSON object`),
			Entry("an empty field name", []llm.Rule{{ToolCalls: []llm.ScriptedCall{{Name: "f", Arguments: map[string]any{"m": map[string]any{"x": "$a..b"}}}}}},
				`rules[0].tool_calls[0].arguments.m.x: invalid reference "$a..b": empty field name between dots`),
			Entry("arguments JSON cannot carry", []llm.Rule{{ToolCalls: []llm.ScriptedCall{{Name: "f", Arguments: map[string]any{"c": make(chan int)}}}}},
				"rules[0].tool_calls[0].arguments: not JSON-compatible"),
			Entry("several problems at once",
				[]llm.Rule{{}, {When: llm.Match{LastRole: "bot"}, Reply: "x"}},
				"rules[0]: set a non-empty reply or tool_calls", `rules[1].when.last_role: unknown role "bot"`),
		)
	})

	Describe("DecodeRules", func() {
		It("decodes the JSON form of rules, keeping numbers as written", func() {
			rules, err := llm.DecodeRules([]json.RawMessage{
				json.RawMessage(`{"when":{"tool_offered":"plan_deployment"},"tool_calls":[{"name":"plan_deployment","arguments":{"steps":["a"],"n":3}}]}`),
				json.RawMessage(`{"when":{"last_message_contains":"x","last_role":"tool"},"reply":"OK"}`),
			})
			Expect(err).NotTo(HaveOccurred())
			Expect(rules).To(Equal([]llm.Rule{
				{When: llm.Match{ToolOffered: "plan_deployment"}, ToolCalls: []llm.ScriptedCall{{Name: "plan_deployment", Arguments: map[string]any{"steps": []any{"a"}, "n": json.Number("3")}}}},
				{When: llm.Match{LastMessageContains: "x", LastRole: "tool"}, Reply: "OK"},
			}))
		})

		It("refuses unknown fields, naming the rule", func() {
			_, err := llm.DecodeRules([]json.RawMessage{json.RawMessage(`{"when":{}, "reply":"a"}`), json.RawMessage(`{"when":{"last_mesage_contains":"x"},"reply":"a"}`)})
			Expect(errors.Is(err, llm.ErrConfig)).To(BeTrue())
			Expect(err).To(MatchError(ContainSubstring(`scripted model rules[1]: json: unknown field "last_mesage_contains"`)))
		})
	})

	It("answers with the rules of a scenario file's llm block", func() {
		sc, err := scenarios.Parse("llm.yaml", []byte(`apiVersion: overnight/v1
kind: Scenario
name: llm
world: cloud
agent: {builtin: deployer}
llm:
  rules:
    - when: {tool_offered: plan_deployment}
      tool_calls: [{name: plan_deployment, arguments: {steps: [create_network, create_database], replicas: 3, ratio: 0.5}}]
    - when: {last_message_contains: field_renamed, last_role: tool}
      tool_calls:
        - name: correct_request
          arguments: {rename: "$details.renamed", note: "$$ is not a reference"}
    - when: {}
      reply: "OK"
`))
		Expect(err).NotTo(HaveOccurred())
		rules, err := llm.DecodeRules(sc.LLM.Rules)
		Expect(err).NotTo(HaveOccurred())
		s, err := llm.NewScripted(sc.LLM.Model, rules)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Name()).To(Equal("scripted"))

		Expect(answer(complete(s, request([]protocol.ChatTool{tool("plan_deployment")}, msg("user", "deploy"))))).
			To(Equal(`call plan_deployment {"ratio":0.5,"replicas":3,"steps":["create_network","create_database"]}`))
		Expect(answer(complete(s, request(nil, msg("user", "deploy"), msg("tool", `{"code":"field_renamed","details":{"renamed":{"database_id":"db_id"}}}`))))).
			To(Equal(`call correct_request {"note":"$ is not a reference","rename":{"database_id":"db_id"}}`))
		Expect(answer(complete(s, request(nil, msg("user", "field_renamed?"))))).To(Equal("OK"), "last_role must hold too")
	})

	It("is safe for concurrent use and answers every caller the same", func() {
		s := newScripted(
			llm.Rule{When: llm.Match{LastMessageContains: "field_renamed"}, ToolCalls: []llm.ScriptedCall{{Name: "fix", Arguments: map[string]any{"r": "$details", "k": "v"}}}},
			llm.Rule{When: llm.Match{ToolOffered: "plan"}, ToolCalls: []llm.ScriptedCall{{Name: "plan", Arguments: map[string]any{"steps": []any{"a", "b"}}}}},
			llm.Rule{Reply: "default"},
		)
		const distinct = 12
		reqs := make([]protocol.ChatRequest, distinct)
		want := make([][]byte, distinct)
		for i := range distinct {
			switch i % 3 {
			case 0:
				reqs[i] = request(nil, msg("tool", fmt.Sprintf(`{"code":"field_renamed","details":{"n":%d}}`, i)))
			case 1:
				reqs[i] = request([]protocol.ChatTool{tool("plan")}, msg("user", fmt.Sprintf("plan %d", i)))
			default:
				reqs[i] = request(nil, msg("user", fmt.Sprintf("hello %d", i)))
			}
			b, err := json.Marshal(complete(s, reqs[i]))
			Expect(err).NotTo(HaveOccurred())
			want[i] = b
		}
		const workers, rounds = 8, 60
		var wg sync.WaitGroup
		mismatches := make(chan string, workers*rounds)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				for r := range rounds {
					i := (w*7 + r) % distinct
					resp, err := s.Complete(context.Background(), reqs[i])
					b, _ := json.Marshal(resp)
					if err != nil || string(b) != string(want[i]) {
						mismatches <- fmt.Sprintf("worker %d request %d: %v %s", w, i, err, b)
					}
				}
			}()
		}
		wg.Wait()
		close(mismatches)
		var all []string
		for m := range mismatches {
			all = append(all, m)
		}
		Expect(all).To(BeEmpty())
	})
})

var _ = Describe("the scripted model's prompt_contains", func() {
	It("matches only when every substring is somewhere in the prompt, several conditions at once", func() {
		s := newScripted(
			llm.Rule{When: llm.Match{PromptContains: []string{"lesson:", "field_renamed"}}, Reply: "rename it"},
			llm.Rule{When: llm.Match{}, Reply: "no idea"},
		)
		both := request(nil, msg("system", "lesson: the API moved to v2"), msg("user", `{"code":"field_renamed"}`))
		Expect(answer(complete(s, both))).To(Equal("rename it"))
		one := request(nil, msg("user", `{"code":"field_renamed"}`))
		Expect(answer(complete(s, one))).To(Equal("no idea"), "the lesson is missing")
	})
})
