package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// streamPiece is how many characters (runes) of content or arguments one
// streamed delta carries.
const streamPiece = 20

// WriteStream serves a whole answer as an OpenAI-compatible stream of
// server-sent events (Content-Type text/event-stream), flushed event by
// event: for each choice, a first chunk with the role, the content in
// deltas of 20 characters, each tool call as a delta with its index, id,
// type and name (and empty arguments) followed by deltas of its arguments,
// then a chunk with the finish_reason; when includeUsage, a last chunk with
// the usage and no choices (zero counts if resp.Usage is nil); then
// "data: [DONE]". The split is deterministic: the same answer always streams
// as the same bytes.
func WriteStream(w http.ResponseWriter, resp protocol.ChatResponse, includeUsage bool) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)

	id := resp.ID
	if id == "" {
		id = "chatcmpl-stream"
	}
	send := func(choices []protocol.ChatChunkChoice, usage *protocol.ChatUsage) error {
		b, err := json.Marshal(protocol.ChatChunk{
			ID: id, Object: "chat.completion.chunk", Created: resp.Created, Model: resp.Model,
			Choices: choices, Usage: usage,
		})
		if err != nil {
			return fmt.Errorf("encode stream chunk: %w", err)
		}
		return event(w, rc, b)
	}
	for _, c := range resp.Choices {
		one := func(d protocol.ChatDelta, finish *string) []protocol.ChatChunkChoice {
			return []protocol.ChatChunkChoice{{Index: c.Index, Delta: d, FinishReason: finish}}
		}
		first := protocol.ChatDelta{Role: "assistant"}
		if !c.Message.Content.Null {
			empty := ""
			first.Content = &empty
		}
		if err := send(one(first, nil), nil); err != nil {
			return err
		}
		for _, piece := range split(c.Message.Content.Text, streamPiece) {
			if err := send(one(protocol.ChatDelta{Content: &piece}, nil), nil); err != nil {
				return err
			}
		}
		for i, tc := range c.Message.ToolCalls {
			typ := tc.Type
			if typ == "" {
				typ = "function"
			}
			head := protocol.ChatToolCall{Index: &i, ID: tc.ID, Type: typ,
				Function: protocol.ChatFunctionCall{Name: tc.Function.Name}}
			if err := send(one(protocol.ChatDelta{ToolCalls: []protocol.ChatToolCall{head}}, nil), nil); err != nil {
				return err
			}
			for _, piece := range split(tc.Function.Arguments, streamPiece) {
				args := protocol.ChatToolCall{Index: &i, Function: protocol.ChatFunctionCall{Arguments: piece}}
				if err := send(one(protocol.ChatDelta{ToolCalls: []protocol.ChatToolCall{args}}, nil), nil); err != nil {
					return err
				}
			}
		}
		finish := c.FinishReason
		if finish == "" {
			finish = "stop"
		}
		if err := send(one(protocol.ChatDelta{}, &finish), nil); err != nil {
			return err
		}
	}
	if includeUsage {
		u := protocol.ChatUsage{}
		if resp.Usage != nil {
			u = *resp.Usage
		}
		if err := send([]protocol.ChatChunkChoice{}, &u); err != nil {
			return err
		}
	}
	return event(w, rc, []byte("[DONE]"))
}

// event writes one "data:" event and flushes it.
func event(w http.ResponseWriter, rc *http.ResponseController, data []byte) error {
	buf := make([]byte, 0, len(data)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("write stream event: %w", err)
	}
	if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return fmt.Errorf("flush stream event: %w", err)
	}
	return nil
}

// split cuts s into pieces of n runes (never inside a UTF-8 sequence).
func split(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		i, count := 0, 0
		for i < len(s) && count < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			count++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}
