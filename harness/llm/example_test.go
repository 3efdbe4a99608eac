package llm_test

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/overnight-dev/overnight/harness/llm"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

func ExampleParseRequest() {
	_, err := llm.ParseRequest([]byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"logprobs":true}`))
	var pe *llm.ParamError
	if errors.As(err, &pe) {
		fmt.Println("refused:", pe.Param)
	}
	req, err := llm.ParseRequest([]byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"temperature":0}`))
	fmt.Println(len(req.Messages), err)
	// Output:
	// refused: logprobs
	// 1 <nil>
}

func ExampleCanonical() {
	req, _ := llm.ParseRequest([]byte(`{"stream":true,"temperature":0.5,"model":"a","messages":[{"content":"deploy <v2>","role":"user"}]}`))
	b, _ := llm.Canonical(req)
	fmt.Println(string(b))
	// Output: {"messages":[{"content":"deploy <v2>","role":"user"}],"temperature":0.5}
}

func ExampleParseSpec() {
	for _, s := range []string{"ollama:llama3:8b", "replay:run-42", "openai"} {
		spec, err := llm.ParseSpec(s)
		fmt.Printf("%q %q %v\n", spec.Provider, spec.Model, err)
	}
	// Output:
	// "ollama" "llama3:8b" <nil>
	// "replay" "run-42" <nil>
	// "" "" llm configuration: model spec "openai": name the model, as openai:MODEL (e.g. openai:gpt-4o-mini)
}

func ExampleNew() {
	noKeys := func(string) string { return "" }
	_, err := llm.New(llm.Spec{Provider: "anthropic", Model: "claude-3-5-haiku-latest"}, llm.Options{Env: noKeys})
	fmt.Println(errors.Is(err, llm.ErrConfig))
	fmt.Println(err)
	// Output:
	// true
	// llm configuration: model anthropic:claude-3-5-haiku-latest needs ANTHROPIC_API_KEY in the harness's environment
}

func ExampleCost() {
	spec, _ := llm.ParseSpec("openai:gpt-4o-mini")
	usage := protocol.ChatUsage{PromptTokens: 12000, CompletionTokens: 800, TotalTokens: 12800}
	fmt.Printf("$%.5f\n", llm.Cost(usage, llm.DefaultPrices(spec)))
	// Output: $0.00228
}

func ExampleWriteStream() {
	rec := httptest.NewRecorder()
	answer := protocol.ChatResponse{ID: "chatcmpl-1", Model: "scripted", Choices: []protocol.ChatChoice{{
		Message: protocol.ChatMessage{Role: "assistant", Content: protocol.MessageContent{Text: "Deployed version 2 to every region."}}, FinishReason: "stop"}}}
	_ = llm.WriteStream(rec, answer, false)
	fmt.Print(strings.ReplaceAll(rec.Body.String(), "\n\n", "\n"))
	// Output:
	// data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"scripted","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}
	// data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"scripted","choices":[{"index":0,"delta":{"content":"Deployed version 2 t"},"finish_reason":null}]}
	// data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"scripted","choices":[{"index":0,"delta":{"content":"o every region."},"finish_reason":null}]}
	// data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"scripted","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}
	// data: [DONE]
}
