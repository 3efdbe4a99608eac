// Package gateway serves gateway protocol v1 (sandbox/protocol) over HTTP on
// a unix socket: the one mediated boundary between an agent in its sandbox
// and everything outside it.
//
// The gateway owns the protocol only: authentication by bearer token,
// request parsing and limits, error bodies and status codes. What a call
// does (durable checkpoints, effects, the clock, faults) belongs to the
// Backend the harness provides; the gateway must not touch the journal or
// the world itself.
package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// MaxBodyBytes bounds a request body (checkpoint states and effect
// arguments included). Larger bodies get 413 too_large.
const MaxBodyBytes = 8 << 20

// Bounds on the parts of a request that are journaled inline (larger
// checkpoint states go to blobs, up to MaxBodyBytes).
const (
	MaxEffectArgsBytes = 256 << 10
	MaxEventDataBytes  = 64 << 10
)

// SocketName is the gateway socket's file name inside the socket dir.
const SocketName = "gateway.sock"

// Error is a protocol error a Backend returns to choose the status and code
// of the reply. Any other error becomes 500 internal.
type Error struct {
	Status  int
	Code    string
	Message string
	// Param names the offending request field (LLM endpoint, OpenAI-style).
	Param string
	// RetryAfter, when set, is sent as two headers: Retry-After-Ms
	// (milliseconds, which OpenAI's SDKs read first) and Retry-After (whole
	// seconds), each rounded up, so a client that waits what either says
	// waits at least RetryAfterSent(RetryAfter).
	RetryAfter time.Duration
	// Hold, when set, means: answer nothing, hold the connection this long,
	// then reset it (an llm-timeout fault).
	Hold time.Duration
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// RetryAfterSent is the wait the Retry-After headers announce for an
// Error's RetryAfter d: d rounded up to the millisecond.
func RetryAfterSent(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// Errorf builds an *Error.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Caller identifies who made a request: the attempt its token was minted for.
type Caller struct {
	Attempt int
}

// Backend does what the protocol's calls mean. Write calls must check, under
// the backend's own lock, that the caller's attempt is the current one and
// return 409 fenced otherwise.
type Backend interface {
	// Authenticate maps a bearer token to its caller; ok is false for a
	// token this run never minted. It may wait before it answers (the
	// harness holds an attempt's requests until it knows its sandbox).
	Authenticate(token string) (c Caller, ok bool)
	RunInfo(ctx context.Context, c Caller) (protocol.RunInfo, error)
	Checkpoint(ctx context.Context, c Caller) (protocol.Checkpoint, error)
	PutCheckpoint(ctx context.Context, c Caller, req protocol.PutCheckpoint) (protocol.CheckpointAck, error)
	Effect(ctx context.Context, c Caller, req protocol.EffectRequest) (protocol.EffectResult, error)
	Clock(ctx context.Context, c Caller) (protocol.Clock, error)
	Sleep(ctx context.Context, c Caller, req protocol.SleepRequest) (protocol.Clock, error)
	Event(ctx context.Context, c Caller, ev protocol.Event) error
	Done(ctx context.Context, c Caller, d protocol.Done) error
}

// Observer may be implemented by a Backend that wants to know when agent
// requests start and finish (the harness's clock skips ahead only when no
// request is in flight).
type Observer interface {
	RequestStarted()
	RequestFinished()
}

// Holder may be implemented by a Backend that must hold replies back from
// an attempt it is terminating. Before the gateway writes the first byte of
// any reply to c (a result, an error, a stream, or a reset connection), it
// calls HoldReply and waits for it to return. A process fault that signals
// the agent uses it so that the agent never hears the answer to the request
// that triggered the fault, nor to any later one: how far the agent gets
// then depends on the fault's point, not on how soon the signal lands.
type Holder interface {
	HoldReply(ctx context.Context, c Caller)
}

// Server is the gateway's HTTP server.
type Server struct {
	backend Backend
	log     *slog.Logger
	http    *http.Server

	// The MCP endpoint, made on first use (mcpfront.go).
	mcpOnce sync.Once
	mcp     *mcpFront
}

// New returns a gateway serving backend. A nil logger discards.
func New(backend Backend, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{backend: backend, log: log}
	s.http = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return s
}

// Serve serves on l until Shutdown; it returns nil after a clean shutdown.
func (s *Server) Serve(l net.Listener) error {
	err := s.http.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting, waits for in-flight requests until ctx ends,
// then closes the remaining connections.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeMCP() // its streams would hold the shutdown until ctx ends
	err := s.http.Shutdown(ctx)
	if err != nil {
		_ = s.http.Close()
	}
	return err
}

// Close closes the listener and every connection at once.
func (s *Server) Close() error {
	s.closeMCP()
	return s.http.Close()
}

// Handler returns the protocol's HTTP handler (also used directly in tests).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	allowed := map[string][]string{} // path -> methods, for 405 replies
	handle := func(method, path string, h handler) {
		mux.HandleFunc(method+" "+path, s.auth(h))
		allowed[path] = append(allowed[path], method)
	}
	handle("GET", "/v1/run", s.run)
	handle("GET", "/v1/checkpoint", s.getCheckpoint)
	handle("PUT", "/v1/checkpoint", s.putCheckpoint)
	handle("POST", "/v1/effects", s.effect)
	handle("GET", "/v1/clock", s.clock)
	handle("POST", "/v1/sleep", s.sleep)
	handle("POST", "/v1/events", s.event)
	handle("POST", "/v1/done", s.done)
	handle("POST", "/v1/llm/chat/completions", s.llmChat)
	handle("GET", "/v1/llm/models", s.llmModels)
	// Any method: the route is the HTTP API's, authenticated by the token
	// in the path.
	mux.HandleFunc(HTTPPathPrefix+"{api}/{token}/{path...}", s.httpPassThrough)
	// MCP over streamable HTTP, authenticated by the token in the path.
	mux.HandleFunc(MCPPathPrefix+"{token}", s.mcpEndpoint)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if methods, ok := allowed[r.URL.Path]; ok {
			w.Header().Set("Allow", strings.Join(methods, ", "))
			writeError(w, Errorf(http.StatusMethodNotAllowed, protocol.CodeMethod, "%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(methods, ", ")))
			return
		}
		writeError(w, Errorf(http.StatusNotFound, protocol.CodeNotFound, "no endpoint %s %s in gateway protocol v1", r.Method, r.URL.Path))
	})
	obs, ok := s.backend.(Observer)
	if !ok {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, MCPPathPrefix) {
			mux.ServeHTTP(w, r) // observed by the endpoint itself: its streams are no requests in flight
			return
		}
		obs.RequestStarted()
		defer obs.RequestFinished()
		mux.ServeHTTP(w, r)
	})
}

