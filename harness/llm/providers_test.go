package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/tmc/langchaingo/llms/openai"

	"github.com/overnight-dev/overnight/harness/llm"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// wireCall is one request a fake provider received.
type wireCall struct {
	Method, Path string
	Header       http.Header
	Body         map[string]any
}

// wireServer is a local HTTP server speaking a provider's wire format: it
// records what it receives and answers with reply.
type wireServer struct {
	URL   string
	mu    sync.Mutex
	calls []wireCall
	reply func(w http.ResponseWriter, body map[string]any)
	close func()
}

func newWireServer(reply func(w http.ResponseWriter, body map[string]any)) *wireServer {
	ws := &wireServer{reply: reply}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var body map[string]any
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &body); err != nil {
				http.Error(w, "body is not JSON: "+err.Error(), http.StatusBadRequest)
				return
			}
		}
		ws.mu.Lock()
		ws.calls = append(ws.calls, wireCall{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		ws.mu.Unlock()
		ws.reply(w, body)
	}))
	DeferCleanup(srv.Close)
	ws.URL = srv.URL
	ws.close = srv.Close
	return ws
}

func (ws *wireServer) Calls() []wireCall {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return append([]wireCall(nil), ws.calls...)
}

func (ws *wireServer) OnlyCall() wireCall {
	calls := ws.Calls()
	ExpectWithOffset(1, calls).To(HaveLen(1))
	return calls[0]
}

