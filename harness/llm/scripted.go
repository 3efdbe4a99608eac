package llm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// The scripted model is a declared test double: its answers come from rules written in the
// scenario file (llm.rules), never from a real model. It lets the built-in scenarios run offline
// and deterministically; reports must name it as what it is.

// ProviderScripted is the Provider of the scripted model, and its default Name.
const ProviderScripted = "scripted"

// Sentinel errors of the scripted model. The gateway answers both with 400: the request is
// fine for an OpenAI endpoint, but the scenario's rules do not say how to answer it.
var (
	// ErrNoRule is returned (wrapped) when no rule matches a request. The message quotes the
	// last message and lists the rules.
	ErrNoRule = errors.New("scripted model: no rule matches")
	// ErrReference is returned (wrapped) when the rule that matched refers ("$message.path",
	// "$path") to a field the last message's JSON object does not hold, or the last message
	// holds no JSON object. A "$task" reference cannot fail here: NewScripted resolves it.
	ErrReference = errors.New("scripted model: unresolved reference")
)

// maxObjectStarts bounds the '{' positions tried when looking for the JSON object of a message,
// so that a long message full of braces costs little.
const maxObjectStarts = 1000

// Rule is one rule of the scripted model: when every condition set in When holds for a request,
// the model answers with Reply (finish_reason "stop") or with ToolCalls (finish_reason
// "tool_calls"), exactly one of the two. Rules are tried in order; the first that matches
// answers. Its JSON form is an item of a scenario's llm.rules.
type Rule struct {
	When      Match          `json:"when"`
	Reply     string         `json:"reply,omitempty"`      // a text answer
	ToolCalls []ScriptedCall `json:"tool_calls,omitempty"` // or tool calls, in order
}

// Match is the condition of a rule. Every field that is set must hold; an empty Match matches
// every request (a default rule: put it last).
type Match struct {
	LastMessageContains string `json:"last_message_contains,omitempty"` // a substring of the last message's content (case-sensitive)
	LastRole            string `json:"last_role,omitempty"`             // the role of the last message: user, tool, system, developer, assistant
	ToolOffered         string `json:"tool_offered,omitempty"`          // the request offers a tool of this name
	// PromptContains are substrings that must all appear in the request's
	// messages (any of them, system and tool messages included): a rule
	// that needs several things at once, such as a lesson and an error
	// code.
	PromptContains []string `json:"prompt_contains,omitempty"`
}

// ScriptedCall is a tool call the scripted model answers with.
//
// A string anywhere in Arguments (nested maps and lists included) that starts with "$" is a
// reference, replaced by the value it names (which may itself be an object or a list). A
// reference reads one of two sources:
//
//	"$task.service.name"     a field of the run's task: the scenario's task:, the JSON object the
//	                         agent reads in GET /v1/run (given with WithTask); "$task" is all of it
//	"$message.error.code"    a field of the first JSON object found in the last message's content;
//	                         "$message" is all of that object
//	"$error.code"            any other name is short for "$message.error.code", and
//	"$.error.code" the same  (so "$.task.x" and "$.message.x" reach message fields of those names)
//	"$."                     the whole JSON object of the last message
//	"$$5.00"                 not a reference: the literal string "$5.00" (one leading $ is dropped)
//
// A list is indexed by number: "$message.items.0.id". A "$task" reference is resolved once, by
// NewScripted, which refuses a path the task does not hold; a reference into the last message
// is resolved for each request (ErrReference when it does not resolve).
//
// A reference lets a rule answer with what the task asks and with what an error describes: for
// example arguments {name: "$task.network"}, or {rename: "$error.details.renamed"} against a last
// message holding {"error":{"code":"field_renamed","details":{"renamed":{"database_id":"db_id"}}}}.
type ScriptedCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"` // JSON-compatible values; nil is {}
}

// DecodeRules decodes the JSON form of rules, one raw JSON object per rule (a scenario's
// LLM.Rules), refusing unknown fields. Numbers are kept exactly as written (json.Number). It
// does not validate the rules: NewScripted does.
func DecodeRules(raw []json.RawMessage) ([]Rule, error) {
	rules := make([]Rule, 0, len(raw))
	for i, r := range raw {
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		dec.UseNumber()
		var rule Rule
		if err := dec.Decode(&rule); err != nil {
			return nil, fmt.Errorf("%w: scripted model rules[%d]: %v (a rule is {when: {...}, reply: TEXT} or {when: {...}, tool_calls: [{name, arguments}]})", ErrConfig, i, err)
		}
		rules = append(rules, rule)
	}
	return rules, nil
}

