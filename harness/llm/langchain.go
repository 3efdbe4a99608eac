package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tmc/langchaingo/llms"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// carries says what a provider's langchaingo client (v0.1.14) passes on of
// the subset ParseRequest accepts. What it cannot pass on is refused with
// 400 unsupported_parameter before any call, never dropped.
type carries struct {
	topP, seed, jsonMode bool
	tools                bool // tools, tool calls and tool results
	strictTools          bool // a function's strict flag
	toolChoice           bool // "none" with tools, "required", a named tool
	// legacyMaxTokens: max_tokens is sent as max_tokens (not
	// max_completion_tokens) when the request used it (openai).
	legacyMaxTokens bool
	// anthropic: the adapter reads only the first part of an assistant
	// message and concatenates system messages without a separator, and
	// tool call arguments must be JSON objects.
	onePartPerAssistant, joinSystem, objectArguments bool
}

func carriesFor(provider string) carries {
	switch provider {
	case ProviderOpenAI:
		// langchaingo's OpenAI client never sends top_p.
		return carries{seed: true, jsonMode: true, tools: true, strictTools: true, toolChoice: true, legacyMaxTokens: true}
	case ProviderAnthropic:
		// No seed, no JSON mode, no strict flag on tools, and
		// CallOptions.ToolChoice is not sent.
		return carries{topP: true, tools: true, onePartPerAssistant: true, joinSystem: true, objectArguments: true}
	case ProviderOllama:
		// langchaingo's Ollama client sends neither tools nor tool messages.
		return carries{topP: true, seed: true, jsonMode: true}
	}
	return carries{topP: true, seed: true, jsonMode: true, tools: true, strictTools: true, toolChoice: true}
}

// langchain is a Model backed by a langchaingo llms.Model.
type langchain struct {
	provider, name string
	m              llms.Model
	carries        carries
	// observed: the model's HTTP client goes through observe, so a call's
	// HTTP status and Retry-After are known exactly.
	observed bool
}

var _ Model = (*langchain)(nil)

// NewLangchain adapts a langchaingo model: provider is "openai",
// "anthropic", "ollama" (which decides what the request may carry: see
// below) or any other name (then every field is passed on); name is the
// model's name, sent as the model of every call (the request's own model
// field is not: the harness chooses the model).
//
// A request maps to GenerateContent as follows: system and developer
// messages are llms.ChatMessageTypeSystem, user messages Human, assistant
// messages AI with a text part and one llms.ToolCall part per tool call,
// tool messages Tool with one llms.ToolCallResponse (its Name looked up from
// the tool call it answers); tools are llms.Tool of type function
// (parameters default to an empty object schema); tool_choice is
// llms.WithToolChoice ("none", "auto", "required" or an llms.ToolChoice);
// max_completion_tokens or max_tokens is WithMaxTokens; temperature, top_p,
// stop and seed their options; response_format json_object is
// WithJSONMode. The answer's choices are merged into one (Anthropic answers
// one choice per content block): texts concatenated, tool calls in order,
// finish_reason mapped to stop, length, tool_calls or content_filter; usage
// comes from GenerationInfo (PromptTokens/CompletionTokens for OpenAI and
// Ollama, InputTokens/OutputTokens for Anthropic) and is nil when the
// provider reported none (both counts zero).
//
// What langchaingo v0.1.14 cannot carry, refused per provider with a
// *ProviderError 400 unsupported_parameter before any call:
//   - openai: top_p (the client never sends it).
//   - anthropic: seed, response_format json_object, a tool's strict flag
//     set to true, and a tool_choice other than "auto" (with tools offered).
//   - ollama: tools, tool_choice (with tools), assistant tool calls and tool
//     messages — use openai:MODEL with OPENAI_BASE_URL=http://HOST:11434/v1
//     (Ollama's OpenAI-compatible endpoint) for tools.
//
// Known differences that are not refusals: a request without temperature
// reaches openai, anthropic and ollama with temperature 0 (langchaingo
// always sends the field); an Anthropic request without a max token count
// gets langchaingo's default of 2048; for Anthropic, an assistant message
// with text and tool calls is sent as consecutive assistant turns of one
// block each and system messages are joined (blank line between) into the
// system prompt; Ollama's answers carry no stop reason, so their
// finish_reason is always "stop".
func NewLangchain(provider, name string, m llms.Model) Model {
	return &langchain{provider: provider, name: name, m: m, carries: carriesFor(provider)}
}

