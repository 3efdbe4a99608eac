package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// ParamError is a request field the gateway does not carry to providers: a
// field OpenAI defines but langchaingo cannot pass on (logprobs,
// parallel_tool_calls, …), a value outside the carried subset (n=2,
// response_format json_schema, an image content part), or a field OpenAI
// does not define at all. The gateway answers it with 400
// unsupported_parameter and Param set, rather than silently dropping the
// field.
type ParamError struct {
	Param string // where, as a path: "logprobs", "messages[2].name", "tools[0].function.foo"
	Msg   string // why, and what to do instead
}

// Error names the parameter and says why it is refused.
func (e *ParamError) Error() string {
	return fmt.Sprintf("unsupported parameter %s: %s", e.Param, e.Msg)
}

// ErrInvalidRequest is returned (wrapped) by ParseRequest for a body that is
// not a valid chat completion request: malformed JSON, no messages, an
// unknown role, a tool message without tool_call_id, a tool_choice naming no
// offered tool. The message names the field. (An unsupported field is a
// *ParamError instead.)
var ErrInvalidRequest = errors.New("invalid chat completion request")

func invalid(param, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidRequest, param, fmt.Sprintf(format, args...))
}

func unsupported(param, format string, args ...any) error {
	return &ParamError{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// Fields OpenAI defines that the gateway does not carry, with why. Any of
// them is refused unless it is null or holds the value OpenAI assumes when the
// field is absent (noop below), which changes nothing.
var notCarried = map[string]string{
	"logprobs":               "token log probabilities are not carried by langchaingo",
	"top_logprobs":           "token log probabilities are not carried by langchaingo",
	"parallel_tool_calls":    "the provider's default (parallel calls allowed) always applies; remove the field",
	"presence_penalty":       "penalties are not carried to every provider; remove the field",
	"frequency_penalty":      "penalties are not carried to every provider; remove the field",
	"logit_bias":             "logit bias is not carried by langchaingo",
	"functions":              "the deprecated functions API is not carried; use tools",
	"function_call":          "the deprecated functions API is not carried; use tool_choice",
	"audio":                  "audio output is not carried",
	"modalities":             "only text output is carried",
	"prediction":             "predicted outputs are not carried",
	"service_tier":           "the service tier is chosen by the harness's provider configuration",
	"store":                  "the gateway records exchanges itself; provider-side storage is not carried",
	"metadata":               "request metadata is not carried to providers",
	"reasoning_effort":       "reasoning effort is not carried by langchaingo",
	"web_search_options":     "web search is not carried",
	"verbosity":              "verbosity is not carried",
	"prompt_cache_key":       "prompt caching keys are not carried",
	"prompt_cache_retention": "prompt caching is not carried",
	"safety_identifier":      "safety identifiers are not carried",
	"max_output_tokens":      "not a chat completions field; use max_tokens or max_completion_tokens",
	"top_k":                  "top_k is not an OpenAI field and is not carried",
}

// noop holds the values of not-carried fields that mean "as if absent".
var noop = map[string][]string{
	"logprobs":            {"false"},
	"parallel_tool_calls": {"true"},
	"presence_penalty":    {"0", "0.0"},
	"frequency_penalty":   {"0", "0.0"},
	"store":               {"false"},
}

var (
	topLevelFields = []string{"model", "messages", "tools", "tool_choice", "stream", "stream_options", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop", "seed", "n", "user", "response_format"}
	messageFields  = []string{"role", "content", "tool_calls", "tool_call_id", "refusal", "name"}
	// echoedFields come back, empty, when a client echoes a whole assistant
	// message (Python's message.model_dump()); accepted only null or [].
	echoedFields       = []string{"function_call", "audio", "annotations"}
	toolFields         = []string{"type", "function"}
	functionFields     = []string{"name", "description", "parameters", "strict"}
	toolCallFields     = []string{"id", "type", "function"}
	callFunctionFields = []string{"name", "arguments"}
	roles              = []string{"system", "developer", "user", "assistant", "tool"}
	// OpenAI's rule for function names, which every provider accepts.
	functionName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

// ParseRequest decodes and checks the body of POST /v1/llm/chat/completions.
// It is strict: a field outside the carried subset is a *ParamError (never
// silently dropped), an invalid request wraps ErrInvalidRequest.
//
// The carried subset of OpenAI's chat completions request — every field
// accepted:
//
//   - model: string, optional. Informational: the harness chooses the model
//     (--llm); the field is not part of Canonical.
//   - messages: a non-empty list. Each message has
//     role: "system", "developer" (treated as system), "user", "assistant" or "tool";
//     content: a string, or a list of {"type":"text","text":...} parts
//     (concatenated; image, audio and file parts are refused), or null on an
//     assistant message with tool_calls;
//     tool_calls (assistant only): a list of {"id","type":"function",
//     "function":{"name","arguments"}} with a non-empty id and name and
//     arguments a string;
//     tool_call_id (tool only, required): the id of a tool call of an earlier
//     assistant message;
//     refusal (assistant only): accepted when a client echoes it back, not carried.
//     A message's "name" is refused: langchaingo does not carry it.
//   - tools: a list of {"type":"function","function":{"name", "description",
//     "parameters", "strict"}}; names match ^[a-zA-Z0-9_-]{1,64}$ and are
//     unique; parameters, when given, is a JSON object (a JSON Schema).
//   - tool_choice: "none", "auto", "required", or
//     {"type":"function","function":{"name":N}} naming an offered tool;
//     "required" and a named tool need tools.
//   - stream: bool; stream_options: {"include_usage": bool}, only with
//     stream true. The model answers whole; the gateway streams the answer
//     (WriteStream).
//   - max_tokens or max_completion_tokens (not both): a positive integer.
//   - temperature: 0 to 2; top_p: 0 to 1; seed: an integer.
//   - stop: a string or a list of up to 4 non-empty strings.
//   - n: only 1.
//   - user: string, optional; not part of Canonical, not carried.
//   - response_format: {"type":"text"} or {"type":"json_object"}
//     (json_schema is refused).
//
// Not carried, refused with a *ParamError unless null or set to the value
// that means "as if absent" (logprobs false, parallel_tool_calls true,
// presence_penalty 0, frequency_penalty 0, store false): logprobs,
// top_logprobs, parallel_tool_calls, presence_penalty, frequency_penalty,
// logit_bias, functions, function_call, audio, modalities, prediction,
// service_tier, store, metadata, reasoning_effort, web_search_options,
// verbosity, prompt_cache_key, prompt_cache_retention, safety_identifier
// (and max_output_tokens and top_k, which are not chat completions fields).
// Any other field, at any depth, is refused as unknown.
//
// Some providers carry less than this subset (the langchaingo adapter
// refuses, per provider, what its provider cannot take: see NewLangchain).
func ParseRequest(body []byte) (protocol.ChatRequest, error) {
	var req protocol.ChatRequest
	top, err := object(body, "request body")
	if err != nil {
		return req, err
	}
	for _, k := range sortedKeys(top) {
		v := top[k]
		if slices.Contains(topLevelFields, k) {
			continue
		}
		if why, ok := notCarried[k]; ok {
			if isNull(v) || isNoop(k, v) {
				delete(top, k)
				continue
			}
			return req, unsupported(k, "%s", why)
		}
		return req, unsupported(k, "not a field of the chat completions subset the gateway carries (see the llm package's ParseRequest documentation)")
	}
	msgsRaw, ok := top["messages"]
	if !ok || isNull(msgsRaw) {
		return req, invalid("messages", "required: give at least one message")
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(msgsRaw, &msgs); err != nil {
		return req, invalid("messages", "want a list of messages")
	}
	if len(msgs) == 0 {
		return req, invalid("messages", "empty: give at least one message")
	}
	rewritten := false
	for i, m := range msgs {
		mo, err := checkMessageShape(m, fmt.Sprintf("messages[%d]", i))
		if err != nil {
			return req, err
		}
		dropped := false
		for _, k := range echoedFields {
			if _, ok := mo[k]; ok {
				delete(mo, k)
				dropped = true
			}
		}
		if dropped {
			if msgs[i], err = json.Marshal(mo); err != nil {
				return req, invalid(fmt.Sprintf("messages[%d]", i), "%v", err)
			}
			rewritten = true
		}
	}
	// Unchanged messages stay as sent: encoding top compacts them just as
	// encoding the list again would.
	if rewritten {
		if top["messages"], err = json.Marshal(msgs); err != nil {
			return req, invalid("messages", "%v", err)
		}
	}
	if v, ok := top["tools"]; ok && !isNull(v) {
		var tools []json.RawMessage
		if err := json.Unmarshal(v, &tools); err != nil {
			return req, invalid("tools", "want a list of tools")
		}
		for i, t := range tools {
			if err := checkToolShape(t, fmt.Sprintf("tools[%d]", i)); err != nil {
				return req, err
			}
		}
	}
	if v, ok := top["stream_options"]; ok && !isNull(v) {
		so, err := object(v, "stream_options")
		if err != nil {
			return req, err
		}
		for _, k := range sortedKeys(so) {
			if k != "include_usage" {
				return req, unsupported("stream_options."+k, "only include_usage is carried")
			}
		}
	}
	if v, ok := top["response_format"]; ok && !isNull(v) {
		rf, err := object(v, "response_format")
		if err != nil {
			return req, err
		}
		for _, k := range sortedKeys(rf) {
			if k != "type" {
				return req, unsupported("response_format."+k, "only {\"type\":\"text\"} and {\"type\":\"json_object\"} are carried")
			}
		}
	}

	// The shape is known to be right: decode into the protocol types, with
	// the fields judged no-ops removed.
	clean, err := json.Marshal(top)
	if err != nil {
		return req, invalid("request body", "%v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(clean))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, invalid("request body", "%s", describeDecodeError(err))
	}
	if string(req.ToolChoice) == "null" {
		req.ToolChoice = nil
	}
	return req, validate(req)
}

// describeDecodeError turns a json error into words naming the field.
func describeDecodeError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %s: want %s, got JSON %s", te.Field, te.Type, te.Value)
	}
	return err.Error()
}

// checkMessageShape checks one message and returns it decoded one level
// deep.
func checkMessageShape(raw json.RawMessage, path string) (map[string]json.RawMessage, error) {
	m, err := object(raw, path)
	if err != nil {
		return nil, err
	}
	return m, checkMessageFields(m, path)
}

func checkMessageFields(m map[string]json.RawMessage, path string) error {
	for _, k := range sortedKeys(m) {
		if slices.Contains(echoedFields, k) && (isNull(m[k]) || string(bytes.TrimSpace(m[k])) == "[]") {
			continue // an assistant message echoed back by a client, with nothing in these
		}
		if !slices.Contains(messageFields, k) {
			return unsupported(path+"."+k, "not a message field the gateway carries (role, content, tool_calls, tool_call_id, refusal)")
		}
	}
	if v, ok := m["name"]; ok && !isNull(v) {
		return unsupported(path+".name", "a message's name is not carried by langchaingo; put it in the content instead")
	}
	if v, ok := m["refusal"]; ok && !isNull(v) {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return invalid(path+".refusal", "want a string or null")
		}
	}
	if v, ok := m["content"]; ok {
		if err := checkContentShape(v, path+".content"); err != nil {
			return err
		}
	}
	if v, ok := m["tool_calls"]; ok && !isNull(v) {
		var calls []json.RawMessage
		if err := json.Unmarshal(v, &calls); err != nil {
			return invalid(path+".tool_calls", "want a list of tool calls")
		}
		for j, c := range calls {
			cp := fmt.Sprintf("%s.tool_calls[%d]", path, j)
			co, err := object(c, cp)
			if err != nil {
				return err
			}
			for _, k := range sortedKeys(co) {
				if !slices.Contains(toolCallFields, k) {
					return unsupported(cp+"."+k, "not a tool call field (id, type, function)")
				}
			}
			if f, ok := co["function"]; ok && !isNull(f) {
				fo, err := object(f, cp+".function")
				if err != nil {
					return err
				}
				for _, k := range sortedKeys(fo) {
					if !slices.Contains(callFunctionFields, k) {
						return unsupported(cp+".function."+k, "not a function call field (name, arguments)")
					}
				}
			}
		}
	}
	return nil
}

// checkContentShape refuses content parts other than text, naming the part.
func checkContentShape(raw json.RawMessage, path string) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return invalid(path, "want a string, null or a list of text parts")
	}
	for i, p := range parts {
		pp := fmt.Sprintf("%s[%d]", path, i)
		po, err := object(p, pp)
		if err != nil {
			return err
		}
		var typ string
		if t, ok := po["type"]; ok {
			if err := json.Unmarshal(t, &typ); err != nil {
				return invalid(pp+".type", "want a string")
			}
		}
		if typ != "text" {
			return unsupported(pp+".type", "content part of type %q is not carried: only text parts are", typ)
		}
		for _, k := range sortedKeys(po) {
			if k != "type" && k != "text" {
				return unsupported(pp+"."+k, "a text part has only type and text")
			}
		}
	}
	return nil
}

func checkToolShape(raw json.RawMessage, path string) error {
	t, err := object(raw, path)
	if err != nil {
		return err
	}
	for _, k := range sortedKeys(t) {
		if !slices.Contains(toolFields, k) {
			return unsupported(path+"."+k, "not a tool field (type, function)")
		}
	}
	var typ string
	if v, ok := t["type"]; ok {
		if err := json.Unmarshal(v, &typ); err != nil {
			return invalid(path+".type", "want a string")
		}
	}
	if typ != "function" {
		return unsupported(path+".type", "tool type %q is not carried: only \"function\" tools are", typ)
	}
	f, ok := t["function"]
	if !ok || isNull(f) {
		return invalid(path+".function", "required for a function tool")
	}
	fo, err := object(f, path+".function")
	if err != nil {
		return err
	}
	for _, k := range sortedKeys(fo) {
		if !slices.Contains(functionFields, k) {
			return unsupported(path+".function."+k, "not a function field (name, description, parameters, strict)")
		}
	}
	if p, ok := fo["parameters"]; ok && !isNull(p) {
		if _, err := object(p, path+".function.parameters"); err != nil {
			return invalid(path+".function.parameters", "want a JSON Schema object")
		}
	}
	return nil
}

// validate checks the values of a decoded request.
func validate(req protocol.ChatRequest) error {
	if req.N != nil && *req.N != 1 {
		return unsupported("n", "only one choice (n=1) is carried")
	}
	offered := map[string]bool{}
	for i, t := range req.Tools {
		p := fmt.Sprintf("tools[%d].function.name", i)
		if !functionName.MatchString(t.Function.Name) {
			return invalid(p, "%q: want 1 to 64 letters, digits, _ or -", t.Function.Name)
		}
		if offered[t.Function.Name] {
			return invalid(p, "tool %q is offered twice", t.Function.Name)
		}
		offered[t.Function.Name] = true
	}
	calls := map[string]bool{} // tool call ids of earlier assistant messages
	for i, m := range req.Messages {
		p := fmt.Sprintf("messages[%d]", i)
		if !slices.Contains(roles, m.Role) {
			return invalid(p+".role", "%q: want one of %s", m.Role, strings.Join(roles, ", "))
		}
		if m.Role != "assistant" && len(m.ToolCalls) > 0 {
			return invalid(p+".tool_calls", "only assistant messages carry tool calls")
		}
		if m.Role != "tool" && m.ToolCallID != "" {
			return invalid(p+".tool_call_id", "only tool messages carry a tool_call_id")
		}
		if m.Role != "assistant" && len(m.Refusal) > 0 && string(m.Refusal) != "null" {
			return invalid(p+".refusal", "only assistant messages carry a refusal")
		}
		switch m.Role {
		case "assistant":
			for j, c := range m.ToolCalls {
				cp := fmt.Sprintf("%s.tool_calls[%d]", p, j)
				if c.Index != nil {
					return unsupported(cp+".index", "index belongs to streamed deltas, not to a request")
				}
				if c.ID == "" {
					return invalid(cp+".id", "required: the id the tool message answers with tool_call_id")
				}
				if c.Type != "" && c.Type != "function" {
					return unsupported(cp+".type", "tool call type %q is not carried: only \"function\" is", c.Type)
				}
				if c.Function.Name == "" {
					return invalid(cp+".function.name", "required")
				}
				calls[c.ID] = true
			}
			if m.Content.Null && len(m.ToolCalls) == 0 {
				return invalid(p+".content", "null content needs tool_calls")
			}
		case "tool":
			if m.ToolCallID == "" {
				return invalid(p+".tool_call_id", "required on a tool message: the id of the tool call it answers")
			}
			if !calls[m.ToolCallID] {
				return invalid(p+".tool_call_id", "%q answers no tool call of an earlier assistant message", m.ToolCallID)
			}
			if m.Content.Null {
				return invalid(p+".content", "a tool message needs content (a string)")
			}
		default:
			if m.Content.Null {
				return invalid(p+".content", "a %s message needs content (a string)", m.Role)
			}
		}
	}
	if err := validateToolChoice(req.ToolChoice, offered, len(req.Tools) > 0); err != nil {
		return err
	}
	if req.StreamOptions != nil && !req.Stream {
		return invalid("stream_options", "only allowed with stream: true")
	}
	if req.MaxTokens != nil && req.MaxCompletionTokens != nil {
		return invalid("max_tokens", "give max_tokens or max_completion_tokens, not both")
	}
	if req.MaxTokens != nil && *req.MaxTokens < 1 {
		return invalid("max_tokens", "%d: want a positive integer", *req.MaxTokens)
	}
	if req.MaxCompletionTokens != nil && *req.MaxCompletionTokens < 1 {
		return invalid("max_completion_tokens", "%d: want a positive integer", *req.MaxCompletionTokens)
	}
	if t := req.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 2) {
		return invalid("temperature", "%v: want 0 to 2", *t)
	}
	if t := req.TopP; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 1) {
		return invalid("top_p", "%v: want 0 to 1", *t)
	}
	if len(req.Stop) > 4 {
		return invalid("stop", "%d stop sequences: want at most 4", len(req.Stop))
	}
	for i, s := range req.Stop {
		if s == "" {
			return invalid(fmt.Sprintf("stop[%d]", i), "empty stop sequence")
		}
	}
	if rf := req.ResponseFormat; rf != nil && rf.Type != "text" && rf.Type != "json_object" {
		return unsupported("response_format.type", "%q is not carried: only \"text\" and \"json_object\" are", rf.Type)
	}
	return nil
}