type handler func(w http.ResponseWriter, r *http.Request, c Caller)

func (s *Server) auth(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			writeError(w, Errorf(http.StatusUnauthorized, protocol.CodeUnauthorized, "missing Authorization: Bearer <token> header (the token is in $%s)", protocol.EnvToken))
			return
		}
		c, ok := s.backend.Authenticate(token)
		if !ok {
			writeError(w, Errorf(http.StatusUnauthorized, protocol.CodeUnauthorized, "unknown token: it was not minted for this run"))
			return
		}
		if hb, ok := s.backend.(Holder); ok {
			w = &heldWriter{ResponseWriter: w, hold: func() { hb.HoldReply(r.Context(), c) }}
		}
		h(w, r, c)
	}
}

// pathCaller authenticates the token in r's path ({token}): ok false, the
// refusal was written with write, saying what to do (hint). The writer
// returned holds its reply while the backend holds c's (Holder).
func (s *Server) pathCaller(w http.ResponseWriter, r *http.Request, write func(http.ResponseWriter, *Error), hint string) (Caller, http.ResponseWriter, bool) {
	c, ok := s.backend.Authenticate(r.PathValue("token"))
	if !ok {
		write(w, Errorf(http.StatusUnauthorized, protocol.CodeUnauthorized, "unknown token in the path: it was not minted for this run's attempt (%s)", hint))
		return c, w, false
	}
	if hb, ok := s.backend.(Holder); ok {
		w = &heldWriter{ResponseWriter: w, hold: func() { hb.HoldReply(r.Context(), c) }}
	}
	return c, w, true
}

// readBody reads r's body, at most limit bytes: a larger body is a 413
// too_large (its message ends with why, when given), a body that cannot be
// read a 400.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, why string) ([]byte, *Error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, Errorf(http.StatusRequestEntityTooLarge, protocol.CodeTooLarge, "request body over %d bytes%s", limit, why)
		}
		return nil, Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "read request body: %v", err)
	}
	return body, nil
}

// decode reads a JSON body strictly: known fields only, one value, bounded size.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, e := readBody(w, r, MaxBodyBytes, "")
	if e != nil {
		writeError(w, e)
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "%s %s: body is not valid JSON for this call: %v", r.Method, r.URL.Path, err))
		return false
	}
	if dec.More() {
		writeError(w, Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "%s %s: trailing data after the JSON body", r.Method, r.URL.Path))
		return false
	}
	return true
}

func (s *Server) run(w http.ResponseWriter, r *http.Request, c Caller) {
	info, err := s.backend.RunInfo(r.Context(), c)
	s.reply(w, r, http.StatusOK, info, err)
}

func (s *Server) getCheckpoint(w http.ResponseWriter, r *http.Request, c Caller) {
	cp, err := s.backend.Checkpoint(r.Context(), c)
	if err == nil && len(cp.State) == 0 {
		cp.State = json.RawMessage("null")
	}
	s.reply(w, r, http.StatusOK, cp, err)
}

