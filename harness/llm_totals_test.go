package harness

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	openaigo "github.com/openai/openai-go/v3"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// apiCode is the error code an OpenAI client got ("" for none).
func apiCode(err error) string {
	var apiErr *openaigo.Error
	if errors.As(err, &apiErr) {
		return apiErr.Code
	}
	return ""
}

var _ = Describe("the LLM totals count every request that reached the endpoint", func() {
	var (
		ctx   context.Context
		state string
	)
	BeforeEach(func() {
		ctx = context.Background()
		state = GinkgoT().TempDir()
	})

	totals := func(lr *liveRun) LLMTotals {
		lr.r.mu.Lock()
		defer lr.r.mu.Unlock()
		return lr.r.llm.totals
	}

	It("stops an agent hammering a 429 with the call budget, and says so in the totals", func() {
		lr := startLLMRun(state, strings.Replace(llmScenario, "calls: 6", "calls: 3", 1), Options{},
			RunRequest{Faults: []chaos.Spec{mustParseSpec("llm-429:1s@llm:1/1h")}})
		raw := lr.openai(lr.attempt())
		var codes []string
		for range 10 { // a client that never waits: it asks again at once
			_, err := hello(ctx, raw)
			Expect(err).To(HaveOccurred())
			codes = append(codes, apiCode(err))
			if apiCode(err) == protocol.CodeBudget {
				break
			}
		}
		Expect(codes).To(Equal([]string{protocol.CodeRateLimited, protocol.CodeRateLimited, protocol.CodeRateLimited, protocol.CodeBudget}),
			"three refused calls spend a budget of three; the fourth ends the run")
		Eventually(lr.r.llm.limitCh).Should(BeClosed())
		Expect(lr.r.llm.ending()).To(Equal("LLM budget: 3 calls spent (budget 3)"))
		Expect(lr.r.llm.end().limit).To(BeTrue(), "a spent budget fails the run")

		_, err := hello(ctx, raw)
		Expect(err).To(MatchError(ContainSubstring("409")), "the run is ending: nothing more is asked")
		t := totals(lr)
		js, err := json.Marshal(t)
		Expect(err).NotTo(HaveOccurred())
		Expect(js).To(MatchJSON(`{"provider":"scripted","model":"scripted","test_double":true,"calls":4,"answered":0,"refused":4,
			"refused_by":{"rate_limit_exceeded":3,"budget_exceeded":1},"prompt_tokens":0,"completion_tokens":0,"cost_usd":0}`))
		Expect(lr.exchanges()).To(HaveLen(4), "every counted request is journaled")

		// A resumed run counts from the journal alone, and knows its budget spent.
		id := lr.r.rec.ID
		lr.stop()
		again := startLiveRun(state, id)
		Expect(totals(again)).To(Equal(t))
		Expect(again.r.llm.ending()).To(Equal("LLM budget: 3 calls spent (budget 3)"))
	})

	It("counts answered and refused requests apart, by code; the gateway's own refusals spend the budget too", func() {
		lr := startLLMRun(state, strings.Replace(llmScenario, "calls: 6", "calls: 4", 1), Options{},
			RunRequest{Faults: []chaos.Spec{mustParseSpec("llm-5xx@llm:2")}})
		raw := lr.openai(lr.attempt())
		unsupported := func() error {
			_, err := raw.Chat.Completions.New(ctx, openaigo.ChatCompletionNewParams{Model: "x",
				Messages: []openaigo.ChatCompletionMessageParamUnion{openaigo.UserMessage("hi")}, Logprobs: openaigo.Bool(true)})
			return err
		}
		_, err := hello(ctx, raw)
		Expect(err).NotTo(HaveOccurred())
		_, err = hello(ctx, raw)
		Expect(apiCode(err)).To(Equal(protocol.CodeProviderError), "the llm-5xx fault at call 2")
		Expect(apiCode(unsupported())).To(Equal(protocol.CodeUnsupportedParameter))
		_, err = hello(ctx, raw)
		Expect(err).NotTo(HaveOccurred())

		t := totals(lr)
		Expect(t.Calls).To(Equal(4))
		Expect(t.Answered).To(Equal(2))
		Expect(t.Refused).To(Equal(2))
		Expect(t.RefusedBy).To(Equal(map[string]int{protocol.CodeProviderError: 1, protocol.CodeUnsupportedParameter: 1}))
		Expect(t.PromptTokens).To(BeNumerically(">", 0), "tokens come from the answered calls")
		var numbered []int
		for _, rec := range lr.exchanges() {
			numbered = append(numbered, rec.Call)
		}
		Expect(numbered).To(Equal([]int{1, 2, 0, 3}), "a malformed request is counted but is no llm:N call")

		err = unsupported()
		Expect(apiCode(err)).To(Equal(protocol.CodeBudget), "four requests spent a budget of four, whatever they got")
		var apiErr *openaigo.Error
		Expect(errors.As(err, &apiErr)).To(BeTrue())
		Expect(apiErr.StatusCode).To(Equal(http.StatusTooManyRequests))
		Eventually(lr.r.llm.limitCh).Should(BeClosed())
		Expect(totals(lr).RefusedBy).To(HaveKeyWithValue(protocol.CodeBudget, 1))
	})
})
