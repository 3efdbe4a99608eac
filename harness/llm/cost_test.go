package llm_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/llm"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

var _ = Describe("Cost", func() {
	It("prices prompt and completion tokens per thousand", func() {
		Expect(llm.Cost(protocol.ChatUsage{PromptTokens: 1000, CompletionTokens: 500, TotalTokens: 1500},
			llm.Prices{PromptPer1K: 0.001, CompletionPer1K: 0.004})).To(BeNumerically("~", 0.003, 1e-12))
		Expect(llm.Cost(protocol.ChatUsage{PromptTokens: 123, CompletionTokens: 45}, llm.Prices{})).To(BeZero())
	})

	DescribeTable("DefaultPrices finds a model's family by its longest prefix",
		func(spec llm.Spec, want llm.Prices) {
			Expect(llm.DefaultPrices(spec)).To(Equal(want))
		},
		Entry(nil, llm.Spec{Provider: "openai", Model: "gpt-4o"}, llm.Prices{PromptPer1K: 0.0025, CompletionPer1K: 0.01}),
		Entry(nil, llm.Spec{Provider: "openai", Model: "gpt-4o-2024-08-06"}, llm.Prices{PromptPer1K: 0.0025, CompletionPer1K: 0.01}),
		Entry(nil, llm.Spec{Provider: "openai", Model: "gpt-4o-mini-2024-07-18"}, llm.Prices{PromptPer1K: 0.00015, CompletionPer1K: 0.0006}),
		Entry(nil, llm.Spec{Provider: "anthropic", Model: "claude-3-5-sonnet-20241022"}, llm.Prices{PromptPer1K: 0.003, CompletionPer1K: 0.015}),
		Entry(nil, llm.Spec{Provider: "anthropic", Model: "claude-3-5-haiku-latest"}, llm.Prices{PromptPer1K: 0.0008, CompletionPer1K: 0.004}),
		Entry("a local model behind an OpenAI-compatible server", llm.Spec{Provider: "openai", Model: "qwen2.5-7b-instruct"}, llm.Prices{}),
		Entry("ollama", llm.Spec{Provider: "ollama", Model: "gpt-4o"}, llm.Prices{}),
		Entry("the scripted test double", llm.Spec{Provider: "scripted"}, llm.Prices{}),
		Entry("a replay", llm.Spec{Provider: "replay", Model: "run-1"}, llm.Prices{}),
	)

	It("estimates four bytes a token, rounded up", func() {
		Expect(llm.TokenEstimate("")).To(Equal(0))
		Expect(llm.TokenEstimate("abcd")).To(Equal(1))
		Expect(llm.TokenEstimate("abcde")).To(Equal(2))
		Expect(llm.TokenEstimate("é")).To(Equal(1))
		Expect(llm.TokenEstimate("déployé")).To(Equal(3)) // 9 bytes
	})
})