func (s *Server) putCheckpoint(w http.ResponseWriter, r *http.Request, c Caller) {
	var req protocol.PutCheckpoint
	if !decode(w, r, &req) {
		return
	}
	if req.Step < 0 {
		writeError(w, Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "step %d: want >= 0", req.Step))
		return
	}
	if req.ExpectSeq != nil && *req.ExpectSeq < 0 {
		writeError(w, Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "expect_seq %d: want >= 0", *req.ExpectSeq))
		return
	}
	if len(req.State) == 0 {
		req.State = json.RawMessage("null")
	}
	ack, err := s.backend.PutCheckpoint(r.Context(), c, req)
	s.reply(w, r, http.StatusOK, ack, err)
}

func (s *Server) effect(w http.ResponseWriter, r *http.Request, c Caller) {
	var req protocol.EffectRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Kind == "" {
		writeError(w, Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "effect: kind is required"))
		return
	}
	if len(req.Key) > 512 {
		writeError(w, Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "effect: key is %d bytes; at most 512", len(req.Key)))
		return
	}
	if len(req.Args) > MaxEffectArgsBytes {
		writeError(w, Errorf(http.StatusRequestEntityTooLarge, protocol.CodeTooLarge, "effect args are %d bytes; at most %d", len(req.Args), MaxEffectArgsBytes))
		return
	}
	if len(req.Args) == 0 {
		req.Args = json.RawMessage("{}")
	}
	res, err := s.backend.Effect(r.Context(), c, req)
	s.reply(w, r, http.StatusOK, res, err)
}

func (s *Server) clock(w http.ResponseWriter, r *http.Request, c Caller) {
	now, err := s.backend.Clock(r.Context(), c)
	s.reply(w, r, http.StatusOK, now, err)
}

func (s *Server) sleep(w http.ResponseWriter, r *http.Request, c Caller) {
	var req protocol.SleepRequest
	if !decode(w, r, &req) {
		return
	}
	if (req.Until == nil) == (req.Seconds == nil) {
		writeError(w, Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "sleep: give exactly one of until (RFC 3339) or seconds"))
		return
	}
	if req.Seconds != nil && (*req.Seconds < 0 || *req.Seconds > 10*365*24*3600) {
		writeError(w, Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "sleep: seconds %v out of range [0, 10 years]", *req.Seconds))
		return
	}
	now, err := s.backend.Sleep(r.Context(), c, req)
	s.reply(w, r, http.StatusOK, now, err)
}

func (s *Server) event(w http.ResponseWriter, r *http.Request, c Caller) {
	var ev protocol.Event
	if !decode(w, r, &ev) {
		return
	}
	if ev.Type == "" || len(ev.Type) > 64 {
		writeError(w, Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "event: type is required (at most 64 bytes)"))
		return
	}
	if len(ev.Data)+len(ev.Message) > MaxEventDataBytes {
		writeError(w, Errorf(http.StatusRequestEntityTooLarge, protocol.CodeTooLarge, "event message and data are %d bytes; at most %d", len(ev.Data)+len(ev.Message), MaxEventDataBytes))
		return
	}
	err := s.backend.Event(r.Context(), c, ev)
	s.reply(w, r, http.StatusAccepted, struct{}{}, err)
}

func (s *Server) done(w http.ResponseWriter, r *http.Request, c Caller) {
	var d protocol.Done
	if !decode(w, r, &d) {
		return
	}
	if d.Outcome != protocol.OutcomeSuccess && d.Outcome != protocol.OutcomeFailure {
		writeError(w, Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "done: outcome %q: want %q or %q", d.Outcome, protocol.OutcomeSuccess, protocol.OutcomeFailure))
		return
	}
	if len(d.Claims)+len(d.Summary) > MaxEventDataBytes {
		writeError(w, Errorf(http.StatusRequestEntityTooLarge, protocol.CodeTooLarge, "done summary and claims are %d bytes; at most %d", len(d.Claims)+len(d.Summary), MaxEventDataBytes))
		return
	}
	err := s.backend.Done(r.Context(), c, d)
	s.reply(w, r, http.StatusOK, struct{}{}, err)
}

func (s *Server) reply(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		var pe *Error
		if !errors.As(err, &pe) {
			s.log.Error("gateway call failed", "method", r.Method, "path", r.URL.Path, "err", err)
			pe = Errorf(http.StatusInternalServerError, protocol.CodeInternal, "%v", err)
		}
		writeError(w, pe)
		return
	}
	writeJSON(w, status, v)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, Errorf(http.StatusInternalServerError, protocol.CodeInternal, "encode reply: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, e *Error) {
	b, _ := json.Marshal(protocol.ErrorBody{Error: protocol.ErrorDetail{Code: e.Code, Message: e.Message}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_, _ = w.Write(append(b, '\n'))
}
