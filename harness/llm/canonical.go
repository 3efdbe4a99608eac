package llm

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// Canonical is the canonical JSON encoding of a request, used to match a
// replayed request against the recording and to hash exchanges: object keys
// sorted, no HTML escaping, no insignificant whitespace, numbers as written.
//
// It leaves out what does not change the answer's content: model and user
// (the harness chooses the model), stream and stream_options (the model
// answers whole; streaming is how the gateway delivers it) and n (always 1).
// A content given as a list of text parts encodes as the concatenated
// string, as the model sees it.
func Canonical(req protocol.ChatRequest) ([]byte, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("canonical request: %w", err)
	}
	// Decoding into generic values and encoding them again sorts every
	// object's keys, including those inside raw fields (tool parameters,
	// tool_choice).
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical request: %w", err)
	}
	for _, k := range []string{"model", "user", "stream", "stream_options", "n"} {
		delete(v, k)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("canonical request: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
