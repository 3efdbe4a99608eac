package llm

import (
	"strings"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// Prices of a model in US dollars per 1000 tokens.
type Prices struct {
	PromptPer1K     float64 `json:"prompt_per_1k" yaml:"prompt_per_1k"`
	CompletionPer1K float64 `json:"completion_per_1k" yaml:"completion_per_1k"`
}

// Cost is what a call's usage costs at the given prices, in US dollars.
func Cost(u protocol.ChatUsage, p Prices) float64 {
	return float64(u.PromptTokens)/1000*p.PromptPer1K + float64(u.CompletionTokens)/1000*p.CompletionPer1K
}

// defaultPrices are list prices per 1000 tokens (input, output), as known
// when this table was written (2025); providers change them, so a scenario
// that budgets cost should state its own prices. Keys are model name
// prefixes: the longest matching prefix wins, so dated snapshots
// ("gpt-4o-2024-08-06", "claude-3-5-sonnet-20241022") and "-latest" aliases
// find their family.
var defaultPrices = map[string]map[string]Prices{
	"openai": {
		"gpt-4o":        {0.0025, 0.01},
		"gpt-4o-mini":   {0.00015, 0.0006},
		"gpt-4.1":       {0.002, 0.008},
		"gpt-4.1-mini":  {0.0004, 0.0016},
		"gpt-4.1-nano":  {0.0001, 0.0004},
		"gpt-4-turbo":   {0.01, 0.03},
		"gpt-3.5-turbo": {0.0005, 0.0015},
		"o1":            {0.015, 0.06},
		"o1-mini":       {0.0011, 0.0044},
		"o3":            {0.002, 0.008},
		"o3-mini":       {0.0011, 0.0044},
		"o4-mini":       {0.0011, 0.0044},
	},
	"anthropic": {
		"claude-3-haiku":    {0.00025, 0.00125},
		"claude-3-5-haiku":  {0.0008, 0.004},
		"claude-haiku-4-5":  {0.001, 0.005},
		"claude-3-5-sonnet": {0.003, 0.015},
		"claude-3-7-sonnet": {0.003, 0.015},
		"claude-sonnet-4":   {0.003, 0.015},
		"claude-3-opus":     {0.015, 0.075},
		"claude-opus-4":     {0.015, 0.075},
	},
}

// DefaultPrices is a convenience: list prices of a few well-known OpenAI and
// Anthropic models, as known when the table was written (they change; a
// scenario's own prices override them). It is zero for unknown models, for
// local models (ollama, and any model an OpenAI-compatible server serves
// under another name) and for the scripted and replay models, which cost
// nothing.
func DefaultPrices(spec Spec) Prices {
	table := defaultPrices[spec.Provider]
	best, found := "", Prices{}
	for prefix, p := range table {
		if strings.HasPrefix(spec.Model, prefix) && len(prefix) > len(best) {
			best, found = prefix, p
		}
	}
	return found
}

// TokenEstimate is the deterministic token estimate used where no provider
// counts tokens (the scripted model, a provider that reports no usage): four
// bytes a token, rounded up.
func TokenEstimate(text string) int { return (len(text) + 3) / 4 }