// ToolChoice is the decoded form of a request's tool_choice: Mode is "",
// "none", "auto" or "required", or "function" with Function naming the tool.
type ToolChoice struct {
	Mode     string
	Function string
}

// DecodeToolChoice decodes a tool_choice value (nil or null: Mode "").
func DecodeToolChoice(raw json.RawMessage) (ToolChoice, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ToolChoice{}, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return ToolChoice{}, invalid("tool_choice", "%v", err)
		}
		switch s {
		case "none", "auto", "required":
			return ToolChoice{Mode: s}, nil
		}
		return ToolChoice{}, invalid("tool_choice", "%q: want \"none\", \"auto\", \"required\" or {\"type\":\"function\",\"function\":{\"name\":...}}", s)
	}
	o, err := object(raw, "tool_choice")
	if err != nil {
		return ToolChoice{}, err
	}
	for _, k := range sortedKeys(o) {
		if k != "type" && k != "function" {
			return ToolChoice{}, unsupported("tool_choice."+k, "a named tool choice has only type and function")
		}
	}
	var typ string
	if t, ok := o["type"]; ok {
		if err := json.Unmarshal(t, &typ); err != nil {
			return ToolChoice{}, invalid("tool_choice.type", "want a string")
		}
	}
	if typ != "function" {
		return ToolChoice{}, unsupported("tool_choice.type", "%q is not carried: only \"function\" is", typ)
	}
	f, ok := o["function"]
	if !ok || isNull(f) {
		return ToolChoice{}, invalid("tool_choice.function", "required: {\"name\": ...}")
	}
	fo, err := object(f, "tool_choice.function")
	if err != nil {
		return ToolChoice{}, err
	}
	for _, k := range sortedKeys(fo) {
		if k != "name" {
			return ToolChoice{}, unsupported("tool_choice.function."+k, "a named tool choice's function has only a name")
		}
	}
	var name string
	if n, ok := fo["name"]; ok {
		if err := json.Unmarshal(n, &name); err != nil {
			return ToolChoice{}, invalid("tool_choice.function.name", "want a string")
		}
	}
	if name == "" {
		return ToolChoice{}, invalid("tool_choice.function.name", "required")
	}
	return ToolChoice{Mode: "function", Function: name}, nil
}