// Scripted is a deterministic test double: answers come from rules in the scenario file, never
// from a real model. The same request always gets a byte-identical response. A Scripted is
// immutable once made and safe for concurrent use.
type Scripted struct {
	name    string
	rules   []scriptedRule
	summary string // the rules' conditions, for ErrNoRule's message
}

var _ Model = (*Scripted)(nil)

// scriptedRule is a validated Rule, its arguments normalized to JSON values with references
// parsed.
type scriptedRule struct {
	when  Match
	reply string
	calls []scriptedCall
}

type scriptedCall struct {
	name string
	args any    // map[string]any of JSON values, *reference (into the last message) and json.Number
	json string // canonical arguments when they hold no reference into the last message
	refs bool   // the arguments hold a reference into the last message
	path string // "rules[i].tool_calls[j].arguments", for messages
}

// refSource is what a reference reads.
type refSource int

const (
	fromMessage refSource = iota // the first JSON object of the last message
	fromTask                     // the run's task
)

// The names that choose a reference's source ("$task.…", "$message.…"); any other first name
// is a field of the last message's JSON object.
const (
	refTask    = "task"
	refMessage = "message"
)

// reference is a parsed "$path" argument value.
type reference struct {
	text   string // as written
	source refSource
	path   []string // nil for the whole source
}

// ScriptedOption configures the scripted model (NewScripted).
type ScriptedOption func(*scriptedConfig) error

type scriptedConfig struct {
	task    any // the decoded task (json.Number for numbers); nil without WithTask
	hasTask bool
}

// WithTask gives the scripted model the run's task — the scenario's task:, as the agent receives
// it in GET /v1/run — which "$task" references read. Without it, a rule holding a "$task"
// reference is refused. task must be JSON.
func WithTask(task json.RawMessage) ScriptedOption {
	return func(c *scriptedConfig) error {
		dec := json.NewDecoder(bytes.NewReader(task))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("%w: scripted model: the task is not JSON: %v", ErrConfig, err)
		}
		c.task, c.hasTask = v, true
		return nil
	}
}

// knownRoles are the roles a last_role condition may name.
var knownRoles = []string{"system", "developer", "user", "assistant", "tool"}

// NewScripted validates rules and returns the scripted model. name is what Name returns and what
// responses carry as their model ("" means "scripted"). Each rule needs exactly one of a
// non-empty Reply or ToolCalls; each tool call a name; last_role a known role; references valid
// syntax, and every "$task" reference a path the task (WithTask) holds — it is resolved here,
// once. Errors wrap ErrConfig and name the rule (rules[i]). No rules at all is allowed: every
// request then fails with ErrNoRule.
func NewScripted(name string, rules []Rule, opts ...ScriptedOption) (*Scripted, error) {
	if name == "" {
		name = ProviderScripted
	}
	var cfg scriptedConfig
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	s := &Scripted{name: name, rules: make([]scriptedRule, 0, len(rules))}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: scripted model "+format, append([]any{ErrConfig}, args...)...))
	}
	for i, r := range rules {
		sr := scriptedRule{when: r.When, reply: r.Reply}
		if r.When.LastRole != "" && !slices.Contains(knownRoles, r.When.LastRole) {
			bad("rules[%d].when.last_role: unknown role %q (want one of %s)", i, r.When.LastRole, strings.Join(knownRoles, ", "))
		}
		switch {
		case r.Reply != "" && len(r.ToolCalls) > 0:
			bad("rules[%d]: reply and tool_calls are both set; set exactly one", i)
		case r.Reply == "" && len(r.ToolCalls) == 0:
			bad("rules[%d]: set a non-empty reply or tool_calls", i)
		}
		for j, c := range r.ToolCalls {
			path := fmt.Sprintf("rules[%d].tool_calls[%d]", i, j)
			if c.Name == "" {
				bad("%s.name: must not be empty", path)
			}
			sc, err := compileCall(c, path+".arguments", &cfg)
			if err != nil {
				errs = append(errs, fmt.Errorf("%w: scripted model %w", ErrConfig, err))
				continue
			}
			sr.calls = append(sr.calls, sc)
		}
		s.rules = append(s.rules, sr)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s.summary = summarize(rules)
	return s, nil
}

