package llm_test

import (
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/llm"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// A conversation with every carried message shape: system, developer, text
// parts, an assistant tool call with null content, its tool result.
const reqConversation = `[
	{"role":"system","content":"be brief"},
	{"role":"developer","content":"use tools"},
	{"role":"user","content":[{"type":"text","text":"deploy "},{"type":"text","text":"v2"}]},
	{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"deploy","arguments":"{\"v\":2}"}}]},
	{"role":"tool","tool_call_id":"call_1","content":"ok"}
]`

const reqTools = `[{"type":"function","function":{"name":"deploy","description":"deploy a version","parameters":{"type":"object","properties":{"v":{"type":"integer"}}},"strict":true}}]`

func reqUser(extra string) string {
	return `{"model":"m","messages":[{"role":"user","content":"hi"}]` + extra + `}`
}

var _ = Describe("ParseRequest", func() {
	DescribeTable("accepts the carried subset",
		func(body string, check func(r protocol.ChatRequest)) {
			req, err := llm.ParseRequest([]byte(body))
			Expect(err).NotTo(HaveOccurred())
			if check != nil {
				check(req)
			}
		},
		Entry("a minimal request", `{"messages":[{"role":"user","content":"hi"}]}`, func(r protocol.ChatRequest) {
			Expect(r.Messages).To(HaveLen(1))
			Expect(r.Messages[0].Content.Text).To(Equal("hi"))
		}),
		Entry("every carried field", `{"model":"gpt-x","messages":`+reqConversation+`,"tools":`+reqTools+`,
			"tool_choice":{"type":"function","function":{"name":"deploy"}},"stream":true,"stream_options":{"include_usage":true},
			"max_completion_tokens":100,"temperature":0.2,"top_p":0.9,"stop":"END","seed":7,"n":1,"user":"u1",
			"response_format":{"type":"json_object"}}`, func(r protocol.ChatRequest) {
			Expect(r.Messages).To(HaveLen(5))
			Expect(r.Messages[2].Content.Text).To(Equal("deploy v2"))
			Expect(r.Messages[3].Content.Null).To(BeTrue())
			Expect(r.Messages[3].ToolCalls[0].Function.Arguments).To(Equal(`{"v":2}`))
			Expect(r.Messages[4].ToolCallID).To(Equal("call_1"))
			Expect(r.Tools[0].Function.Name).To(Equal("deploy"))
			Expect(*r.MaxCompletionTokens).To(Equal(100))
			Expect([]string(r.Stop)).To(Equal([]string{"END"}))
			Expect(*r.Seed).To(Equal(int64(7)))
			Expect(r.StreamOptions.IncludeUsage).To(BeTrue())
			Expect(r.ResponseFormat.Type).To(Equal("json_object"))
		}),
		Entry("max_tokens and a stop list", reqUser(`,"max_tokens":5,"stop":["a","b"]`), func(r protocol.ChatRequest) {
			Expect(*r.MaxTokens).To(Equal(5))
			Expect([]string(r.Stop)).To(Equal([]string{"a", "b"}))
		}),
		Entry("not-carried fields at their no-op values", reqUser(`,"logprobs":false,"parallel_tool_calls":true,"presence_penalty":0,"frequency_penalty":0,"store":false,"n":1,"metadata":null,"top_logprobs":null`), nil),
		Entry("tool_choice required with tools", reqUser(`,"tools":`+reqTools+`,"tool_choice":"required"`), nil),
		Entry("tool_choice none and auto", reqUser(`,"tools":`+reqTools+`,"tool_choice":"none"`), nil),
		Entry("null optional fields", reqUser(`,"tools":null,"tool_choice":null,"temperature":null,"stop":null,"response_format":null`), func(r protocol.ChatRequest) {
			Expect(r.ToolChoice).To(BeNil())
			Expect(r.Temperature).To(BeNil())
		}),
		Entry("an echoed refusal and an assistant without content", `{"messages":[{"role":"user","content":"a"},{"role":"assistant","refusal":null},{"role":"assistant","content":"b","refusal":"no"}]}`, nil),
		Entry("a tool without parameters", reqUser(`,"tools":[{"type":"function","function":{"name":"now"}}]`), nil),
	)

	DescribeTable("refuses what it does not carry, naming the parameter",
		func(body, param string) {
			_, err := llm.ParseRequest([]byte(body))
			var pe *llm.ParamError
			Expect(errors.As(err, &pe)).To(BeTrue(), "want a *ParamError, got %v", err)
			Expect(pe.Param).To(Equal(param))
			Expect(pe.Error()).To(ContainSubstring(param))
		},
		Entry(nil, reqUser(`,"logprobs":true`), "logprobs"),
		Entry(nil, reqUser(`,"top_logprobs":2`), "top_logprobs"),
		Entry(nil, reqUser(`,"parallel_tool_calls":false`), "parallel_tool_calls"),
		Entry(nil, reqUser(`,"n":2`), "n"),
		Entry(nil, reqUser(`,"presence_penalty":0.5`), "presence_penalty"),
		Entry(nil, reqUser(`,"frequency_penalty":-1`), "frequency_penalty"),
		Entry(nil, reqUser(`,"logit_bias":{"50256":-100}`), "logit_bias"),
		Entry(nil, reqUser(`,"functions":[{"name":"f"}]`), "functions"),
		Entry(nil, reqUser(`,"function_call":"auto"`), "function_call"),
		Entry(nil, reqUser(`,"audio":{"voice":"alloy","format":"wav"}`), "audio"),
		Entry(nil, reqUser(`,"modalities":["text","audio"]`), "modalities"),
		Entry(nil, reqUser(`,"prediction":{"type":"content","content":"x"}`), "prediction"),
		Entry(nil, reqUser(`,"service_tier":"flex"`), "service_tier"),
		Entry(nil, reqUser(`,"store":true`), "store"),
		Entry(nil, reqUser(`,"metadata":{"k":"v"}`), "metadata"),
		Entry(nil, reqUser(`,"reasoning_effort":"low"`), "reasoning_effort"),
		Entry(nil, reqUser(`,"web_search_options":{}`), "web_search_options"),
		Entry(nil, reqUser(`,"verbosity":"low"`), "verbosity"),
		Entry("an unknown field", reqUser(`,"temperture":0.5`), "temperture"),
		Entry("a known field spelt in another case", reqUser(`,"Temperature":0.5`), "Temperature"),
		Entry("a message's name", `{"messages":[{"role":"user","content":"hi","name":"bob"}]}`, "messages[0].name"),
		Entry("an unknown message field", `{"messages":[{"role":"user","content":"hi","audio":{}}]}`, "messages[0].audio"),
		Entry("an image part", `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages[0].content[1].type"),
		Entry("an extra key in a text part", `{"messages":[{"role":"user","content":[{"type":"text","text":"a","cache_control":{}}]}]}`, "messages[0].content[0].cache_control"),
		Entry("an unknown tool field", reqUser(`,"tools":[{"type":"function","function":{"name":"f"},"cache":1}]`), "tools[0].cache"),
		Entry("an unknown function field", reqUser(`,"tools":[{"type":"function","function":{"name":"f","examples":[]}}]`), "tools[0].function.examples"),
		Entry("a non-function tool", reqUser(`,"tools":[{"type":"custom","custom":{"name":"f"}}]`), "tools[0].custom"),
		Entry("a tool of another type", reqUser(`,"tools":[{"type":"code_interpreter"}]`), "tools[0].type"),
		Entry("an unknown tool call field", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"},"extra":1}]}]}`, "messages[0].tool_calls[0].extra"),
		Entry("an unknown function call field", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}","x":1}}]}]}`, "messages[0].tool_calls[0].function.x"),
		Entry("a delta index in a request", `{"messages":[{"role":"assistant","tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].index"),
		Entry("response_format json_schema", reqUser(`,"response_format":{"type":"json_schema"}`), "response_format.type"),
		Entry("a json_schema body", reqUser(`,"response_format":{"type":"json_schema","json_schema":{"name":"x"}}`), "response_format.json_schema"),
		Entry("an unknown stream option", reqUser(`,"stream":true,"stream_options":{"include_obfuscation":false}`), "stream_options.include_obfuscation"),
		Entry("an unknown tool_choice key", reqUser(`,"tools":`+reqTools+`,"tool_choice":{"type":"function","function":{"name":"deploy"},"x":1}`), "tool_choice.x"),
		Entry("a tool_choice of another type", reqUser(`,"tools":`+reqTools+`,"tool_choice":{"type":"allowed_tools","function":{"name":"deploy"}}`), "tool_choice.type"),
	)

	DescribeTable("refuses invalid requests, naming the field",
		func(body, mention string) {
			_, err := llm.ParseRequest([]byte(body))
			Expect(err).To(MatchError(llm.ErrInvalidRequest))
			var pe *llm.ParamError
			Expect(errors.As(err, &pe)).To(BeFalse())
			Expect(err.Error()).To(ContainSubstring(mention))
		},
		Entry("not JSON", `{"messages":`, "request body"),
		Entry("not an object", `[1,2]`, "request body"),
		Entry("trailing data", reqUser(``)+`]`, "trailing data"),
		Entry("two objects", reqUser(``)+reqUser(``), "trailing data"),
		Entry("no messages", `{"model":"m"}`, "messages"),
		Entry("empty messages", `{"messages":[]}`, "messages"),
		Entry("an unknown role", `{"messages":[{"role":"bot","content":"x"}]}`, "messages[0].role"),
		Entry("a missing role", `{"messages":[{"content":"x"}]}`, "messages[0].role"),
		Entry("a tool message without tool_call_id", `{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id"),
		Entry("a tool message answering nothing", `{"messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"c9","content":"x"}]}`, "messages[1].tool_call_id"),
		Entry("a user message with null content", `{"messages":[{"role":"user","content":null}]}`, "messages[0].content"),
		Entry("tool calls on a user message", `{"messages":[{"role":"user","content":"x","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls"),
		Entry("a tool call without id", `{"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].id"),
		Entry("a tool call without name", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].function.name"),
		Entry("arguments that are not a string", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":{}}}]}]}`, "arguments"),
		Entry("a tool without a name", reqUser(`,"tools":[{"type":"function","function":{"description":"d"}}]`), "tools[0].function.name"),
		Entry("a tool name with spaces", reqUser(`,"tools":[{"type":"function","function":{"name":"do it"}}]`), "tools[0].function.name"),
		Entry("a tool offered twice", reqUser(`,"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]`), "tools[1].function.name"),
		Entry("parameters that are not an object", reqUser(`,"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]`), "tools[0].function.parameters"),
		Entry("a tool_choice naming no offered tool", reqUser(`,"tools":`+reqTools+`,"tool_choice":{"type":"function","function":{"name":"rollback"}}`), "tool_choice.function.name"),
		Entry("an unknown tool_choice", reqUser(`,"tools":`+reqTools+`,"tool_choice":"sometimes"`), "tool_choice"),
		Entry("tool_choice required without tools", reqUser(`,"tool_choice":"required"`), "tool_choice"),
		Entry("stream_options without stream", reqUser(`,"stream_options":{"include_usage":true}`), "stream_options"),
		Entry("both max token fields", reqUser(`,"max_tokens":5,"max_completion_tokens":5`), "max_tokens"),
		Entry("zero max_tokens", reqUser(`,"max_tokens":0`), "max_tokens"),
		Entry("a temperature over 2", reqUser(`,"temperature":2.5`), "temperature"),
		Entry("a top_p over 1", reqUser(`,"top_p":1.5`), "top_p"),
		Entry("five stop sequences", reqUser(`,"stop":["a","b","c","d","e"]`), "stop"),
		Entry("a string temperature", reqUser(`,"temperature":"hot"`), "temperature"),
	)
})

var _ = Describe("Canonical", func() {
	canon := func(body string) string {
		req, err := llm.ParseRequest([]byte(body))
		Expect(err).NotTo(HaveOccurred())
		b, err := llm.Canonical(req)
		Expect(err).NotTo(HaveOccurred())
		return string(b)
	}

	It("sorts keys, does not escape HTML and leaves out model, user, stream and n", func() {
		got := canon(`{"temperature":0.5,"model":"a","user":"u","n":1,"stream":true,"stream_options":{"include_usage":true},
			"messages":[{"content":"a<b>&c","role":"user"}]}`)
		Expect(got).To(Equal(`{"messages":[{"content":"a<b>&c","role":"user"}],"temperature":0.5}`))
	})

	It("is the same for the same request written differently", func() {
		a := canon(`{"model":"x","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}}}]}`)
		b := canon(`{ "tools" : [ {"function":{"parameters":{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"},"name":"f"},"type":"function"} ],
			"messages":[{"content":[{"type":"text","text":"h"},{"type":"text","text":"i"}],"role":"user"}], "model":"y", "stream": false }`)
		Expect(a).To(Equal(b))
		Expect(a).To(ContainSubstring(`"parameters":{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"}`))
	})

	It("differs when what the model sees differs", func() {
		base := canon(`{"messages":[{"role":"user","content":"hi"}]}`)
		Expect(canon(`{"messages":[{"role":"user","content":"hi "}]}`)).NotTo(Equal(base))
		Expect(canon(`{"messages":[{"role":"user","content":"hi"}],"temperature":0}`)).NotTo(Equal(base))
		Expect(canon(`{"messages":[{"role":"system","content":"hi"}]}`)).NotTo(Equal(base))
	})
})
