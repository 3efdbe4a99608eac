package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	openaigo "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/tmc/langchaingo/llms"
	lcopenai "github.com/tmc/langchaingo/llms/openai"

	"github.com/overnight-dev/overnight/harness/llm"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// The answer the stream tests serve: text with multi-byte characters, two
// tool calls with long arguments, usage.
const sseContent = "Déploiement de la version 2 ✓ — je vérifie d'abord l'état, puis je déploie."

var sseAnswer = protocol.ChatResponse{
	ID: "chatcmpl-sse", Object: "chat.completion", Created: 1700000000, Model: "scripted",
	Choices: []protocol.ChatChoice{{
		Message: protocol.ChatMessage{
			Role:    "assistant",
			Content: protocol.MessageContent{Text: sseContent},
			ToolCalls: []protocol.ChatToolCall{
				{ID: "call_status", Type: "function", Function: protocol.ChatFunctionCall{Name: "status", Arguments: `{"service":"api","verbose":true}`}},
				{ID: "call_deploy", Type: "function", Function: protocol.ChatFunctionCall{Name: "deploy", Arguments: `{"version":2,"regions":["eu-west-1","us-east-1"]}`}},
			},
		},
		FinishReason: "tool_calls",
	}},
	Usage: &protocol.ChatUsage{PromptTokens: 30, CompletionTokens: 12, TotalTokens: 42},
}

// sseGateway is an httptest server standing in for the gateway's handler:
// it parses each request strictly, then answers whole or as a stream.
type sseGateway struct {
	URL      string
	mu       sync.Mutex
	requests []protocol.ChatRequest
	auth     []string
	failures []error // of WriteStream, checked by the caller
}

func newSSEGateway(answer func(protocol.ChatRequest) protocol.ChatResponse) *sseGateway {
	g := &sseGateway{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, err := llm.ParseRequest(body)
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(protocol.OpenAIError{Error: protocol.OpenAIErrorDetail{Message: err.Error(), Type: "invalid_request_error", Code: "bad_request"}})
			return
		}
		g.mu.Lock()
		g.requests = append(g.requests, req)
		g.auth = append(g.auth, r.Header.Get("Authorization"))
		g.mu.Unlock()
		resp := answer(req)
		if req.Stream {
			if err := llm.WriteStream(w, resp, req.StreamOptions != nil && req.StreamOptions.IncludeUsage); err != nil {
				g.mu.Lock()
				g.failures = append(g.failures, err)
				g.mu.Unlock()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	}))
	DeferCleanup(func() {
		srv.Close()
		g.mu.Lock()
		defer g.mu.Unlock()
		Expect(g.failures).To(BeEmpty(), "WriteStream failed")
	})
	g.URL = srv.URL
	return g
}

func (g *sseGateway) Requests() []protocol.ChatRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]protocol.ChatRequest(nil), g.requests...)
}

