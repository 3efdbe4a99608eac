package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// ChatRetries bounds how many times Chat sends one request.
const ChatRetries = 12

// Chat asks the run's model through the gateway's OpenAI-compatible
// endpoint (the same one OPENAI_BASE_URL points any OpenAI client at). It
// waits out a 429's Retry-After in the run's virtual time, retries 5xx
// answers and calls whose connection was dropped or held too long, and
// returns the answer. A spent LLM budget (429 budget_exceeded) is returned
// at once. The answer's tool call arguments are the model's text: check
// them with ToolArguments.
func (c *Client) Chat(ctx context.Context, req protocol.ChatRequest) (protocol.ChatResponse, error) {
	req.Stream = false
	var last error
	backoff := 30 * time.Second
	for try := 1; try <= ChatRetries; try++ {
		var resp protocol.ChatResponse
		err := c.do(ctx, http.MethodPost, "/v1/llm/chat/completions", req, &resp, retrySafe)
		if err == nil {
			return resp, nil
		}
		last = err
		var apiErr *APIError
		switch {
		case ctx.Err() != nil:
			return protocol.ChatResponse{}, ctx.Err()
		case errors.As(err, &apiErr) && apiErr.Code == protocol.CodeBudget:
			return protocol.ChatResponse{}, err
		case errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests:
			wait := apiErr.RetryAfter
			if wait <= 0 {
				wait = time.Second
			}
			// Retry-After is honoured in the run's own (virtual) time.
			if _, err := c.Sleep(ctx, wait); err != nil {
				return protocol.ChatResponse{}, fmt.Errorf("agent: wait out Retry-After %s: %w", wait, err)
			}
			continue
		case errors.As(err, &apiErr) && apiErr.Status >= 500:
			// The provider failed: wait in the run's virtual time (an outage
			// of the provider may last hours), then ask again.
			if _, err := c.Sleep(ctx, backoff); err != nil {
				return protocol.ChatResponse{}, fmt.Errorf("agent: wait before asking the model again: %w", err)
			}
			backoff = min(2*backoff, time.Hour)
			continue
		case errors.As(err, &apiErr):
			return protocol.ChatResponse{}, err // a refused request: sending it again changes nothing
		}
		select {
		case <-ctx.Done():
			return protocol.ChatResponse{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return protocol.ChatResponse{}, fmt.Errorf("agent: the model did not answer after %d tries: %w", ChatRetries, last)
}

// ToolArguments decodes a tool call's arguments into v, with an error that
// can be sent back to the model when they are not valid JSON for v.
func ToolArguments(call protocol.ChatToolCall, v any) error {
	if err := json.Unmarshal([]byte(call.Function.Arguments), v); err != nil {
		return fmt.Errorf("the arguments of your call to %s are not valid JSON (%v): %q; call it again with a JSON object", call.Function.Name, err, call.Function.Arguments)
	}
	return nil
}