// Provider implements Model.
func (l *langchain) Provider() string { return l.provider }

// Name implements Model.
func (l *langchain) Name() string { return l.name }

// Complete implements Model.
func (l *langchain) Complete(ctx context.Context, req protocol.ChatRequest) (protocol.ChatResponse, error) {
	if err := l.check(req); err != nil {
		return protocol.ChatResponse{}, err
	}
	msgs, err := l.messages(req)
	if err != nil {
		return protocol.ChatResponse{}, err
	}
	opts, err := l.options(req)
	if err != nil {
		return protocol.ChatResponse{}, err
	}
	meta := &callMeta{}
	resp, err := l.m.GenerateContent(context.WithValue(ctx, callMetaKey{}, meta), msgs, opts...)
	status, retryAfter, sent := meta.result()
	if err == nil && l.observed && status >= 400 {
		err = fmt.Errorf("the provider answered HTTP %d", status)
	}
	if err != nil {
		return protocol.ChatResponse{}, l.failure(ctx, err, status, retryAfter, sent)
	}
	return l.response(resp)
}

func (l *langchain) refuse(param, format string, args ...any) error {
	return &ProviderError{
		Status: http.StatusBadRequest,
		Code:   protocol.CodeUnsupportedParameter,
		Param:  param,
		Message: fmt.Sprintf("%s is not carried to provider %s by langchaingo v0.1.14: %s",
			param, l.provider, fmt.Sprintf(format, args...)),
	}
}

// check refuses what the provider's client cannot carry.
func (l *langchain) check(req protocol.ChatRequest) error {
	c := l.carries
	if req.TopP != nil && !c.topP {
		return l.refuse("top_p", "remove it (temperature is carried)")
	}
	if req.Seed != nil && !c.seed {
		return l.refuse("seed", "remove it")
	}
	if req.Seed != nil && *req.Seed == 0 && c.seed {
		// langchaingo sends the seed with omitempty: 0 would vanish.
		return l.refuse("seed", "a seed of 0 cannot be carried (langchaingo drops it); use another seed")
	}
	if req.Temperature != nil && l.provider == ProviderOpenAI && reasoningModel(l.name) {
		// langchaingo leaves temperature out for these models.
		return l.refuse("temperature", "model %s takes no temperature (langchaingo drops it); remove it", l.name)
	}
	if req.ResponseFormat != nil && req.ResponseFormat.Type == "json_object" && !c.jsonMode {
		return l.refuse("response_format", "ask for JSON in the prompt instead")
	}
	if !c.tools {
		const hint = "use openai:MODEL with OPENAI_BASE_URL set to the server's OpenAI-compatible endpoint (Ollama: http://HOST:11434/v1) for tools"
		if len(req.Tools) > 0 {
			return l.refuse("tools", hint)
		}
		for i, m := range req.Messages {
			if len(m.ToolCalls) > 0 {
				return l.refuse(fmt.Sprintf("messages[%d].tool_calls", i), hint)
			}
			if m.Role == "tool" {
				return l.refuse(fmt.Sprintf("messages[%d] (a tool message)", i), hint)
			}
		}
	}
	tc, err := DecodeToolChoice(req.ToolChoice)
	if err != nil {
		return err
	}
	if len(req.Tools) > 0 && !c.toolChoice && tc.Mode != "" && tc.Mode != "auto" {
		return l.refuse("tool_choice", "only \"auto\" (the default) is carried to this provider; send \"auto\" or leave it out")
	}
	if !c.strictTools {
		for i, t := range req.Tools {
			if t.Function.Strict != nil && *t.Function.Strict {
				return l.refuse(fmt.Sprintf("tools[%d].function.strict", i), "remove it (the schema is still sent)")
			}
		}
	}
	if c.objectArguments {
		for i, m := range req.Messages {
			for j, call := range m.ToolCalls {
				if !isJSONObject(argumentsOrEmpty(call.Function.Arguments)) {
					return &ProviderError{Status: http.StatusBadRequest, Code: protocol.CodeProviderError,
						Message: fmt.Sprintf("messages[%d].tool_calls[%d].function.arguments: provider %s takes tool call arguments as a JSON object; got %s",
							i, j, l.provider, clipText(call.Function.Arguments, 80))}
				}
			}
		}
	}
	return nil
}