var _ = Describe("WriteStream", func() {
	It("frames OpenAI chunks as server-sent events, deterministically, never splitting a character", func() {
		rec1, rec2 := httptest.NewRecorder(), httptest.NewRecorder()
		Expect(llm.WriteStream(rec1, sseAnswer, true)).To(Succeed())
		Expect(llm.WriteStream(rec2, sseAnswer, true)).To(Succeed())
		Expect(rec1.Body.Bytes()).To(Equal(rec2.Body.Bytes()))
		Expect(rec1.Header().Get("Content-Type")).To(Equal("text/event-stream"))
		Expect(rec1.Flushed).To(BeTrue())

		events := strings.Split(strings.TrimSuffix(rec1.Body.String(), "\n\n"), "\n\n")
		Expect(events[len(events)-1]).To(Equal("data: [DONE]"))
		var chunks []protocol.ChatChunk
		for _, e := range events[:len(events)-1] {
			Expect(e).To(HavePrefix("data: "))
			var c protocol.ChatChunk
			Expect(json.Unmarshal([]byte(strings.TrimPrefix(e, "data: ")), &c)).To(Succeed())
			Expect(c.ID).To(Equal("chatcmpl-sse"))
			Expect(c.Object).To(Equal("chat.completion.chunk"))
			chunks = append(chunks, c)
		}
		Expect(chunks[0].Choices[0].Delta.Role).To(Equal("assistant"))
		var text strings.Builder
		for _, c := range chunks {
			for _, ch := range c.Choices {
				if ch.Delta.Content != nil {
					Expect(utf8.ValidString(*ch.Delta.Content)).To(BeTrue())
					Expect(utf8.RuneCountInString(*ch.Delta.Content)).To(BeNumerically("<=", 20))
					text.WriteString(*ch.Delta.Content)
				}
			}
		}
		Expect(text.String()).To(Equal(sseContent))
		last := chunks[len(chunks)-1]
		Expect(last.Choices).NotTo(BeNil())
		Expect(last.Choices).To(BeEmpty())
		Expect(last.Usage).To(Equal(sseAnswer.Usage))
		finish := chunks[len(chunks)-2].Choices[0].FinishReason
		Expect(finish).NotTo(BeNil())
		Expect(*finish).To(Equal("tool_calls"))
		Expect(rec1.Body.String()).To(ContainSubstring(`"choices":[]`))
	})

	It("sends no usage chunk unless asked", func() {
		rec := httptest.NewRecorder()
		Expect(llm.WriteStream(rec, sseAnswer, false)).To(Succeed())
		Expect(rec.Body.String()).NotTo(ContainSubstring(`"usage"`))
		Expect(rec.Body.String()).To(HaveSuffix("data: [DONE]\n\n"))
	})

	It("is read correctly by the official openai-go client, streaming and then whole, tools included", func() {
		g := newSSEGateway(func(req protocol.ChatRequest) protocol.ChatResponse {
			if req.Stream {
				return sseAnswer
			}
			return protocol.ChatResponse{ID: "chatcmpl-2", Object: "chat.completion", Model: "scripted",
				Choices: []protocol.ChatChoice{{Message: protocol.ChatMessage{Role: "assistant", Content: protocol.MessageContent{Text: "deployed"}}, FinishReason: "stop"}},
				Usage:   &protocol.ChatUsage{PromptTokens: 50, CompletionTokens: 2, TotalTokens: 52}}
		})
		client := openaigo.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey("run-token"), option.WithMaxRetries(0))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tools := []openaigo.ChatCompletionToolUnionParam{
			openaigo.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "status",
				Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"service": map[string]any{"type": "string"}}}}),
			openaigo.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "deploy", Description: openaigo.String("deploy a version")}),
		}
		messages := []openaigo.ChatCompletionMessageParamUnion{
			openaigo.SystemMessage("You deploy services."),
			openaigo.UserMessage("Deploy version 2."),
		}
		stream := client.Chat.Completions.NewStreaming(ctx, openaigo.ChatCompletionNewParams{
			Model: "any", Messages: messages, Tools: tools,
			StreamOptions: openaigo.ChatCompletionStreamOptionsParam{IncludeUsage: openaigo.Bool(true)},
		})
		acc := openaigo.ChatCompletionAccumulator{}
		chunks := 0
		for stream.Next() {
			Expect(acc.AddChunk(stream.Current())).To(BeTrue(), "chunk %d was not incorporated", chunks)
			chunks++
		}
		Expect(stream.Err()).NotTo(HaveOccurred())
		Expect(stream.Close()).To(Succeed())
		Expect(chunks).To(BeNumerically(">", 8))

		Expect(acc.Choices).To(HaveLen(1))
		msg := acc.Choices[0].Message
		Expect(msg.Content).To(Equal(sseContent))
		Expect(acc.Choices[0].FinishReason).To(Equal("tool_calls"))
		Expect(msg.ToolCalls).To(HaveLen(2))
		Expect(msg.ToolCalls[0].ID).To(Equal("call_status"))
		Expect(msg.ToolCalls[0].Function.Name).To(Equal("status"))
		Expect(msg.ToolCalls[0].Function.Arguments).To(Equal(`{"service":"api","verbose":true}`))
		Expect(msg.ToolCalls[1].ID).To(Equal("call_deploy"))
		Expect(msg.ToolCalls[1].Function.Name).To(Equal("deploy"))
		Expect(msg.ToolCalls[1].Function.Arguments).To(Equal(`{"version":2,"regions":["eu-west-1","us-east-1"]}`))
		Expect(acc.Usage.PromptTokens).To(BeEquivalentTo(30))
		Expect(acc.Usage.CompletionTokens).To(BeEquivalentTo(12))
		Expect(acc.Usage.TotalTokens).To(BeEquivalentTo(42))

		// The conversation goes on, whole this time, with the assistant's
		// tool calls and their results: ParseRequest takes the client's
		// own shapes for them.
		messages = append(messages, msg.ToParam(),
			openaigo.ToolMessage(`{"status":"healthy"}`, "call_status"),
			openaigo.ToolMessage("deployed v2", "call_deploy"))
		done, err := client.Chat.Completions.New(ctx, openaigo.ChatCompletionNewParams{
			Model: "any", Messages: messages, Tools: tools, Temperature: openaigo.Float(0),
			ToolChoice: openaigo.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openaigo.String("auto")},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(done.Choices[0].Message.Content).To(Equal("deployed"))
		Expect(done.Usage.TotalTokens).To(BeEquivalentTo(52))

		reqs := g.Requests()
		Expect(reqs).To(HaveLen(2))
		Expect(reqs[0].Stream).To(BeTrue())
		Expect(reqs[0].Tools).To(HaveLen(2))
		second := reqs[1]
		Expect(second.Messages).To(HaveLen(5))
		Expect(second.Messages[2].ToolCalls).To(HaveLen(2))
		Expect(second.Messages[2].ToolCalls[1].Function.Arguments).To(Equal(`{"version":2,"regions":["eu-west-1","us-east-1"]}`))
		Expect(second.Messages[3].ToolCallID).To(Equal("call_status"))
		Expect(g.auth).To(HaveEach("Bearer run-token"))
	})

	It("is read correctly by langchaingo's OpenAI client with a streaming function", func() {
		g := newSSEGateway(func(protocol.ChatRequest) protocol.ChatResponse { return sseAnswer })
		client, err := lcopenai.New(lcopenai.WithToken("run-token"), lcopenai.WithBaseURL(g.URL+"/v1"), lcopenai.WithModel("any"))
		Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var streamed bytes.Buffer
		pieces := 0
		resp, err := client.GenerateContent(ctx,
			[]llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "Deploy version 2.")},
			llms.WithStreamingFunc(func(_ context.Context, chunk []byte) error {
				if len(chunk) > 0 && chunk[0] != '[' { // tool call deltas arrive as JSON lists
					streamed.Write(chunk)
				}
				pieces++
				return nil
			}),
			llms.WithTools([]llms.Tool{{Type: "function", Function: &llms.FunctionDefinition{Name: "status",
				Parameters: map[string]any{"type": "object", "properties": map[string]any{}}}}}),
		)
		Expect(err).NotTo(HaveOccurred())
		Expect(streamed.String()).To(Equal(sseContent))
		Expect(pieces).To(BeNumerically(">", 4))
		choice := resp.Choices[0]
		Expect(choice.Content).To(Equal(sseContent))
		Expect(choice.StopReason).To(Equal("tool_calls"))
		Expect(choice.ToolCalls).To(HaveLen(2))
		Expect(choice.ToolCalls[0].ID).To(Equal("call_status"))
		Expect(choice.ToolCalls[0].FunctionCall.Arguments).To(Equal(`{"service":"api","verbose":true}`))
		Expect(choice.ToolCalls[1].ID).To(Equal("call_deploy"))
		Expect(choice.ToolCalls[1].FunctionCall.Name).To(Equal("deploy"))
		Expect(choice.ToolCalls[1].FunctionCall.Arguments).To(Equal(`{"version":2,"regions":["eu-west-1","us-east-1"]}`))
		Expect(choice.GenerationInfo["PromptTokens"]).To(Equal(30))
		Expect(choice.GenerationInfo["CompletionTokens"]).To(Equal(12))

		reqs := g.Requests()
		Expect(reqs).To(HaveLen(1))
		Expect(reqs[0].Stream).To(BeTrue())
		Expect(reqs[0].StreamOptions).NotTo(BeNil())
		Expect(reqs[0].StreamOptions.IncludeUsage).To(BeTrue())
	})
})
