package scenarios

import (
	"encoding/json"
	"fmt"
	"maps"
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
// tool_offered, prompt_contains; reply or tool_calls: [{name, arguments}]), the syntax of
// their references, and that every "$task" reference names a path of the scenario's task.
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
		b.sink.addAt(ptr, line, col, format, args...)
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
		b.sink.addAt(ptr, k.Line, k.Column, "%s: reply and tool_calls are both set; set exactly one", path)
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

// llmReferences checks every reference ("$path") in a tool call's arguments: its syntax, and
// that a "$task" reference names a path the scenario's task holds. The grammar is harness/llm's
// (parseReference there); both sides test it. A reference into the last message ("$message.…",
// "$.…", any other "$name.…") can only be checked when a request comes.
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
		head, tail, dotted := strings.Cut(rest, ".")
		offset := 1 // where rest starts in v
		switch {
		case strings.HasPrefix(rest, "."):
			rest, offset = rest[1:], 2
		case head == refTask || head == refMessage:
			if !dotted {
				if head == refTask {
					b.taskReference(ptr, path, v, nil, 0)
				}
				return
			}
			if tail == "" {
				b.errAt(ptr, "%s: invalid reference %q: empty field name after the dot (write $%s for the whole of it)", path, v, head)
				return
			}
			rest, offset = tail, 1+len(head)+1
		}
		segs := strings.Split(rest, ".")
		switch {
		case rest == "":
			b.errAt(ptr, "%s: invalid reference %q: write $task.PATH for a field of the scenario's task, $message.PATH (or $PATH) for a field of the last message's JSON object, $task or $message for the whole of one, or $$ for a literal $", path, v)
		case slices.Contains(segs, ""):
			b.errAt(ptr, "%s: invalid reference %q: empty field name between dots (write $$ at the start for a literal $)", path, v)
		case head == refTask && !strings.HasPrefix(v, "$."):
			b.taskReference(ptr, path, v, segs, offset)
		}
	}
}

// The names that choose a reference's source, as in harness/llm: "$task.…" reads the scenario's
// task, "$message.…" the first JSON object of the last message.
const (
	refTask    = "task"
	refMessage = "message"
)

// taskReference checks that the scenario's task holds the path segs of the reference ref (written
// at ptr; its path starts offset bytes into ref), reporting a step that fails at the character
// where that step is written.
func (b *builder) taskReference(ptr, path, ref string, segs []string, offset int) {
	root, _ := b.t.root.(map[string]any)
	var cur any = map[string]any{}
	if task, ok := root["task"].(map[string]any); ok {
		cur = task
	}
	report := func(i int, format string, args ...any) {
		at := offset
		for _, s := range segs[:i] {
			at += len(s) + 1
		}
		line, col := b.inside(b.node(ptr), utf8.RuneCountInString(ref[:at]))
		b.sink.addAt(ptr, line, col, "%s: %q: "+format, append([]any{path, ref}, args...)...)
	}
	for i, seg := range segs {
		where := "$" + refTask
		if i > 0 {
			where += "." + strings.Join(segs[:i], ".")
		}
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[seg]
			if !ok {
				fields := slices.Sorted(maps.Keys(c))
				hint := ""
				if guess := closest(seg, fields); guess != "" {
					hint = fmt.Sprintf(" (did you mean %q?)", guess)
				}
				list := strings.Join(fields, ", ")
				if list == "" {
					list = "none"
				}
				report(i, "the scenario's task has no field %q at %s%s; fields there: %s", seg, where, hint, list)
				return
			}
			cur = next
		case []any:
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= len(c) {
				report(i, "%s is a list of %d, and %q is not an index into it", where, len(c), seg)
				return
			}
			cur = c[n]
		default:
			report(i, "%s is %s, which has no field %q", where, describeValue(cur), seg)
			return
		}
	}
}

// describeValue names a scalar of the tree for a message.
func describeValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		if utf8.RuneCountInString(v) > 40 {
			v = string([]rune(v)[:40]) + "…"
		}
		return fmt.Sprintf("the string %q", v)
	case bool:
		return "a boolean"
	case int64, float64:
		return fmt.Sprintf("the number %v", v)
	}
	return "a value"
}