// messages maps a request's messages to langchaingo's.
func (l *langchain) messages(req protocol.ChatRequest) ([]llms.MessageContent, error) {
	toolNames := map[string]string{}
	var system []string
	out := make([]llms.MessageContent, 0, len(req.Messages)+1)
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "developer":
			if l.carries.joinSystem {
				system = append(system, m.Content.Text)
				continue
			}
			out = append(out, llms.TextParts(llms.ChatMessageTypeSystem, m.Content.Text))
		case "user":
			out = append(out, llms.TextParts(llms.ChatMessageTypeHuman, m.Content.Text))
		case "assistant":
			var parts []llms.ContentPart
			if m.Content.Text != "" || len(m.ToolCalls) == 0 {
				parts = append(parts, llms.TextPart(m.Content.Text))
			}
			for _, c := range m.ToolCalls {
				toolNames[c.ID] = c.Function.Name
				parts = append(parts, llms.ToolCall{
					ID:   c.ID,
					Type: "function",
					FunctionCall: &llms.FunctionCall{
						Name:      c.Function.Name,
						Arguments: argumentsOrEmpty(c.Function.Arguments),
					},
				})
			}
			if l.carries.onePartPerAssistant {
				for _, p := range parts {
					out = append(out, llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{p}})
				}
				continue
			}
			out = append(out, llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: parts})
		case "tool":
			out = append(out, llms.MessageContent{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{
				llms.ToolCallResponse{ToolCallID: m.ToolCallID, Name: toolNames[m.ToolCallID], Content: m.Content.Text},
			}})
		default:
			return nil, invalid(fmt.Sprintf("messages[%d].role", i), "%q", m.Role)
		}
	}
	if len(system) > 0 {
		out = append([]llms.MessageContent{llms.TextParts(llms.ChatMessageTypeSystem, strings.Join(system, "\n\n"))}, out...)
	}
	return out, nil
}

// options maps a request's parameters to langchaingo call options.
func (l *langchain) options(req protocol.ChatRequest) ([]llms.CallOption, error) {
	var opts []llms.CallOption
	if l.name != "" {
		opts = append(opts, llms.WithModel(l.name))
	}
	if len(req.Tools) > 0 {
		tools := make([]llms.Tool, 0, len(req.Tools))
		for _, t := range req.Tools {
			var params any = map[string]any{"type": "object", "properties": map[string]any{}}
			if len(t.Function.Parameters) > 0 && string(t.Function.Parameters) != "null" {
				params = nil
				if err := json.Unmarshal(t.Function.Parameters, &params); err != nil {
					return nil, invalid("tools.function.parameters", "tool %s: %v", t.Function.Name, err)
				}
			}
			tools = append(tools, llms.Tool{Type: "function", Function: &llms.FunctionDefinition{
				Name:        t.Function.Name,
				Description: t.Function.Description,
				Parameters:  params,
				Strict:      t.Function.Strict != nil && *t.Function.Strict,
			}})
		}
		opts = append(opts, llms.WithTools(tools))
	}
	tc, err := DecodeToolChoice(req.ToolChoice)
	if err != nil {
		return nil, err
	}
	switch tc.Mode {
	case "":
	case "function":
		opts = append(opts, llms.WithToolChoice(llms.ToolChoice{Type: "function", Function: &llms.FunctionReference{Name: tc.Function}}))
	default:
		opts = append(opts, llms.WithToolChoice(tc.Mode))
	}
	switch {
	case req.MaxCompletionTokens != nil:
		opts = append(opts, llms.WithMaxTokens(*req.MaxCompletionTokens))
	case req.MaxTokens != nil:
		opts = append(opts, llms.WithMaxTokens(*req.MaxTokens))
		if l.carries.legacyMaxTokens {
			// Sent as max_tokens, as the agent asked: some
			// OpenAI-compatible servers know no other field.
			opts = append(opts, llms.WithMetadata(map[string]any{"openai:use_legacy_max_tokens": true}))
		}
	}
	if req.Temperature != nil {
		opts = append(opts, llms.WithTemperature(*req.Temperature))
	}
	if req.TopP != nil {
		opts = append(opts, llms.WithTopP(*req.TopP))
	}
	if len(req.Stop) > 0 {
		opts = append(opts, llms.WithStopWords([]string(req.Stop)))
	}
	if req.Seed != nil {
		opts = append(opts, llms.WithSeed(int(*req.Seed)))
	}
	if req.ResponseFormat != nil && req.ResponseFormat.Type == "json_object" {
		opts = append(opts, llms.WithJSONMode())
	}
	return opts, nil
}