// compileCall normalizes a call's arguments to JSON values (a deep copy, so later changes to
// the caller's maps do not reach the model), parses the references in them and resolves those
// into the task.
func compileCall(c ScriptedCall, path string, cfg *scriptedConfig) (scriptedCall, error) {
	sc := scriptedCall{name: c.Name, path: path}
	raw, err := json.Marshal(c.Arguments)
	if err != nil {
		return sc, fmt.Errorf("%s: not JSON-compatible: %v", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var args any
	if err := dec.Decode(&args); err != nil {
		return sc, fmt.Errorf("%s: not JSON-compatible: %v", path, err)
	}
	if args == nil {
		args = map[string]any{}
	}
	args, err = parseRefs(args, path, cfg, &sc.refs)
	if err != nil {
		return sc, err
	}
	sc.args = args
	if !sc.refs {
		text, err := canonicalJSON(args)
		if err != nil {
			return sc, fmt.Errorf("%s: %v", path, err)
		}
		sc.json = text
	}
	return sc, nil
}

// parseRefs replaces, in a JSON value, every reference into the task by the task's value there,
// every reference into the last message by a *reference (setting *found), and every escaped
// "$$..." string by its literal.
func parseRefs(v any, path string, cfg *scriptedConfig, found *bool) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		// Sorted, so that of several bad references the same one is always reported.
		for _, k := range slices.Sorted(maps.Keys(v)) {
			nv, err := parseRefs(v[k], path+"."+k, cfg, found)
			if err != nil {
				return nil, err
			}
			v[k] = nv
		}
		return v, nil
	case []any:
		for i, item := range v {
			nv, err := parseRefs(item, path+"["+strconv.Itoa(i)+"]", cfg, found)
			if err != nil {
				return nil, err
			}
			v[i] = nv
		}
		return v, nil
	case string:
		if !strings.HasPrefix(v, "$") {
			return v, nil
		}
		if strings.HasPrefix(v, "$$") {
			return v[1:], nil
		}
		ref, err := parseReference(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		if ref.source == fromTask {
			if !cfg.hasTask {
				return nil, fmt.Errorf("%s: %q refers to the run's task, and the model was given none (llm.WithTask)", path, ref.text)
			}
			val, err := lookup(cfg.task, ref)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", path, err)
			}
			return val, nil
		}
		*found = true
		return ref, nil
	}
	return v, nil
}

// parseReference parses a reference: "$task", "$task.a.b", "$message", "$message.a.b", "$.",
// "$.a.b" or "$a.b" (the last three into the last message).
func parseReference(text string) (*reference, error) {
	rest := text[1:]
	ref := &reference{text: text}
	switch {
	case rest == ".":
		return ref, nil
	case strings.HasPrefix(rest, "."):
		rest = rest[1:] // "$.a.b": a field of the last message's object, whatever its name
	default:
		head, tail, dotted := strings.Cut(rest, ".")
		switch head {
		case refTask, refMessage:
			if head == refTask {
				ref.source = fromTask
			}
			if !dotted {
				return ref, nil
			}
			if tail == "" {
				return nil, fmt.Errorf("invalid reference %q: empty field name after the dot (write $%s for the whole of it)", text, head)
			}
			rest = tail
		}
	}
	if rest == "" {
		return nil, fmt.Errorf("invalid reference %q: write $task.PATH for a field of the run's task, $message.PATH (or $PATH) for a field of the last message's JSON object, $task or $message for the whole of one, or $$ for a literal $", text)
	}
	ref.path = strings.Split(rest, ".")
	for _, seg := range ref.path {
		if seg == "" {
			return nil, fmt.Errorf("invalid reference %q: empty field name between dots (write $$ at the start for a literal $)", text)
		}
	}
	return ref, nil
}

// summarize lists the rules' conditions for ErrNoRule's message.
func summarize(rules []Rule) string {
	if len(rules) == 0 {
		return "none; add rules to the scenario's llm.rules"
	}
	parts := make([]string, len(rules))
	for i, r := range rules {
		parts[i] = fmt.Sprintf("[%d] %s", i, describeMatch(r.When))
	}
	return strings.Join(parts, ", ")
}

func describeMatch(m Match) string {
	var conds []string
	if m.LastMessageContains != "" {
		conds = append(conds, fmt.Sprintf("last_message_contains: %q", m.LastMessageContains))
	}
	if m.LastRole != "" {
		conds = append(conds, "last_role: "+m.LastRole)
	}
	if m.ToolOffered != "" {
		conds = append(conds, "tool_offered: "+m.ToolOffered)
	}
	if len(m.PromptContains) > 0 {
		conds = append(conds, fmt.Sprintf("prompt_contains: %q", m.PromptContains))
	}
	return "{" + strings.Join(conds, ", ") + "}"
}

