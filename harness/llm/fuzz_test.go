package llm_test

import (
	"bytes"
	"testing"

	"github.com/overnight-dev/overnight/harness/llm"
)

// FuzzParseRequest: no body makes ParseRequest panic, and an accepted
// request has a canonical form that is deterministic, parses again, and is
// its own canonical form.
func FuzzParseRequest(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gpt-x","messages":` + reqConversation + `,"tools":` + reqTools + `,"tool_choice":{"type":"function","function":{"name":"deploy"}},"stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":100,"temperature":0.2,"top_p":0.9,"stop":"END","seed":7,"n":1,"user":"u1","response_format":{"type":"json_object"}}`,
		reqUser(`,"logprobs":false,"parallel_tool_calls":true,"presence_penalty":0`),
		reqUser(`,"logprobs":true`),
		reqUser(`,"tools":[{"type":"function","function":{"name":"f","parameters":{"b":1e-7,"a":[1.50,"<&>"]}}}],"tool_choice":"required"`),
		`{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b","refusal":"no"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`,
		`[]`, `null`, `{}`, `{"messages":null}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := llm.ParseRequest(body)
		if err != nil {
			return
		}
		c1, err := llm.Canonical(req)
		if err != nil {
			t.Fatalf("canonical of an accepted request: %v", err)
		}
		c2, err := llm.Canonical(req)
		if err != nil || !bytes.Equal(c1, c2) {
			t.Fatalf("canonical is not deterministic: %s vs %s (%v)", c1, c2, err)
		}
		again, err := llm.ParseRequest(c1)
		if err != nil {
			t.Fatalf("canonical form %s does not parse: %v", c1, err)
		}
		c3, err := llm.Canonical(again)
		if err != nil || !bytes.Equal(c1, c3) {
			t.Fatalf("canonical form is not a fixed point:\n%s\n%s (%v)", c1, c3, err)
		}
	})
}