// response maps langchaingo's answer to one choice.
func (l *langchain) response(resp *llms.ContentResponse) (protocol.ChatResponse, error) {
	if resp == nil || len(resp.Choices) == 0 {
		return protocol.ChatResponse{}, &ProviderError{Status: http.StatusBadGateway, Code: protocol.CodeProviderError,
			Message: fmt.Sprintf("provider %s answered no choice", l.provider)}
	}
	var (
		text   strings.Builder
		calls  []protocol.ChatToolCall
		stop   string
		info   map[string]any
		filter bool
	)
	for _, c := range resp.Choices {
		if c == nil {
			continue
		}
		text.WriteString(c.Content)
		for _, tc := range c.ToolCalls {
			if tc.FunctionCall == nil {
				continue
			}
			id := tc.ID
			if id == "" {
				id = "call_" + strconv.Itoa(len(calls))
			}
			calls = append(calls, protocol.ChatToolCall{ID: id, Type: "function", Function: protocol.ChatFunctionCall{
				Name: tc.FunctionCall.Name, Arguments: argumentsOrEmpty(tc.FunctionCall.Arguments),
			}})
		}
		if stop == "" {
			stop = c.StopReason
		}
		if c.StopReason == "content_filter" || c.StopReason == "refusal" {
			filter = true
		}
		if info == nil && len(c.GenerationInfo) > 0 {
			info = c.GenerationInfo
		}
	}
	msg := protocol.ChatMessage{Role: "assistant", Content: protocol.MessageContent{Text: text.String()}, ToolCalls: calls}
	if msg.Content.Text == "" && len(calls) > 0 {
		msg.Content = protocol.MessageContent{Null: true}
	}
	finish := finishReason(stop, len(calls) > 0)
	if filter {
		finish = "content_filter"
	}
	return protocol.ChatResponse{
		ID:      "chatcmpl-" + l.provider,
		Object:  "chat.completion",
		Model:   l.name,
		Choices: []protocol.ChatChoice{{Index: 0, Message: msg, FinishReason: finish}},
		Usage:   usageFrom(info),
	}, nil
}

// finishReason maps a provider's stop reason (OpenAI's finish_reason,
// Anthropic's stop_reason; Ollama gives none) to OpenAI's.
func finishReason(stop string, toolCalls bool) string {
	switch stop {
	case "length", "max_tokens", "model_length":
		return "length"
	case "content_filter", "refusal":
		return "content_filter"
	}
	if toolCalls {
		return "tool_calls"
	}
	return "stop"
}

// usageFrom reads token counts from GenerationInfo. A provider that reports
// no usage leaves both counts zero there: that is nil, not a free call.
func usageFrom(info map[string]any) *protocol.ChatUsage {
	prompt, okP := intOf(info, "PromptTokens")
	completion, okC := intOf(info, "CompletionTokens")
	if !okP && !okC {
		prompt, okP = intOf(info, "InputTokens")
		completion, okC = intOf(info, "OutputTokens")
	}
	if (!okP && !okC) || prompt+completion == 0 {
		return nil
	}
	return &protocol.ChatUsage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
}

func intOf(info map[string]any, key string) (int, bool) {
	switch v := info[key].(type) {
	case int:
		return v, true
	case int32:
		return int(v), true
	case int64:
		return int(v), true
	case float64:
		return int(v), true
	case json.Number:
		n, err := v.Int64()
		return int(n), err == nil
	}
	return 0, false
}