// Provider returns "scripted".
func (s *Scripted) Provider() string { return ProviderScripted }

// Name returns the name given to NewScripted ("scripted" by default).
func (s *Scripted) Name() string { return s.name }

// Complete answers req with the first rule that matches it. The response is deterministic: its
// ID is derived from the request, Created is 0 (the gateway may stamp it), tool call ids are
// call_1, call_2, … within the response, arguments are canonical JSON (sorted keys, no HTML
// escaping), and Usage is estimated as (len+3)/4 tokens per text: the prompt counts every
// message's content, the JSON of every message's tool calls and the JSON of the tools offered;
// the completion counts the reply or the JSON of the tool calls answered.
//
// No rule matching is an error wrapping ErrNoRule; a reference that cannot be resolved, one
// wrapping ErrReference.
func (s *Scripted) Complete(ctx context.Context, req protocol.ChatRequest) (protocol.ChatResponse, error) {
	if err := ctx.Err(); err != nil {
		return protocol.ChatResponse{}, fmt.Errorf("scripted model: %w", err)
	}
	var last protocol.ChatMessage
	if n := len(req.Messages); n > 0 {
		last = req.Messages[n-1]
	}
	rule := s.match(req, last)
	if rule == nil {
		return protocol.ChatResponse{}, fmt.Errorf("%w the last message %q (role %q; tools offered: %s; rules: %s); add a rule that matches it, or a default rule with when: {} at the end",
			ErrNoRule, clip(last.Content.Text, 200), last.Role, offered(req), s.summary)
	}

	msg := protocol.ChatMessage{Role: "assistant"}
	finish := "stop"
	var completion string
	if len(rule.calls) == 0 {
		msg.Content = protocol.MessageContent{Text: rule.reply}
		completion = rule.reply
	} else {
		finish = "tool_calls"
		msg.Content = protocol.MessageContent{Null: true}
		var obj map[string]any
		var objErr error
		objFound := false
		for i, c := range rule.calls {
			args := c.json
			if c.refs {
				if !objFound {
					obj, objErr = firstJSONObject(last.Content.Text)
					objFound = true
				}
				if objErr != nil {
					return protocol.ChatResponse{}, fmt.Errorf("%w: %s: %v", ErrReference, c.path, objErr)
				}
				v, err := resolve(c.args, obj, c.path)
				if err != nil {
					return protocol.ChatResponse{}, err
				}
				if args, err = canonicalJSON(v); err != nil {
					return protocol.ChatResponse{}, fmt.Errorf("scripted model: %s: %w", c.path, err)
				}
			}
			msg.ToolCalls = append(msg.ToolCalls, protocol.ChatToolCall{
				ID:       "call_" + strconv.Itoa(i+1),
				Type:     "function",
				Function: protocol.ChatFunctionCall{Name: c.name, Arguments: args},
			})
		}
		b, err := json.Marshal(msg.ToolCalls)
		if err != nil {
			return protocol.ChatResponse{}, fmt.Errorf("scripted model: encode tool calls: %w", err)
		}
		completion = string(b)
	}

	prompt, err := promptTokens(req)
	if err != nil {
		return protocol.ChatResponse{}, err
	}
	id, err := responseID(s.name, req)
	if err != nil {
		return protocol.ChatResponse{}, err
	}
	completionTokens := estimateTokens(completion)
	return protocol.ChatResponse{
		ID:      id,
		Object:  "chat.completion",
		Created: 0,
		Model:   s.name,
		Choices: []protocol.ChatChoice{{Index: 0, Message: msg, FinishReason: finish}},
		Usage: &protocol.ChatUsage{
			PromptTokens:     prompt,
			CompletionTokens: completionTokens,
			TotalTokens:      prompt + completionTokens,
		},
	}, nil
}

// match returns the first rule whose every set condition holds, or nil.
func (s *Scripted) match(req protocol.ChatRequest, last protocol.ChatMessage) *scriptedRule {
	for i := range s.rules {
		w := s.rules[i].when
		if w.LastMessageContains != "" && !strings.Contains(last.Content.Text, w.LastMessageContains) {
			continue
		}
		if w.LastRole != "" && last.Role != w.LastRole {
			continue
		}
		if w.ToolOffered != "" && !slices.ContainsFunc(req.Tools, func(t protocol.ChatTool) bool { return t.Function.Name == w.ToolOffered }) {
			continue
		}
		if !promptContains(req, w.PromptContains) {
			continue
		}
		return &s.rules[i]
	}
	return nil
}