func validateToolChoice(raw json.RawMessage, offered map[string]bool, haveTools bool) error {
	tc, err := DecodeToolChoice(raw)
	if err != nil {
		return err
	}
	switch tc.Mode {
	case "required":
		if !haveTools {
			return invalid("tool_choice", "\"required\" needs tools")
		}
	case "function":
		if !offered[tc.Function] {
			return invalid("tool_choice.function.name", "%q is not an offered tool", tc.Function)
		}
	}
	return nil
}

// object decodes a JSON object into its raw fields, refusing anything else
// (and trailing data).
func object(raw []byte, what string) (map[string]json.RawMessage, error) {
	// The usual case, a well-formed object, in one pass and without a
	// Decoder's copy of raw. Whatever it refuses (or a null) takes the
	// Decoder's path below, which names what is wrong; where both accept,
	// they decode alike.
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err == nil && m != nil {
		return m, nil
	}
	m = nil
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&m); err != nil {
		return nil, invalid(what, "want a JSON object: %s", describeDecodeError(err))
	}
	if m == nil {
		return nil, invalid(what, "want a JSON object, got null")
	}
	if len(bytes.TrimSpace(raw[dec.InputOffset():])) > 0 {
		return nil, invalid(what, "trailing data after the JSON object")
	}
	return m, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func isNoop(field string, raw json.RawMessage) bool {
	return slices.Contains(noop[field], string(bytes.TrimSpace(raw)))
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