// failure turns an error of GenerateContent into a *ProviderError (or the
// caller's cancellation).
func (l *langchain) failure(ctx context.Context, err error, status int, retryAfter time.Duration, sent bool) error {
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &ProviderError{Status: http.StatusGatewayTimeout, Code: protocol.CodeProviderError,
				Message: fmt.Sprintf("provider %s did not answer before the deadline", l.provider)}
		}
		return fmt.Errorf("llm %s call: %w", l.provider, ctx.Err())
	}
	if !l.observed && status == 0 {
		status = statusInError(err.Error())
	}
	msg := fmt.Sprintf("%s: %v", l.provider, err)
	switch {
	case status == http.StatusTooManyRequests:
		return &ProviderError{Status: status, Code: protocol.CodeRateLimited, Message: msg, RetryAfter: retryAfter}
	case status >= 500 && status <= 599:
		switch status {
		case 500, 502, 503, 504:
		case 529: // Anthropic's "overloaded"
			status = http.StatusServiceUnavailable
		default:
			status = http.StatusBadGateway
		}
		return &ProviderError{Status: status, Code: protocol.CodeProviderError, Message: msg}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return &ProviderError{Status: http.StatusBadGateway, Code: protocol.CodeProviderError,
			Message: fmt.Sprintf("%s (the provider refused the harness's credentials: check the key in the harness's environment)", msg)}
	case status == http.StatusNotFound:
		return &ProviderError{Status: http.StatusBadGateway, Code: protocol.CodeProviderError,
			Message: fmt.Sprintf("%s (check the model name and the base URL the harness was given)", msg)}
	case status == http.StatusRequestTimeout:
		return &ProviderError{Status: http.StatusGatewayTimeout, Code: protocol.CodeProviderError, Message: msg}
	case status >= 400:
		return &ProviderError{Status: http.StatusBadRequest, Code: protocol.CodeProviderError,
			Message: fmt.Sprintf("the provider refused the request: %s", msg)}
	case status >= 200 && status < 300:
		return &ProviderError{Status: http.StatusBadGateway, Code: protocol.CodeProviderError,
			Message: fmt.Sprintf("the provider's answer could not be read: %s", msg)}
	case l.observed && !sent:
		return &ProviderError{Status: http.StatusBadRequest, Code: protocol.CodeProviderError,
			Message: fmt.Sprintf("the request could not be converted for the provider: %s", msg)}
	}
	return &ProviderError{Status: http.StatusBadGateway, Code: protocol.CodeProviderError,
		Message: fmt.Sprintf("%s (is the provider reachable from the harness?)", msg)}
}

// langchaingo's OpenAI and Anthropic clients say "API returned unexpected
// status code: 429: …"; used only for a model whose HTTP client the
// harness does not observe.
var statusPattern = regexp.MustCompile(`status code: (\d{3})`)

func statusInError(s string) int {
	m := statusPattern.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// callMeta is what the observing transport saw of one Complete call.
type callMeta struct {
	mu         sync.Mutex
	sent       bool
	status     int
	retryAfter time.Duration
}

type callMetaKey struct{}

func (m *callMeta) result() (int, time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.status, m.retryAfter, m.sent
}

// observe returns a copy of c whose transport records, for requests made
// under Complete, the HTTP status and Retry-After of the provider's answer:
// langchaingo's errors keep neither reliably.
func observe(c *http.Client) *http.Client {
	cp := *c
	base := cp.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cp.Transport = observingTransport{base: base}
	return &cp
}

type observingTransport struct{ base http.RoundTripper }

func (t observingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	m, _ := r.Context().Value(callMetaKey{}).(*callMeta)
	if m != nil {
		m.mu.Lock()
		m.sent = true
		m.mu.Unlock()
	}
	resp, err := t.base.RoundTrip(r)
	if m != nil && resp != nil {
		m.mu.Lock()
		m.status = resp.StatusCode
		m.retryAfter = parseRetryAfter(resp.Header, time.Now())
		m.mu.Unlock()
	}
	return resp, err
}

// parseRetryAfter reads retry-after-ms (OpenAI) or Retry-After (seconds or
// an HTTP date).
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func argumentsOrEmpty(args string) string {
	if s := strings.TrimSpace(args); s == "" || s == "null" {
		return "{}"
	}
	return args
}

func isJSONObject(s string) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal([]byte(s), &m) == nil && m != nil
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:n]) + "…"
}

// reasoningModel reports the OpenAI models for which langchaingo's client
// leaves temperature out of the request.
func reasoningModel(name string) bool {
	for _, p := range []string{"o1", "o3", "o4", "gpt-5"} {
		if name == p || strings.HasPrefix(name, p+"-") || strings.HasPrefix(name, p+".") {
			return true
		}
	}
	return false
}
