package scenarios

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultLLMModel is the model of an llm block that names none: the scripted model, a
// deterministic test double driven by the block's rules.
const DefaultLLMModel = "scripted"

// llmProviders are the providers a scenario's llm.model may name before ":MODEL".
var llmProviders = []string{"openai", "anthropic", "ollama"}

// LLM is a scenario's llm block: which model answers the agent's chat completions by default,
// the budgets of a run, prices, and the rules of the scripted model.
//
// This package does not import harness/llm (nor the other way round): each rule is handed on as
// its JSON form, which harness/llm.DecodeRules turns into []llm.Rule. Parse has already checked
// the rules' structure with the same field names (when: last_message_contains, last_role,
// tool_offered, prompt_contains; reply or tool_calls: [{name, arguments}]) and the syntax of
// their references.
type LLM struct {
	// Model is the default model spec: "scripted" (DefaultLLMModel, when the block names none),
	// "openai:MODEL", "anthropic:MODEL" or "ollama:MODEL". The --llm flag overrides it.
	Model string
	// Budget bounds a run's LLM use; a zero field means no limit.
	Budget LLMBudget
	// Prices override the model's price table; nil keeps the table.
	Prices *LLMPrices
	// Rules are the scripted model's rules in file order, each one JSON object
	// ({"when":{...},"reply":...} or {"when":{...},"tool_calls":[...]}); nil if none.
	Rules []json.RawMessage
}

// LLMBudget bounds a run's LLM use. Exceeding a bound ends the run with that reason. Zero means
// no limit (a file cannot write 0: it leaves the field out).
type LLMBudget struct {
	Calls   int     // chat completions
	Tokens  int     // prompt plus completion tokens
	CostUSD float64 // US dollars
}

// LLMPrices are US dollars per 1000 tokens.
type LLMPrices struct {
	PromptPer1K     float64
	CompletionPer1K float64
}

// llm checks and builds the llm block.
func (b *builder) llm(m map[string]any) *LLM {
	l := &LLM{Model: DefaultLLMModel}
	if model, ok := m["model"].(string); ok && model != "" {
		if b.llmModel(model) {
			l.Model = model
		}
	}
	if budget, ok := m["budget"].(map[string]any); ok {
		l.Budget.Calls = int(number(budget["calls"]))
		l.Budget.Tokens = int(number(budget["tokens"]))
		l.Budget.CostUSD = number(budget["cost_usd"])
	}
	if prices, ok := m["prices"].(map[string]any); ok {
		l.Prices = &LLMPrices{PromptPer1K: number(prices["prompt_per_1k"]), CompletionPer1K: number(prices["completion_per_1k"])}
	}
	if rules, ok := m["rules"].([]any); ok {
		for i, r := range rules {
			rule, ok := r.(map[string]any)
			if !ok {
				continue
			}
			ptr := "/llm/rules/" + strconv.Itoa(i)
			b.llmRule(ptr, fmt.Sprintf("llm.rules[%d]", i), rule)
			raw, err := json.Marshal(rule)
			if err != nil {
				// The tree holds JSON-compatible values only; this would be a bug of the converter.
				b.errAt(ptr, "llm.rules[%d]: cannot be carried as JSON: %v", i, err)
				continue
			}
			l.Rules = append(l.Rules, raw)
		}
	}
	return l
}

// number reads a JSON number of the tree (the schema checked its type and range).
func number(v any) float64 {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case float64:
		return n
	}
	return 0
}

// llmModel checks a model spec, reporting a problem at the character it concerns.
func (b *builder) llmModel(spec string) bool {
	const ptr = "/llm/model"
	const want = "want scripted, openai:MODEL, anthropic:MODEL or ollama:MODEL"
	errAtChar := func(offset int, format string, args ...any) {
		line, col := b.inside(b.node(ptr), utf8.RuneCountInString(spec[:offset]))
		b.sink.add(line, col, format, args...)
	}
	provider, model, hasModel := strings.Cut(spec, ":")
	switch {
	case provider == "replay":
		errAtChar(0, "llm.model: %q: replay is chosen on the command line (--llm replay:RUN-ID), not in a scenario; %s", spec, want)
		return false
	case provider == DefaultLLMModel:
		if hasModel {
			errAtChar(len(provider), "llm.model: %q: the scripted model takes no model name; write scripted", spec)
			return false
		}
		return true
	case !slices.Contains(llmProviders, provider):
		msg := fmt.Sprintf("llm.model: %q: unknown provider %q", spec, provider)
		if guess := closest(provider, append([]string{DefaultLLMModel}, llmProviders...)); guess != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", guess)
		}
		errAtChar(0, "%s; %s", msg, want)
		return false
	case model == "":
		at := 0
		if hasModel {
			at = len(provider) // the ':' with nothing after it
		}
		errAtChar(at, "llm.model: %q: %s needs a model name: %s:MODEL, such as openai:gpt-4o-mini or ollama:llama3", spec, provider, provider)
		return false
	}
	if i := strings.IndexFunc(model, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
		errAtChar(len(provider)+1+i, "llm.model: %q: a model name has no spaces", spec)
		return false
	}
	return true
}

// llmRule checks what the schema does not say about one rule: exactly one of reply and
// tool_calls, and the references in tool call arguments.
func (b *builder) llmRule(ptr, path string, rule map[string]any) {
	var set []string
	for _, k := range []string{"reply", "tool_calls"} {
		if v, ok := rule[k]; ok && v != nil {
			set = append(set, k)
		}
	}
	switch len(set) {
	case 0:
		b.errAt(ptr, "%s: set reply (a text answer) or tool_calls (a list of {name, arguments})", path)
	case 2:
		// Report at the key written second.
		k := b.keyNode(ptr + "/tool_calls")
		if r := b.keyNode(ptr + "/reply"); r.Line > k.Line || r.Line == k.Line && r.Column > k.Column {
			k = r
		}
		b.sink.add(k.Line, k.Column, "%s: reply and tool_calls are both set; set exactly one", path)
	}
	calls, _ := rule["tool_calls"].([]any)
	for j, c := range calls {
		call, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if args, ok := call["arguments"].(map[string]any); ok {
			argPtr := fmt.Sprintf("%s/tool_calls/%d/arguments", ptr, j)
			b.llmReferences(args, argPtr)
		}
	}
}

// llmReferences checks the syntax of every reference ("$path") in a tool call's arguments. The
// grammar is harness/llm's (parseReference there); both sides test it.
func (b *builder) llmReferences(v any, ptr string) {
	switch v := v.(type) {
	case map[string]any:
		for k, item := range v {
			b.llmReferences(item, ptr+"/"+escapePointer(k))
		}
	case []any:
		for i, item := range v {
			b.llmReferences(item, ptr+"/"+strconv.Itoa(i))
		}
	case string:
		if !strings.HasPrefix(v, "$") || strings.HasPrefix(v, "$$") {
			return
		}
		loc := b.t.at[ptr]
		path := ""
		if loc != nil {
			path = loc.path
		}
		rest := v[1:]
		if rest == "." {
			return
		}
		rest = strings.TrimPrefix(rest, ".")
		switch {
		case rest == "":
			b.errAt(ptr, "%s: invalid reference %q: write $. for the whole JSON object of the last message, $path.to.field for a field, or $$ for a literal $", path, v)
		case slices.Contains(strings.Split(rest, "."), ""):
			b.errAt(ptr, "%s: invalid reference %q: empty field name between dots (write $$ at the start for a literal $)", path, v)
		}
	}
}
