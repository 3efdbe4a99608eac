package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The LLM half of protocol v1: an OpenAI-compatible chat-completions
// endpoint at /v1/llm/chat/completions (and /v1/llm/models), the subset
// that langchaingo can carry. Requests with any other field are refused
// with 400 unsupported_parameter, never silently dropped.

// CodeUnsupportedParameter is the error code for a request field the
// gateway does not carry to providers.
const CodeUnsupportedParameter = "unsupported_parameter"

// Codes of the LLM endpoint's own errors (OpenAI-style "type" values are
// mirrored in Code).
const (
	CodeRateLimited   = "rate_limit_exceeded" // 429, with Retry-After
	CodeProviderError = "provider_error"      // 5xx from the provider (or an llm-5xx fault)
	CodeBudget        = "budget_exceeded"     // 429: the scenario's LLM budget is spent; the run ends
	CodeDivergence    = "replay_divergence"   // 409: a replayed run asked something the recording does not hold
)

// ChatRequest is the body of POST /v1/llm/chat/completions.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            []ChatMessage   `json:"messages"`
	Tools               []ChatTool      `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"` // "none" | "auto" | "required" | {"type":"function","function":{"name":...}}
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *StreamOptions  `json:"stream_options,omitempty"`
	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	Stop                StopList        `json:"stop,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	N                   *int            `json:"n,omitempty"` // only 1
	User                string          `json:"user,omitempty"`
	ResponseFormat      *ResponseFormat `json:"response_format,omitempty"` // {"type":"text"|"json_object"}
}

// StreamOptions of a streaming request.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage,omitempty"`
}

// ResponseFormat asks for plain text or a JSON object.
type ResponseFormat struct {
	Type string `json:"type"`
}

// StopList is "stop": a string or a list of strings.
type StopList []string

// UnmarshalJSON accepts a string or a list of strings.
func (s *StopList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = StopList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("stop: want a string or a list of strings")
	}
	*s = many
	return nil
}

// ChatMessage is one message of a conversation. Content is a string, or a
// list of parts of which only {"type":"text","text":...} is carried.
type ChatMessage struct {
	Role       string          `json:"role"` // system, developer, user, assistant, tool
	Content    MessageContent  `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []ChatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Refusal    json.RawMessage `json:"refusal,omitempty"` // accepted on assistant messages echoed back; not carried
}

// MessageContent is a message's text: a JSON string, null, or a list of
// text parts (concatenated).
type MessageContent struct {
	Text  string
	Null  bool
	Parts bool // it came as a list of parts
}

// UnmarshalJSON accepts a string, null or a list of text parts.
func (c *MessageContent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*c = MessageContent{Null: true}
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = MessageContent{Text: s}
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&parts); err != nil {
		return fmt.Errorf("content: want a string, null, or a list of {\"type\":\"text\",\"text\":...} parts (other part types are not supported)")
	}
	var buf bytes.Buffer
	for _, p := range parts {
		if p.Type != "text" {
			return fmt.Errorf("content part of type %q is not supported: only text parts are", p.Type)
		}
		buf.WriteString(p.Text)
	}
	*c = MessageContent{Text: buf.String(), Parts: true}
	return nil
}

// MarshalJSON writes a string, or null.
func (c MessageContent) MarshalJSON() ([]byte, error) {
	if c.Null {
		return []byte("null"), nil
	}
	return json.Marshal(c.Text)
}

// ChatTool is a function the model may call.
type ChatTool struct {
	Type     string       `json:"type"` // "function"
	Function ChatFunction `json:"function"`
}

// ChatFunction describes a callable function.
type ChatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ChatToolCall is a call the model made (or, in a request, one it made
// earlier).
type ChatToolCall struct {
	Index    *int             `json:"index,omitempty"` // streaming deltas only
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"` // "function"
	Function ChatFunctionCall `json:"function"`
}

// ChatFunctionCall is a function name and its arguments as JSON text (which
// a model may get wrong: the agent must check it).
type ChatFunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// ChatResponse is the answer of a non-streaming chat completion.
type ChatResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"` // "chat.completion"
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []ChatChoice `json:"choices"`
	Usage             *ChatUsage   `json:"usage,omitempty"`
	SystemFingerprint string       `json:"system_fingerprint,omitempty"`
}

// ChatChoice is one completion.
type ChatChoice struct {
	Index        int         `json:"index"`
	Message      ChatMessage `json:"message"`
	FinishReason string      `json:"finish_reason"` // stop, length, tool_calls, content_filter
}

// ChatUsage counts tokens.
type ChatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// ChatChunk is one server-sent event of a streaming completion.
type ChatChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"` // "chat.completion.chunk"
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []ChatChunkChoice `json:"choices"`
	Usage   *ChatUsage        `json:"usage,omitempty"`
}

// ChatChunkChoice is one choice's delta.
type ChatChunkChoice struct {
	Index        int       `json:"index"`
	Delta        ChatDelta `json:"delta"`
	FinishReason *string   `json:"finish_reason"`
}

// ChatDelta is what a chunk adds.
type ChatDelta struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	ToolCalls []ChatToolCall `json:"tool_calls,omitempty"`
}

// ModelList is the answer of GET /v1/llm/models.
type ModelList struct {
	Object string      `json:"object"` // "list"
	Data   []ModelInfo `json:"data"`
}

// ModelInfo is one model.
type ModelInfo struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "model"
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// OpenAIError is the body of an LLM endpoint error, in OpenAI's shape (so
// OpenAI clients surface it), with the gateway's code repeated in Code.
type OpenAIError struct {
	Error OpenAIErrorDetail `json:"error"`
}

// OpenAIErrorDetail says what went wrong.
type OpenAIErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}
