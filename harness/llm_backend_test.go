package harness

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	openaigo "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/tmc/langchaingo/llms"
	lcopenai "github.com/tmc/langchaingo/llms/openai"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
)

const llmScenario = `apiVersion: overnight/v1
kind: Scenario
name: llm-test
world: cloud
agent: {builtin: deployer}
task: {network: n, database: d, migration: 1, service: {name: s, image: i}, dns: s.example.com}
llm:
  model: scripted
  budget: {calls: 6}
  rules:
    - when: {last_role: tool}
      reply: all healthy
    - when: {tool_offered: status}
      tool_calls: [{name: status, arguments: {service: api, verbose: true}}]
    - when: {}
      reply: hello from the scripted model
`

// startLLMRun serves a run of scenario text (with req's options) on the
// real gateway, as startLiveRun does.
func startLLMRun(state, text string, opts Options, req RunRequest) *liveRun {
	ctx := context.Background()
	opts.StateDir = state
	h, err := Open(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	scen, err := scenarios.Parse("llm-test.yaml", []byte(text))
	Expect(err).NotTo(HaveOccurred())
	req.Scenario = scen
	id, err := h.create(ctx, req)
	Expect(err).NotTo(HaveOccurred())
	return liveRunOf(h, id)
}

func (lr *liveRun) httpClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", lr.sock)
		},
	}}
}

func (lr *liveRun) openai(token string) openaigo.Client {
	return openaigo.NewClient(option.WithBaseURL("http://gateway/v1/llm/"), option.WithAPIKey(token),
		option.WithHTTPClient(lr.httpClient()), option.WithMaxRetries(0))
}

func (lr *liveRun) exchanges() []LLMRecord {
	recs, err := lr.h.history.LLM(lr.r.rec.ID)
	Expect(err).NotTo(HaveOccurred())
	return recs
}

var statusTool = openaigo.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "status",
	Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"service": map[string]any{"type": "string"}}}})

