// Package llm owns the gateway's LLM path between the OpenAI-compatible
// wire format (sandbox/protocol) and the models behind it: real providers
// through github.com/tmc/langchaingo (OpenAI-compatible endpoints,
// Anthropic, Ollama), and the scripted model — a deterministic test double
// driven by rules in the scenario, never presented as a real model.
//
// It must not know about runs, journals or faults: the harness records
// exchanges, serves replays, applies LLM faults and counts budgets around a
// Model.
package llm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// Model answers chat completions, whole (streaming to the agent is done by
// the gateway from the whole answer). Implementations are safe for
// concurrent use.
type Model interface {
	// Provider names where answers come from: "openai", "anthropic",
	// "ollama", "scripted" (the test double) or "replay".
	Provider() string
	// Name is the model's name, as GET /v1/llm/models lists it.
	Name() string
	// Complete answers one request. The response carries Usage (token
	// counts; the scripted model estimates them deterministically). A
	// provider failure is a *ProviderError.
	Complete(ctx context.Context, req protocol.ChatRequest) (protocol.ChatResponse, error)
}

// ProviderError is a failure of the model's provider, with what an OpenAI
// client needs to react to it.
type ProviderError struct {
	Status     int    // HTTP status to answer with: 429, 500, 502, 503, 504, or 4xx for a refused request
	Code       string // protocol code
	Message    string
	RetryAfter time.Duration // for 429: how long to wait
	Param      string        // for a refused request: the field refused
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("llm provider: %d %s: %s", e.Status, e.Code, e.Message)
}

// ErrConfig is returned (wrapped) when a provider cannot be set up: a
// missing key or URL, an unknown provider. The message says which variable
// to set.
var ErrConfig = errors.New("llm configuration")

// Spec names a model: "scripted", "openai:MODEL", "anthropic:MODEL",
// "ollama:MODEL", or "replay:RUN-ID".
type Spec struct {
	Provider string
	Model    string
}

func (s Spec) String() string {
	if s.Model == "" {
		return s.Provider
	}
	return s.Provider + ":" + s.Model
}
