package llm_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/llm"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

var _ = Describe("what clients echo back, and what langchaingo would drop", func() {
	It("accepts an assistant message echoed back whole, with empty function_call, audio and annotations", func() {
		req, err := llm.ParseRequest([]byte(`{"model":"m","messages":[
			{"role":"user","content":"hi"},
			{"role":"assistant","content":"hello","function_call":null,"audio":null,"annotations":[],"refusal":null},
			{"role":"user","content":"again"}]}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(req.Messages).To(HaveLen(3))
		_, err = llm.ParseRequest([]byte(`{"model":"m","messages":[{"role":"assistant","content":"x","function_call":{"name":"f","arguments":"{}"}}]}`))
		var pe *llm.ParamError
		Expect(errors.As(err, &pe)).To(BeTrue(), "a function_call with something in it is refused")
		Expect(pe.Param).To(Equal("messages[0].function_call"))
	})

	It("refuses, naming the param, what langchaingo's OpenAI client would silently drop: seed 0, temperature on reasoning models", func(ctx SpecContext) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			Fail("no request may reach the provider")
		}))
		defer srv.Close()
		env := map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": srv.URL + "/v1"}
		ask := func(model string, body protocol.ChatRequest) error {
			m, err := llm.New(llm.Spec{Provider: "openai", Model: model}, llm.Options{Env: func(k string) string { return env[k] }})
			Expect(err).NotTo(HaveOccurred())
			_, err = m.Complete(ctx, body)
			return err
		}
		zero, temp := int64(0), 0.5
		msgs := []protocol.ChatMessage{{Role: "user", Content: protocol.MessageContent{Text: "hi"}}}
		err := ask("gpt-4o-mini", protocol.ChatRequest{Messages: msgs, Seed: &zero})
		var pe *llm.ProviderError
		Expect(errors.As(err, &pe)).To(BeTrue(), "%v", err)
		Expect(pe.Code).To(Equal(protocol.CodeUnsupportedParameter))
		Expect(pe.Param).To(Equal("seed"))
		err = ask("o3-mini", protocol.ChatRequest{Messages: msgs, Temperature: &temp})
		Expect(errors.As(err, &pe)).To(BeTrue(), "%v", err)
		Expect(pe.Param).To(Equal("temperature"))
		_ = context.Background
	})
})