var _ = Describe("the LLM endpoint with real OpenAI clients", func() {
	var (
		ctx   context.Context
		state string
	)
	BeforeEach(func() {
		ctx = context.Background()
		state = GinkgoT().TempDir()
	})

	It("serves the official openai-go client: streaming with tools, then whole, and lists the model; every exchange is journaled", func() {
		lr := startLLMRun(state, llmScenario, Options{}, RunRequest{})
		token := lr.attempt()
		client := lr.openai(token)
		messages := []openaigo.ChatCompletionMessageParamUnion{openaigo.SystemMessage("You check services."), openaigo.UserMessage("Is api healthy?")}

		stream := client.Chat.Completions.NewStreaming(ctx, openaigo.ChatCompletionNewParams{
			Model: "whatever", Messages: messages, Tools: []openaigo.ChatCompletionToolUnionParam{statusTool},
			StreamOptions: openaigo.ChatCompletionStreamOptionsParam{IncludeUsage: openaigo.Bool(true)},
		})
		acc := openaigo.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		Expect(stream.Err()).NotTo(HaveOccurred())
		Expect(acc.Choices).To(HaveLen(1))
		call := acc.Choices[0].Message.ToolCalls
		Expect(call).To(HaveLen(1))
		Expect(call[0].Function.Name).To(Equal("status"))
		Expect(call[0].Function.Arguments).To(MatchJSON(`{"service":"api","verbose":true}`))
		Expect(acc.Usage.TotalTokens).To(BeNumerically(">", 0))

		messages = append(messages, acc.Choices[0].Message.ToParam(), openaigo.ToolMessage(`{"healthy":true}`, call[0].ID))
		done, err := client.Chat.Completions.New(ctx, openaigo.ChatCompletionNewParams{Model: "whatever", Messages: messages,
			Tools: []openaigo.ChatCompletionToolUnionParam{statusTool}})
		Expect(err).NotTo(HaveOccurred())
		Expect(done.Choices[0].Message.Content).To(Equal("all healthy"))

		models, err := client.Models.List(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(models.Data).To(HaveLen(1))
		Expect(models.Data[0].ID).To(Equal("scripted"))

		recs := lr.exchanges()
		Expect(recs).To(HaveLen(2))
		Expect(recs[0].Attempt).To(Equal(1))
		Expect(recs[0].Ordinal).To(Equal(1))
		Expect(recs[1].Ordinal).To(Equal(2))
		Expect(recs[1].Provider).To(Equal("scripted"))
		Expect(string(recs[1].Response)).To(ContainSubstring("all healthy"))
		Expect(lr.r.llm.totals.Calls).To(Equal(2))
	})

	It("serves langchaingo's OpenAI client, whole and streaming", func() {
		lr := startLLMRun(state, llmScenario, Options{}, RunRequest{})
		token := lr.attempt()
		client, err := lcopenai.New(lcopenai.WithToken(token), lcopenai.WithBaseURL("http://gateway/v1/llm"),
			lcopenai.WithModel("whatever"), lcopenai.WithHTTPClient(lr.httpClient()))
		Expect(err).NotTo(HaveOccurred())
		resp, err := client.GenerateContent(ctx, []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "Hi.")})
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.Choices[0].Content).To(Equal("hello from the scripted model"))

		var streamed strings.Builder
		resp, err = client.GenerateContent(ctx, []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "Hi again.")},
			llms.WithStreamingFunc(func(_ context.Context, chunk []byte) error { streamed.Write(chunk); return nil }))
		Expect(err).NotTo(HaveOccurred())
		Expect(streamed.String()).To(Equal("hello from the scripted model"))
		Expect(resp.Choices[0].Content).To(Equal("hello from the scripted model"))
	})

	It("refuses a parameter it does not carry with 400 unsupported_parameter, naming it", func() {
		lr := startLLMRun(state, llmScenario, Options{}, RunRequest{})
		client := lr.openai(lr.attempt())
		_, err := client.Chat.Completions.New(ctx, openaigo.ChatCompletionNewParams{Model: "x",
			Messages: []openaigo.ChatCompletionMessageParamUnion{openaigo.UserMessage("hi")}, Logprobs: openaigo.Bool(true)})
		var apiErr *openaigo.Error
		Expect(err).To(BeAssignableToTypeOf(apiErr))
		apiErr = err.(*openaigo.Error)
		Expect(apiErr.StatusCode).To(Equal(400))
		Expect(apiErr.Code).To(Equal(protocol.CodeUnsupportedParameter))
		Expect(apiErr.Param).To(Equal("logprobs"))
		recs := lr.exchanges()
		Expect(recs).To(HaveLen(1), "a refused request is journaled")
		Expect(recs[0].Ordinal).To(Equal(0), "it never reaches the model")
		Expect(recs[0].Call).To(Equal(0), "nor is it an llm:N call")
		Expect(recs[0].Code).To(Equal(protocol.CodeUnsupportedParameter))
		Expect(lr.r.llm.totals.Refused).To(Equal(1), "but it counts: it reached the endpoint")
	})

	It("fences an earlier attempt's token and refuses an unknown one", func() {
		lr := startLLMRun(state, llmScenario, Options{}, RunRequest{})
		old := lr.attempt()
		lr.attempt()
		oldClient := lr.openai(old)
		_, err := oldClient.Chat.Completions.New(ctx, openaigo.ChatCompletionNewParams{Model: "x",
			Messages: []openaigo.ChatCompletionMessageParamUnion{openaigo.UserMessage("hi")}})
		Expect(err).To(MatchError(ContainSubstring("409")))
		stranger := lr.openai("sk-not-a-run-token")
		_, err = stranger.Chat.Completions.New(ctx, openaigo.ChatCompletionNewParams{Model: "x",
			Messages: []openaigo.ChatCompletionMessageParamUnion{openaigo.UserMessage("hi")}})
		Expect(err).To(MatchError(ContainSubstring("401")))
	})

	It("ends the run when its call budget is spent", func() {
		lr := startLLMRun(state, strings.Replace(llmScenario, "calls: 6", "calls: 2", 1), Options{}, RunRequest{})
		client := lr.openai(lr.attempt())
		ask := func() error {
			_, err := client.Chat.Completions.New(ctx, openaigo.ChatCompletionNewParams{Model: "x",
				Messages: []openaigo.ChatCompletionMessageParamUnion{openaigo.UserMessage("hi")}})
			return err
		}
		Expect(ask()).To(Succeed())
		Expect(ask()).To(Succeed())
		err := ask()
		var apiErr *openaigo.Error
		Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
		Expect(apiErr.Code).To(Equal(protocol.CodeBudget))
		Expect(apiErr.StatusCode).To(Equal(429))
		Eventually(lr.r.llm.limitCh).Should(BeClosed())
		Expect(lr.r.llm.ending()).To(ContainSubstring("2 calls spent"))
	})

	It("routes to a real provider configured from the harness's environment, whose key never leaves the harness", func() {
		var mu sync.Mutex
		var auth []string
		provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			auth = append(auth, r.Header.Get("Authorization"))
			mu.Unlock()
			body, _ := io.ReadAll(r.Body)
			Expect(string(body)).To(ContainSubstring(`"model":"gpt-test"`))
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"from the provider"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`)
		}))
		DeferCleanup(provider.Close)
		env := map[string]string{"OPENAI_API_KEY": "sk-harness-secret", "OPENAI_BASE_URL": provider.URL + "/v1"}
		lr := startLLMRun(state, llmScenario, Options{LLMEnv: func(k string) string { return env[k] }}, RunRequest{LLM: "openai:gpt-test"})
		token := lr.attempt()
		client := lr.openai(token)
		resp, err := client.Chat.Completions.New(ctx, openaigo.ChatCompletionNewParams{Model: "anything",
			Messages: []openaigo.ChatCompletionMessageParamUnion{openaigo.UserMessage("hi")}})
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.Choices[0].Message.Content).To(Equal("from the provider"))
		Expect(resp.Usage.TotalTokens).To(BeEquivalentTo(10))
		Expect(auth).To(Equal([]string{"Bearer sk-harness-secret"}), "the provider sees the harness's key, never the agent's token")
		Expect(lr.r.llm.totals.PromptTokens).To(Equal(7))
		Expect(lr.r.llm.totals.TestDouble).To(BeFalse())
	})

	It("says which variable is missing for a provider without its key", func() {
		h, err := Open(ctx, Options{StateDir: state, LLMEnv: func(string) string { return "" }})
		Expect(err).NotTo(HaveOccurred())
		defer h.Close()
		scen, err := scenarios.Parse("llm-test.yaml", []byte(llmScenario))
		Expect(err).NotTo(HaveOccurred())
		_, err = h.model(scen, "anthropic:claude-test")
		Expect(err).To(MatchError(ContainSubstring("ANTHROPIC_API_KEY")))
	})

	It("replays a recording offline, and reports the first differing message when the run diverges from it", func() {
		lr := startLLMRun(state, llmScenario, Options{}, RunRequest{})
		client := lr.openai(lr.attempt())
		ask := func(c openaigo.Client, text string) (string, error) {
			resp, err := c.Chat.Completions.New(ctx, openaigo.ChatCompletionNewParams{Model: "x",
				Messages: []openaigo.ChatCompletionMessageParamUnion{openaigo.SystemMessage("be brief"), openaigo.UserMessage(text)}})
			if err != nil {
				return "", err
			}
			return resp.Choices[0].Message.Content, nil
		}
		first, err := ask(client, "hi")
		Expect(err).NotTo(HaveOccurred())
		recorded := lr.r.rec.ID
		lr.stop()

		rp := startLLMRun(state, llmScenario, Options{}, RunRequest{LLM: "replay:" + recorded})
		again, err := ask(rp.openai(rp.attempt()), "hi")
		Expect(err).NotTo(HaveOccurred())
		Expect(again).To(Equal(first))
		Expect(rp.r.llm.totals.Provider).To(Equal("scripted"), "a replay answers as the recording's model did")
		Expect(rp.r.llm.totals.TestDouble).To(BeTrue())
		Expect(rp.r.llm.totals.ReplayOf).To(Equal(recorded))
		rp.stop()

		div := startLLMRun(state, llmScenario, Options{}, RunRequest{LLM: "replay:" + recorded})
		_, err = ask(div.openai(div.attempt()), "something else")
		var apiErr *openaigo.Error
		Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
		Expect(apiErr.StatusCode).To(Equal(409))
		Expect(apiErr.Code).To(Equal(protocol.CodeDivergence))
		Expect(apiErr.Message).To(ContainSubstring(`message 1 differs: recorded {"content":"hi","role":"user"}, got {"content":"something else","role":"user"}`))
	})
})

var _ = Describe("the LLM path's record, replay, budgets and faults (review)", func() {
	var (
		ctx   context.Context
		state string
	)
	BeforeEach(func() {
		ctx = context.Background()
		state = GinkgoT().TempDir()
	})

	// fakeProvider answers like an OpenAI-compatible server: a 429 with
	// Retry-After first when rateLimitFirst, a fixed answer otherwise,
	// after delay; it counts the requests that reached it.
	fakeProvider := func(rateLimitFirst bool, delay time.Duration) (*httptest.Server, *int32) {
		var n int32
		var mu sync.Mutex
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			n++
			first := n == 1
			mu.Unlock()
			_, _ = io.Copy(io.Discard, r.Body)
			time.Sleep(delay)
			w.Header().Set("Content-Type", "application/json")
			if rateLimitFirst && first {
				w.Header().Set("Retry-After", "20")
				w.WriteHeader(429)
				_, _ = io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded"}}`)
				return
			}
			_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110}}`)
		}))
		DeferCleanup(srv.Close)
		return srv, &n
	}
	env := func(srv *httptest.Server) Options {
		e := map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": srv.URL + "/v1"}
		return Options{LLMEnv: func(k string) string { return e[k] }}
	}
	chat := func(lr *liveRun, token, text string) (protocol.ChatResponse, error) {
		c := lr.sdk(token)
		return c.Chat(ctx, protocol.ChatRequest{Model: "x", Messages: []protocol.ChatMessage{{Role: "user", Content: protocol.MessageContent{Text: text}}}})
	}

	It("replays a provider's 429 exactly, Retry-After included, and costs what the recording cost", func() {
		srv, _ := fakeProvider(true, 0)
		lr := startLLMRun(state, llmScenario, env(srv), RunRequest{LLM: "openai:gpt-4o-mini"})
		tok := lr.attempt()
		_, err := chat(lr, tok, "hi")
		Expect(err).NotTo(HaveOccurred(), "the SDK waits out the 429 and asks again")
		Expect(lr.r.clock.now).To(Equal(VirtualEpoch.Add(20*time.Second)), "Retry-After is waited in virtual time")
		orig := lr.r.llm.totals
		Expect(orig.CostUSD).To(BeNumerically(">", 0))
		recorded := lr.r.rec.ID
		lr.stop()

		rp := startLLMRun(state, llmScenario, Options{}, RunRequest{LLM: "replay:" + recorded})
		_, err = chat(rp, rp.attempt(), "hi")
		Expect(err).NotTo(HaveOccurred())
		Expect(rp.r.clock.now).To(Equal(VirtualEpoch.Add(20*time.Second)), "the replayed 429 carries the same Retry-After")
		got := rp.r.llm.totals
		Expect(got.Provider).To(Equal("openai"))
		Expect(got.Model).To(Equal("gpt-4o-mini"))
		Expect(got.ReplayOf).To(Equal(recorded))
		Expect(got.CostUSD).To(Equal(orig.CostUSD))
		Expect(got.Calls).To(Equal(orig.Calls))
	})

	It("never lets concurrent calls overrun the call budget", func() {
		srv, reached := fakeProvider(false, 300*time.Millisecond)
		lr := startLLMRun(state, strings.Replace(llmScenario, "calls: 6", "calls: 2", 1), env(srv), RunRequest{LLM: "openai:gpt-4o-mini"})
		tok := lr.attempt()
		var wg sync.WaitGroup
		for i := 0; i < 5; i++ {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				_, _ = chat(lr, tok, "hi")
			}()
		}
		wg.Wait()
		Expect(*reached).To(BeNumerically("<=", 2))
		Eventually(lr.r.llm.limitCh).Should(BeClosed())
	})

	It("refuses LLM calls once the agent reported done", func() {
		lr := startLLMRun(state, llmScenario, Options{}, RunRequest{})
		tok := lr.attempt()
		Expect(lr.sdk(tok).Done(ctx, protocol.OutcomeSuccess, "done", nil)).To(Succeed())
		_, err := chat(lr, tok, "hi")
		Expect(err).To(MatchError(ContainSubstring("reported done")))
		Expect(lr.exchanges()).To(BeEmpty())
	})

	It("counts an LLM fault as met only when the agent really met it", func() {
		lr := startLLMRun(state, llmScenario, Options{}, RunRequest{Faults: []chaos.Spec{
			mustParseSpec("llm-429:10s@llm:1"), mustParseSpec("llm-5xx@llm:3")}})
		tok := lr.attempt()
		raw := lr.openai(tok)
		// Call 1 gets the 429; an agent that gives up never meets it.
		_, err := raw.Chat.Completions.New(ctx, openaigo.ChatCompletionNewParams{Model: "x",
			Messages: []openaigo.ChatCompletionMessageParamUnion{openaigo.UserMessage("hi")}})
		Expect(err).To(HaveOccurred())
		lr.r.mu.Lock()
		recs := lr.r.faults.settle(ctx)
		lr.r.mu.Unlock()
		Expect(recs[0].Met).To(BeFalse())
		Expect(recs[0].MetDetail).To(ContainSubstring("never called again after waiting Retry-After"))

		// Asking again at once (call 2) is not waiting Retry-After either,
		// and the first call after the 429 decides.
		_, err = raw.Chat.Completions.New(ctx, openaigo.ChatCompletionNewParams{Model: "x",
			Messages: []openaigo.ChatCompletionMessageParamUnion{openaigo.UserMessage("hi")}})
		Expect(err).NotTo(HaveOccurred())
		Expect(lr.r.faults.faults[0].rec.Met).To(BeFalse())
		Expect(lr.r.faults.faults[0].rec.MetDetail).To(ContainSubstring("before its Retry-After of 10s was over"))
		// The SDK meets the 5xx: call 3 gets it, call 4 follows up. A wait
		// now does not undo the early call 2.
		_, err = chat(lr, tok, "hi")
		Expect(err).NotTo(HaveOccurred())
		Expect(lr.r.faults.faults[0].rec.Met).To(BeFalse(), lr.r.faults.faults[0].rec.MetDetail)
		Expect(lr.r.faults.faults[1].rec.Met).To(BeTrue(), lr.r.faults.faults[1].rec.MetDetail)

		// An agent that waits Retry-After in virtual time first is credited.
		lr2 := startLLMRun(GinkgoT().TempDir(), llmScenario, Options{}, RunRequest{Faults: []chaos.Spec{mustParseSpec("llm-429:10s@llm:1")}})
		_, err = chat(lr2, lr2.attempt(), "hi")
		Expect(err).NotTo(HaveOccurred(), "the SDK's Chat sleeps Retry-After through the gateway and asks again")
		Expect(lr2.r.faults.faults[0].rec.Met).To(BeTrue(), lr2.r.faults.faults[0].rec.MetDetail)
		Expect(lr2.r.faults.faults[0].rec.MetDetail).To(ContainSubstring("(10s of virtual time)"))
	})

	It("tells OpenAI clients not to retry what a retry cannot fix, so a divergence is reported at its first difference", func() {
		lr := startLLMRun(state, llmScenario, Options{}, RunRequest{})
		_, err := chat(lr, lr.attempt(), "hi")
		Expect(err).NotTo(HaveOccurred())
		recorded := lr.r.rec.ID
		lr.stop()

		div := startLLMRun(state, llmScenario, Options{}, RunRequest{LLM: "replay:" + recorded})
		// A default client: it retries 409 unless told not to.
		client := openaigo.NewClient(option.WithBaseURL("http://gateway/v1/llm/"), option.WithAPIKey(div.attempt()), option.WithHTTPClient(div.httpClient()))
		_, err = client.Chat.Completions.New(ctx, openaigo.ChatCompletionNewParams{Model: "x",
			Messages: []openaigo.ChatCompletionMessageParamUnion{openaigo.UserMessage("something else")}})
		var apiErr *openaigo.Error
		Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
		Expect(apiErr.Message).To(ContainSubstring("message 0 differs"))
		Expect(div.exchanges()).To(HaveLen(1), "asked once, not retried")
		Eventually(div.r.llm.limitCh).Should(BeClosed(), "a diverged replay ends the run")
		Expect(div.r.llm.end().verdict).To(Equal(VerdictUnknown))
		events, err := div.h.history.Events(div.r.rec.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(events).To(ContainElement(HaveField("Type", "harness.divergence")))
	})
})

func mustParseSpec(text string) chaos.Spec {
	s, err := chaos.ParseSpec(text)
	Expect(err).NotTo(HaveOccurred())
	return s
}