// promptContains reports whether every one of subs appears in some message
// of the request.
func promptContains(req protocol.ChatRequest, subs []string) bool {
	for _, sub := range subs {
		if !slices.ContainsFunc(req.Messages, func(m protocol.ChatMessage) bool { return strings.Contains(m.Content.Text, sub) }) {
			return false
		}
	}
	return true
}

func offered(req protocol.ChatRequest) string {
	if len(req.Tools) == 0 {
		return "none"
	}
	names := make([]string, len(req.Tools))
	for i, t := range req.Tools {
		names[i] = t.Function.Name
	}
	return strings.Join(names, ", ")
}

// clip shortens s to at most n characters, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// firstJSONObject returns the first JSON object in text: decoding from each '{' in turn, the
// first that decodes to an object wins.
func firstJSONObject(text string) (map[string]any, error) {
	off := 0
	for tries := 0; tries < maxObjectStarts; tries++ {
		i := strings.IndexByte(text[off:], '{')
		if i < 0 {
			break
		}
		off += i
		dec := json.NewDecoder(strings.NewReader(text[off:]))
		dec.UseNumber()
		var obj map[string]any
		if err := dec.Decode(&obj); err == nil && obj != nil {
			return obj, nil
		}
		off++
	}
	return nil, fmt.Errorf("the last message holds no JSON object to resolve references against (last message %q)", clip(text, 200))
}

// resolve replaces the references in v (a compiled argument value) by their values in obj, the
// last message's JSON object.
func resolve(v any, obj map[string]any, path string) (any, error) {
	switch v := v.(type) {
	case *reference:
		r, err := lookup(obj, v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrReference, path, err)
		}
		return r, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			r, err := resolve(v[k], obj, path+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			r, err := resolve(item, obj, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

// lookup follows a reference's path inside root, the value of its source. Its error says which
// step of the path failed; the caller names the argument.
func lookup(root any, ref *reference) (any, error) {
	what, base := "the last message's JSON object", "$."
	if ref.source == fromTask {
		what, base = "the task", "$"+refTask
	}
	cur := root
	for i, seg := range ref.path {
		where := base
		if i > 0 {
			if ref.source == fromTask {
				where += "."
			}
			where += strings.Join(ref.path[:i], ".")
		}
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[seg]
			if !ok {
				return nil, fmt.Errorf("%q: %s has no field %q at %s (fields there: %s; write $$ for a literal $)",
					ref.text, what, seg, where, keys(c))
			}
			cur = next
		case []any:
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= len(c) {
				return nil, fmt.Errorf("%q: %s is a list of %d, and %q is not an index into it",
					ref.text, where, len(c), seg)
			}
			cur = c[n]
		default:
			return nil, fmt.Errorf("%q: %s is %s, which has no field %q",
				ref.text, where, describeJSON(cur), seg)
		}
	}
	return cur, nil
}

func keys(m map[string]any) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

func describeJSON(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", clip(v, 40))
	case bool:
		return "a boolean"
	case json.Number:
		return "the number " + v.String()
	}
	return "a value"
}

// canonicalJSON encodes v with sorted keys, no insignificant space and no HTML escaping.
func canonicalJSON(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("encode arguments: %w", err)
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// promptTokens estimates a request's prompt: each message's content, the JSON of each
// message's tool calls, and the JSON of the tools offered.
func promptTokens(req protocol.ChatRequest) (int, error) {
	n := 0
	for _, m := range req.Messages {
		n += estimateTokens(m.Content.Text)
		if len(m.ToolCalls) > 0 {
			b, err := json.Marshal(m.ToolCalls)
			if err != nil {
				return 0, fmt.Errorf("scripted model: encode tool calls of a %s message: %w", m.Role, err)
			}
			n += estimateTokens(string(b))
		}
	}
	if len(req.Tools) > 0 {
		b, err := json.Marshal(req.Tools)
		if err != nil {
			return 0, fmt.Errorf("scripted model: encode tools: %w", err)
		}
		n += estimateTokens(string(b))
	}
	return n, nil
}

// responseID derives a response's ID from the model's name and the request.
func responseID(name string, req protocol.ChatRequest) (string, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("scripted model: encode request: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(b)
	return "chatcmpl-scripted-" + hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// estimateTokens is the deterministic token estimate of the scripted model: four bytes a token,
// rounded up. (The package's exported TokenEstimate uses the same rule.)
func estimateTokens(s string) int { return (len(s) + 3) / 4 }
