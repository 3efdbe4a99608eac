package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/overnight-dev/overnight/harness/llm"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// LLMBackend is implemented by a Backend that serves the OpenAI-compatible
// LLM endpoint. A Backend without it answers 501.
type LLMBackend interface {
	LLMModels(ctx context.Context, c Caller) (protocol.ModelList, error)
	// LLMChat answers one chat completion, whole: the gateway streams it
	// to the agent when the request asks for a stream.
	LLMChat(ctx context.Context, c Caller, req protocol.ChatRequest) (protocol.ChatResponse, error)
}

// LLMRefusals is implemented by an LLMBackend that accounts for the chat
// requests the gateway refuses itself, before LLMChat (a body too large or
// unreadable, a field it does not carry, an invalid request). LLMRefused
// returns the error to answer: e (or nil), or the backend's own (the
// caller's attempt fenced, the run's budget spent).
type LLMRefusals interface {
	LLMRefused(ctx context.Context, c Caller, e *Error) error
}

// MaxHold bounds how long a held LLM call (an llm-timeout fault) is kept
// open before its connection is reset.
const MaxHold = 2 * time.Second

func (s *Server) llmBackend(w http.ResponseWriter) (LLMBackend, bool) {
	b, ok := s.backend.(LLMBackend)
	if !ok {
		writeLLMError(w, Errorf(http.StatusNotImplemented, protocol.CodeNotImplemented, "this gateway serves no LLM"))
	}
	return b, ok
}

func (s *Server) llmModels(w http.ResponseWriter, r *http.Request, c Caller) {
	b, ok := s.llmBackend(w)
	if !ok {
		return
	}
	list, err := b.LLMModels(r.Context(), c)
	if err != nil {
		s.llmFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) llmChat(w http.ResponseWriter, r *http.Request, c Caller) {
	b, ok := s.llmBackend(w)
	if !ok {
		return
	}
	refuse := func(e *Error) {
		if rb, ok := b.(LLMRefusals); ok {
			if err := rb.LLMRefused(r.Context(), c, e); err != nil {
				s.llmFail(w, r, err)
				return
			}
		}
		writeLLMError(w, e)
	}
	body, e := readBody(w, r, MaxBodyBytes, "")
	if e != nil {
		refuse(e)
		return
	}
	req, err := llm.ParseRequest(body)
	if err != nil {
		var pe *llm.ParamError
		if errors.As(err, &pe) {
			e := Errorf(http.StatusBadRequest, protocol.CodeUnsupportedParameter, "%s", pe.Error())
			e.Param = pe.Param
			refuse(e)
			return
		}
		refuse(Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "chat completion request: %v", err))
		return
	}
	resp, err := b.LLMChat(r.Context(), c, req)
	if err != nil {
		s.llmFail(w, r, err)
		return
	}
	if req.Stream {
		includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		if err := llm.WriteStream(w, resp, includeUsage); err != nil {
			s.log.Debug("stream LLM answer", "err", err)
		}
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// llmFail answers an LLM error in OpenAI's shape, or holds then resets the
// connection for a timeout.
func (s *Server) llmFail(w http.ResponseWriter, r *http.Request, err error) {
	var pe *Error
	if !errors.As(err, &pe) {
		s.log.Error("LLM call failed", "err", err)
		pe = Errorf(http.StatusInternalServerError, protocol.CodeInternal, "%v", err)
	}
	if pe.Hold > 0 {
		select {
		case <-r.Context().Done():
		case <-time.After(min(pe.Hold, MaxHold)):
		}
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, herr := hj.Hijack(); herr == nil {
				_ = conn.Close()
				return
			}
		}
		pe = Errorf(http.StatusGatewayTimeout, "timeout", "the model did not answer in time")
	}
	writeLLMError(w, pe)
}

// writeLLMError writes an error in OpenAI's shape — {"error": {message,
// type, param, code}} — which is also the protocol's {"error": {code,
// message}}.
func writeLLMError(w http.ResponseWriter, e *Error) {
	typ := "invalid_request_error"
	switch {
	case e.Status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case e.Status == http.StatusUnauthorized:
		typ = "authentication_error"
	case e.Status >= 500:
		typ = "server_error"
	}
	body := protocol.OpenAIError{Error: protocol.OpenAIErrorDetail{Message: e.Message, Type: typ, Code: e.Code}}
	if e.Param != "" {
		body.Error.Param = &e.Param
	}
	b, err := json.Marshal(body)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"error":{"message":%q,"type":"server_error","code":"internal"}}`, err.Error()))
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case e.Status == http.StatusTooManyRequests && e.Code == protocol.CodeRateLimited,
		e.Status >= 500, e.Status == http.StatusRequestTimeout:
		// worth retrying: clients decide
	default:
		// OpenAI's SDKs retry 409 and 429 unless told not to: a budget spent,
		// a diverged replay, a fenced attempt or a refused field does not
		// change by asking again (and each retry would take a new call).
		w.Header().Set("x-should-retry", "false")
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After-Ms", strconv.FormatInt(RetryAfterSent(e.RetryAfter).Milliseconds(), 10))
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(append(b, '\n'))
}