func provReply(status int, header map[string]string, body string) func(http.ResponseWriter, map[string]any) {
	return func(w http.ResponseWriter, _ map[string]any) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func provEnv(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func provParse(body string) protocol.ChatRequest {
	req, err := llm.ParseRequest([]byte(body))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return req
}

func provComplete(m llm.Model, req protocol.ChatRequest) (protocol.ChatResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return m.Complete(ctx, req)
}

func provError(err error) *llm.ProviderError {
	var pe *llm.ProviderError
	ExpectWithOffset(1, errors.As(err, &pe)).To(BeTrue(), "want a *ProviderError, got %v", err)
	return pe
}

// The request every provider test sends: a whole tool-use conversation.
var provFullRequest = `{"model":"agent-picked-model","messages":` + reqConversation + `,"tools":` + reqTools + `,
	"max_tokens":50,"temperature":0.3,"stop":["END"]`

// The same without the strict flag, which langchaingo's Anthropic client
// does not carry.
var provFullRequestLoose = strings.Replace(provFullRequest, `,"strict":true`, ``, 1)

const provOpenAIText = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-test",
	"choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],
	"usage":{"prompt_tokens":11,"completion_tokens":3,"total_tokens":14}}`

var _ = Describe("Providers through langchaingo", func() {
	Describe("openai (an OpenAI-compatible server)", func() {
		newOpenAI := func(ws *wireServer) llm.Model {
			m, err := llm.New(llm.Spec{Provider: "openai", Model: "gpt-test"}, llm.Options{
				Env: provEnv("OPENAI_API_KEY", "sk-test-123", "OPENAI_BASE_URL", ws.URL+"/v1"),
			})
			Expect(err).NotTo(HaveOccurred())
			Expect(m.Provider()).To(Equal("openai"))
			Expect(m.Name()).To(Equal("gpt-test"))
			return m
		}

		It("sends the key, the model, the messages, the tools and the parameters, and reads the answer and usage", func() {
			ws := newWireServer(provReply(200, nil, provOpenAIText))
			req := provParse(provFullRequest + `,"seed":3,"tool_choice":{"type":"function","function":{"name":"deploy"}},"response_format":{"type":"json_object"}}`)
			resp, err := provComplete(newOpenAI(ws), req)
			Expect(err).NotTo(HaveOccurred())

			call := ws.OnlyCall()
			Expect(call.Method).To(Equal("POST"))
			Expect(call.Path).To(Equal("/v1/chat/completions"))
			Expect(call.Header.Get("Authorization")).To(Equal("Bearer sk-test-123"))
			b := call.Body
			Expect(b["model"]).To(Equal("gpt-test"), "the harness's model, not the agent's")
			Expect(b["messages"]).To(Equal([]any{
				map[string]any{"role": "system", "content": "be brief"},
				map[string]any{"role": "system", "content": "use tools"},
				map[string]any{"role": "user", "content": "deploy v2"},
				map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{
					"id": "call_1", "type": "function", "function": map[string]any{"name": "deploy", "arguments": `{"v":2}`}}}},
				map[string]any{"role": "tool", "content": "ok", "tool_call_id": "call_1"},
			}))
			Expect(b["tools"]).To(Equal([]any{map[string]any{"type": "function", "function": map[string]any{
				"name": "deploy", "description": "deploy a version", "strict": true,
				"parameters": map[string]any{"type": "object", "properties": map[string]any{"v": map[string]any{"type": "integer"}}},
			}}}))
			Expect(b["tool_choice"]).To(Equal(map[string]any{"type": "function", "function": map[string]any{"name": "deploy"}}))
			Expect(b["max_tokens"]).To(BeEquivalentTo(50))
			Expect(b).NotTo(HaveKey("max_completion_tokens"))
			Expect(b["temperature"]).To(BeEquivalentTo(0.3))
			Expect(b["stop"]).To(Equal([]any{"END"}))
			Expect(b["seed"]).To(BeEquivalentTo(3))
			Expect(b["response_format"]).To(Equal(map[string]any{"type": "json_object"}))

			Expect(resp.Model).To(Equal("gpt-test"))
			Expect(resp.Object).To(Equal("chat.completion"))
			Expect(resp.Choices).To(HaveLen(1))
			Expect(resp.Choices[0].Message.Role).To(Equal("assistant"))
			Expect(resp.Choices[0].Message.Content.Text).To(Equal("done"))
			Expect(resp.Choices[0].FinishReason).To(Equal("stop"))
			Expect(resp.Usage).To(Equal(&protocol.ChatUsage{PromptTokens: 11, CompletionTokens: 3, TotalTokens: 14}))
		})

		It("sends max_completion_tokens as such", func() {
			ws := newWireServer(provReply(200, nil, provOpenAIText))
			_, err := provComplete(newOpenAI(ws), provParse(reqUser(`,"max_completion_tokens":9`)))
			Expect(err).NotTo(HaveOccurred())
			b := ws.OnlyCall().Body
			Expect(b["max_completion_tokens"]).To(BeEquivalentTo(9))
			Expect(b).NotTo(HaveKey("max_tokens"))
		})

		It("reads tool calls, with their ids, in order", func() {
			ws := newWireServer(provReply(200, nil, `{"id":"x","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
				"tool_calls":[{"id":"call_a","type":"function","function":{"name":"deploy","arguments":"{\"v\":3}"}},
				              {"id":"call_b","type":"function","function":{"name":"notify","arguments":"{}"}}]}}],
				"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`))
			resp, err := provComplete(newOpenAI(ws), provParse(reqUser(`,"tools":`+reqTools)))
			Expect(err).NotTo(HaveOccurred())
			msg := resp.Choices[0].Message
			Expect(msg.Content.Null).To(BeTrue())
			Expect(msg.ToolCalls).To(Equal([]protocol.ChatToolCall{
				{ID: "call_a", Type: "function", Function: protocol.ChatFunctionCall{Name: "deploy", Arguments: `{"v":3}`}},
				{ID: "call_b", Type: "function", Function: protocol.ChatFunctionCall{Name: "notify", Arguments: `{}`}},
			}))
			Expect(resp.Choices[0].FinishReason).To(Equal("tool_calls"))
		})

		It("maps length and leaves Usage nil when the server reports none", func() {
			ws := newWireServer(provReply(200, nil, `{"id":"x","choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":"trunc"}}]}`))
			resp, err := provComplete(newOpenAI(ws), provParse(reqUser(``)))
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.Choices[0].FinishReason).To(Equal("length"))
			Expect(resp.Usage).To(BeNil())
		})

		It("refuses top_p, which langchaingo's OpenAI client never sends, before any call", func() {
			ws := newWireServer(provReply(200, nil, provOpenAIText))
			_, err := provComplete(newOpenAI(ws), provParse(reqUser(`,"top_p":0.5`)))
			pe := provError(err)
			Expect(pe.Status).To(Equal(400))
			Expect(pe.Code).To(Equal(protocol.CodeUnsupportedParameter))
			Expect(pe.Message).To(ContainSubstring("top_p"))
			Expect(ws.Calls()).To(BeEmpty())
		})

		It("turns 429 into a rate limit with the server's Retry-After", func() {
			ws := newWireServer(provReply(429, map[string]string{"Retry-After": "7"}, `{"error":{"message":"Rate limit reached","type":"requests"}}`))
			_, err := provComplete(newOpenAI(ws), provParse(reqUser(``)))
			pe := provError(err)
			Expect(pe.Status).To(Equal(429))
			Expect(pe.Code).To(Equal(protocol.CodeRateLimited))
			Expect(pe.RetryAfter).To(Equal(7 * time.Second))
			Expect(pe.Message).To(ContainSubstring("Rate limit reached"))
		})

		It("prefers retry-after-ms", func() {
			ws := newWireServer(provReply(429, map[string]string{"Retry-After": "7", "retry-after-ms": "1500"}, `{"error":{"message":"slow down"}}`))
			_, err := provComplete(newOpenAI(ws), provParse(reqUser(``)))
			Expect(provError(err).RetryAfter).To(Equal(1500 * time.Millisecond))
		})

		It("turns 500 and 503 into provider errors with their status", func() {
			for _, status := range []int{500, 503} {
				ws := newWireServer(provReply(status, nil, `{"error":{"message":"upstream broke"}}`))
				_, err := provComplete(newOpenAI(ws), provParse(reqUser(``)))
				pe := provError(err)
				Expect(pe.Status).To(Equal(status))
				Expect(pe.Code).To(Equal(protocol.CodeProviderError))
				Expect(pe.Message).To(ContainSubstring("upstream broke"))
			}
		})

		It("turns a refused key into 502, not into a 401 the agent would blame on its own token", func() {
			ws := newWireServer(provReply(401, nil, `{"error":{"message":"Incorrect API key provided"}}`))
			_, err := provComplete(newOpenAI(ws), provParse(reqUser(``)))
			pe := provError(err)
			Expect(pe.Status).To(Equal(502))
			Expect(pe.Message).To(ContainSubstring("credentials"))
		})

		It("turns an unreachable server into 502", func() {
			ws := newWireServer(provReply(200, nil, provOpenAIText))
			m := newOpenAI(ws)
			ws.close()
			_, err := provComplete(m, provParse(reqUser(``)))
			pe := provError(err)
			Expect(pe.Status).To(Equal(502))
			Expect(pe.Code).To(Equal(protocol.CodeProviderError))
		})

		It("turns the deadline passing into 504, and the caller's cancellation into the context's error", func() {
			ws := newWireServer(func(w http.ResponseWriter, _ map[string]any) {
				time.Sleep(300 * time.Millisecond)
				provReply(200, nil, provOpenAIText)(w, nil)
			})
			m := newOpenAI(ws)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			_, err := m.Complete(ctx, provParse(reqUser(``)))
			Expect(provError(err).Status).To(Equal(504))

			ctx, cancel2 := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel2)
			_, err = m.Complete(ctx, provParse(reqUser(``)))
			Expect(err).To(MatchError(context.Canceled))
		})

		It("keeps each concurrent call's status and answer its own", func() {
			// Even-numbered prompts are rate limited, odd ones answered
			// with their own number.
			ws := newWireServer(func(w http.ResponseWriter, body map[string]any) {
				msgs := body["messages"].([]any)
				text := msgs[0].(map[string]any)["content"].(string)
				var n int
				_, _ = fmt.Sscanf(text, "call %d", &n)
				time.Sleep(time.Duration(n%3) * 5 * time.Millisecond)
				if n%2 == 0 {
					provReply(429, map[string]string{"Retry-After": fmt.Sprint(n + 1)}, `{"error":{"message":"busy"}}`)(w, nil)
					return
				}
				provReply(200, nil, fmt.Sprintf(`{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"answer %d"}}]}`, n))(w, nil)
			})
			m := newOpenAI(ws)
			const calls = 12
			var wg sync.WaitGroup
			errs := make([]error, calls)
			texts := make([]string, calls)
			for i := range calls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer GinkgoRecover()
					resp, err := provComplete(m, provParse(fmt.Sprintf(`{"messages":[{"role":"user","content":"call %d"}]}`, i)))
					errs[i] = err
					if err == nil {
						texts[i] = resp.Choices[0].Message.Content.Text
					}
				}()
			}
			wg.Wait()
			for i := range calls {
				if i%2 == 0 {
					pe := provError(errs[i])
					Expect(pe.Status).To(Equal(429))
					Expect(pe.RetryAfter).To(Equal(time.Duration(i+1)*time.Second), "call %d", i)
				} else {
					Expect(errs[i]).NotTo(HaveOccurred())
					Expect(texts[i]).To(Equal(fmt.Sprintf("answer %d", i)))
				}
			}
		})

		It("reads the status from the error for a langchaingo model the harness did not build", func() {
			ws := newWireServer(provReply(429, map[string]string{"Retry-After": "7"}, `{"error":{"message":"busy"}}`))
			client, err := openai.New(openai.WithToken("k"), openai.WithBaseURL(ws.URL), openai.WithModel("gpt-test"))
			Expect(err).NotTo(HaveOccurred())
			_, err = provComplete(llm.NewLangchain("openai", "gpt-test", client), provParse(reqUser(``)))
			pe := provError(err)
			Expect(pe.Status).To(Equal(429))
			Expect(pe.RetryAfter).To(BeZero(), "langchaingo's error keeps no headers")
		})
	})

	Describe("anthropic (the Messages API)", func() {
		newAnthropic := func(ws *wireServer) llm.Model {
			m, err := llm.New(llm.Spec{Provider: "anthropic", Model: "claude-test"}, llm.Options{
				Env: provEnv("ANTHROPIC_API_KEY", "ak-test-456", "ANTHROPIC_BASE_URL", ws.URL),
			})
			Expect(err).NotTo(HaveOccurred())
			return m
		}
		const textAndToolUse = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",
			"content":[{"type":"text","text":"Deploying."},{"type":"tool_use","id":"toolu_1","name":"deploy","input":{"v":3}}],
			"stop_reason":"tool_use","usage":{"input_tokens":20,"output_tokens":7}}`

		It("sends x-api-key, anthropic-version and the Messages shape, and merges text and tool_use blocks", func() {
			ws := newWireServer(provReply(200, nil, textAndToolUse))
			resp, err := provComplete(newAnthropic(ws), provParse(provFullRequestLoose+`}`))
			Expect(err).NotTo(HaveOccurred())

			call := ws.OnlyCall()
			Expect(call.Path).To(Equal("/v1/messages"))
			Expect(call.Header.Get("x-api-key")).To(Equal("ak-test-456"))
			Expect(call.Header.Get("anthropic-version")).To(Equal("2023-06-01"))
			Expect(call.Header.Get("Authorization")).To(BeEmpty())
			b := call.Body
			Expect(b["model"]).To(Equal("claude-test"))
			Expect(b["system"]).To(Equal("be brief\n\nuse tools"))
			Expect(b["max_tokens"]).To(BeEquivalentTo(50))
			Expect(b["temperature"]).To(BeEquivalentTo(0.3))
			Expect(b["stop_sequences"]).To(Equal([]any{"END"}))
			Expect(b["messages"]).To(Equal([]any{
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "deploy v2"}}},
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "call_1", "name": "deploy", "input": map[string]any{"v": float64(2)}}}},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "call_1", "content": "ok"}}},
			}))
			Expect(b["tools"]).To(Equal([]any{map[string]any{"name": "deploy", "description": "deploy a version",
				"input_schema": map[string]any{"type": "object", "properties": map[string]any{"v": map[string]any{"type": "integer"}}}}}))

			msg := resp.Choices[0].Message
			Expect(msg.Content.Text).To(Equal("Deploying."))
			Expect(msg.ToolCalls).To(Equal([]protocol.ChatToolCall{{ID: "toolu_1", Type: "function",
				Function: protocol.ChatFunctionCall{Name: "deploy", Arguments: `{"v":3}`}}}))
			Expect(resp.Choices[0].FinishReason).To(Equal("tool_calls"))
			Expect(resp.Usage).To(Equal(&protocol.ChatUsage{PromptTokens: 20, CompletionTokens: 7, TotalTokens: 27}))
		})

		It("sends an assistant message with text and two tool calls as one block per turn, losing none", func() {
			ws := newWireServer(provReply(200, nil, `{"content":[{"type":"text","text":"fine"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`))
			resp, err := provComplete(newAnthropic(ws), provParse(`{"messages":[{"role":"user","content":"go"},
				{"role":"assistant","content":"two things","tool_calls":[
					{"id":"c1","type":"function","function":{"name":"a","arguments":"{}"}},
					{"id":"c2","type":"function","function":{"name":"b","arguments":"{\"x\":1}"}}]},
				{"role":"tool","tool_call_id":"c1","content":"r1"},{"role":"tool","tool_call_id":"c2","content":"r2"}],
				"tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}}]}`))
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.Choices[0].FinishReason).To(Equal("stop"))
			msgs := ws.OnlyCall().Body["messages"].([]any)
			Expect(msgs).To(HaveLen(6))
			roles := []string{}
			for _, m := range msgs {
				roles = append(roles, m.(map[string]any)["role"].(string))
			}
			Expect(roles).To(Equal([]string{"user", "assistant", "assistant", "assistant", "user", "user"}))
			Expect(msgs[1].(map[string]any)["content"]).To(Equal([]any{map[string]any{"type": "text", "text": "two things"}}))
			Expect(msgs[3].(map[string]any)["content"]).To(Equal([]any{map[string]any{"type": "tool_use", "id": "c2", "name": "b", "input": map[string]any{"x": float64(1)}}}))
			tools := ws.OnlyCall().Body["tools"].([]any)
			Expect(tools[0].(map[string]any)["input_schema"]).To(Equal(map[string]any{"type": "object", "properties": map[string]any{}}),
				"a tool without parameters gets an empty object schema")
		})

		It("takes a base URL that already ends in /v1 without doubling it", func() {
			ws := newWireServer(provReply(200, nil, `{"content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`))
			m, err := llm.New(llm.Spec{Provider: "anthropic", Model: "claude-test"}, llm.Options{
				Env: provEnv("ANTHROPIC_API_KEY", "k", "ANTHROPIC_BASE_URL", ws.URL+"/v1/"),
			})
			Expect(err).NotTo(HaveOccurred())
			_, err = provComplete(m, provParse(reqUser(``)))
			Expect(err).NotTo(HaveOccurred())
			Expect(ws.OnlyCall().Path).To(Equal("/v1/messages"))
		})

		It("maps max_tokens to length", func() {
			ws := newWireServer(provReply(200, nil, `{"content":[{"type":"text","text":"cut"}],"stop_reason":"max_tokens","usage":{"input_tokens":1,"output_tokens":9}}`))
			resp, err := provComplete(newAnthropic(ws), provParse(reqUser(``)))
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.Choices[0].FinishReason).To(Equal("length"))
		})

		DescribeTable("refuses what langchaingo's Anthropic client drops, before any call",
			func(extra, param string) {
				ws := newWireServer(provReply(200, nil, textAndToolUse))
				_, err := provComplete(newAnthropic(ws), provParse(reqUser(extra)))
				pe := provError(err)
				Expect(pe.Status).To(Equal(400))
				Expect(pe.Code).To(Equal(protocol.CodeUnsupportedParameter))
				Expect(pe.Message).To(ContainSubstring(param))
				Expect(ws.Calls()).To(BeEmpty())
			},
			Entry(nil, `,"seed":1`, "seed"),
			Entry(nil, `,"tools":`+reqTools, "tools[0].function.strict"),
			Entry(nil, `,"response_format":{"type":"json_object"}`, "response_format"),
			Entry(nil, `,"tools":[{"type":"function","function":{"name":"deploy"}}],"tool_choice":"required"`, "tool_choice"),
			Entry(nil, `,"tools":[{"type":"function","function":{"name":"deploy"}}],"tool_choice":{"type":"function","function":{"name":"deploy"}}`, "tool_choice"),
		)

		It("turns 429 with Retry-After and 529 overloaded into provider errors", func() {
			ws := newWireServer(provReply(429, map[string]string{"Retry-After": "3"}, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}`))
			_, err := provComplete(newAnthropic(ws), provParse(reqUser(``)))
			pe := provError(err)
			Expect(pe.Status).To(Equal(429))
			Expect(pe.RetryAfter).To(Equal(3 * time.Second))

			ws = newWireServer(provReply(529, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
			_, err = provComplete(newAnthropic(ws), provParse(reqUser(``)))
			pe = provError(err)
			Expect(pe.Status).To(Equal(503))
			Expect(pe.Message).To(ContainSubstring("Overloaded"))

			ws = newWireServer(provReply(500, nil, `{"type":"error","error":{"type":"api_error","message":"Internal"}}`))
			_, err = provComplete(newAnthropic(ws), provParse(reqUser(``)))
			Expect(provError(err).Status).To(Equal(500))
		})
	})

	Describe("ollama (/api/chat)", func() {
		newOllama := func(host string) llm.Model {
			m, err := llm.New(llm.Spec{Provider: "ollama", Model: "llama3:8b"}, llm.Options{Env: provEnv("OLLAMA_HOST", host)})
			Expect(err).NotTo(HaveOccurred())
			return m
		}
		ndjson := func(lines ...string) func(http.ResponseWriter, map[string]any) {
			return func(w http.ResponseWriter, _ map[string]any) {
				w.Header().Set("Content-Type", "application/x-ndjson")
				for _, l := range lines {
					_, _ = io.WriteString(w, l+"\n")
				}
			}
		}

		It("sends the model, the messages and the options, and reads the streamed answer and its counts", func() {
			ws := newWireServer(ndjson(
				`{"model":"llama3:8b","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":"Hel"},"done":false}`,
				`{"model":"llama3:8b","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":"lo."},"done":false}`,
				`{"model":"llama3:8b","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":""},"done":true,"prompt_eval_count":12,"eval_count":4}`,
			))
			// OLLAMA_HOST as Ollama accepts it: host:port, no scheme.
			resp, err := provComplete(newOllama(strings.TrimPrefix(ws.URL, "http://")), provParse(`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],
				"max_tokens":50,"temperature":0.3,"top_p":0.9,"seed":3,"stop":["END"],"response_format":{"type":"json_object"}}`))
			Expect(err).NotTo(HaveOccurred())

			call := ws.OnlyCall()
			Expect(call.Path).To(Equal("/api/chat"))
			b := call.Body
			Expect(b["model"]).To(Equal("llama3:8b"))
			Expect(b["format"]).To(Equal("json"))
			Expect(b["messages"]).To(Equal([]any{
				map[string]any{"role": "system", "content": "be brief"},
				map[string]any{"role": "user", "content": "hi"},
			}))
			opts := b["options"].(map[string]any)
			Expect(opts["num_predict"]).To(BeEquivalentTo(50))
			Expect(opts["temperature"]).To(BeNumerically("~", 0.3, 1e-6))
			Expect(opts["top_p"]).To(BeNumerically("~", 0.9, 1e-6))
			Expect(opts["seed"]).To(BeEquivalentTo(3))
			Expect(opts["stop"]).To(Equal([]any{"END"}))

			Expect(resp.Choices[0].Message.Content.Text).To(Equal("Hello."))
			Expect(resp.Choices[0].FinishReason).To(Equal("stop"))
			Expect(resp.Usage).To(Equal(&protocol.ChatUsage{PromptTokens: 12, CompletionTokens: 4, TotalTokens: 16}))
		})

		It("refuses tools, which langchaingo's Ollama client does not send, pointing at the OpenAI-compatible endpoint", func() {
			ws := newWireServer(ndjson(`{"done":true}`))
			for _, body := range []string{
				reqUser(`,"tools":` + reqTools),
				`{"messages":` + reqConversation + `}`,
			} {
				_, err := provComplete(newOllama(ws.URL), provParse(body))
				pe := provError(err)
				Expect(pe.Status).To(Equal(400))
				Expect(pe.Code).To(Equal(protocol.CodeUnsupportedParameter))
				Expect(pe.Message).To(ContainSubstring("OPENAI_BASE_URL"))
			}
			Expect(ws.Calls()).To(BeEmpty())
		})

		It("turns 429 and 500 into provider errors with their status, even when the body says little", func() {
			ws := newWireServer(provReply(429, map[string]string{"Retry-After": "2"}, `{"error":"too many requests"}`))
			_, err := provComplete(newOllama(ws.URL), provParse(reqUser(``)))
			pe := provError(err)
			Expect(pe.Status).To(Equal(429))
			Expect(pe.RetryAfter).To(Equal(2 * time.Second))

			ws = newWireServer(provReply(500, nil, ``))
			_, err = provComplete(newOllama(ws.URL), provParse(reqUser(``)))
			pe = provError(err)
			Expect(pe.Status).To(Equal(500))
			Expect(pe.Code).To(Equal(protocol.CodeProviderError))
		})
	})
})

var _ = Describe("New and ParseSpec", func() {
	DescribeTable("a missing key is a configuration error naming the variable",
		func(provider, variable string) {
			GinkgoT().Setenv(variable, "from-the-process-environment")
			_, err := llm.New(llm.Spec{Provider: provider, Model: "m"}, llm.Options{Env: provEnv()})
			Expect(err).To(MatchError(llm.ErrConfig))
			Expect(err.Error()).To(ContainSubstring(variable))
			Expect(err.Error()).To(ContainSubstring(provider))
		},
		Entry(nil, "openai", "OPENAI_API_KEY"),
		Entry(nil, "anthropic", "ANTHROPIC_API_KEY"),
	)

	DescribeTable("other configuration errors",
		func(spec llm.Spec, env []string, mention string) {
			_, err := llm.New(spec, llm.Options{Env: provEnv(env...)})
			Expect(err).To(MatchError(llm.ErrConfig))
			Expect(err.Error()).To(ContainSubstring(mention))
		},
		Entry("a base URL that is not http", llm.Spec{Provider: "openai", Model: "m"}, []string{"OPENAI_API_KEY", "k", "OPENAI_BASE_URL", "ftp://x"}, "OPENAI_BASE_URL"),
		Entry("an Anthropic base URL without host", llm.Spec{Provider: "anthropic", Model: "m"}, []string{"ANTHROPIC_API_KEY", "k", "ANTHROPIC_BASE_URL", "http://"}, "ANTHROPIC_BASE_URL"),
		Entry("an OLLAMA_HOST that is no host", llm.Spec{Provider: "ollama", Model: "m"}, []string{"OLLAMA_HOST", "http://"}, "OLLAMA_HOST"),
		Entry("the scripted model", llm.Spec{Provider: "scripted"}, nil, "harness"),
		Entry("a replay", llm.Spec{Provider: "replay", Model: "run-1"}, nil, "harness"),
		Entry("an unknown provider", llm.Spec{Provider: "gemini", Model: "m"}, nil, "gemini"),
		Entry("no model name", llm.Spec{Provider: "ollama"}, nil, "ollama:"),
	)

	It("needs nothing for ollama and defaults to the local server", func() {
		hits := make(chan string, 1)
		m, err := llm.New(llm.Spec{Provider: "ollama", Model: "llama3"}, llm.Options{
			Env: provEnv(),
			HTTPClient: &http.Client{Transport: provRoundTrip(func(r *http.Request) (*http.Response, error) {
				hits <- r.URL.String()
				return nil, fmt.Errorf("no network in this test")
			})},
		})
		Expect(err).NotTo(HaveOccurred())
		_, err = provComplete(m, provParse(reqUser(``)))
		Expect(provError(err).Status).To(Equal(502))
		Expect(hits).To(Receive(Equal("http://127.0.0.1:11434/api/chat")))
	})

	DescribeTable("ParseSpec accepts",
		func(s string, want llm.Spec) {
			got, err := llm.ParseSpec(s)
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(Equal(want))
			Expect(got.String()).To(Equal(strings.TrimSpace(s)))
		},
		Entry(nil, "scripted", llm.Spec{Provider: "scripted"}),
		Entry(nil, "replay:run-20250101-abc", llm.Spec{Provider: "replay", Model: "run-20250101-abc"}),
		Entry(nil, "openai:gpt-4o-mini", llm.Spec{Provider: "openai", Model: "gpt-4o-mini"}),
		Entry(nil, "anthropic:claude-3-5-haiku-latest", llm.Spec{Provider: "anthropic", Model: "claude-3-5-haiku-latest"}),
		Entry(nil, "ollama:llama3:8b", llm.Spec{Provider: "ollama", Model: "llama3:8b"}),
		Entry(nil, " openai:m ", llm.Spec{Provider: "openai", Model: "m"}),
	)

	DescribeTable("ParseSpec refuses, saying what to write",
		func(s, mention string) {
			_, err := llm.ParseSpec(s)
			Expect(err).To(MatchError(llm.ErrConfig))
			Expect(err.Error()).To(ContainSubstring(mention))
		},
		Entry(nil, "", "openai:MODEL"),
		Entry(nil, "openai", "openai:MODEL"),
		Entry(nil, "openai:", "openai:MODEL"),
		Entry(nil, "anthropic:", "anthropic:MODEL"),
		Entry(nil, "ollama", "ollama:MODEL"),
		Entry(nil, "replay", "replay:RUN-ID"),
		Entry(nil, "scripted:x", "scripted"),
		Entry(nil, "gpt-4o", "unknown provider"),
	)
})

type provRoundTrip func(*http.Request) (*http.Response, error)

func (f provRoundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
