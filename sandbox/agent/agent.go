// Package agent is the Go SDK an agent imports to talk to the overnight
// gateway from inside its sandbox: the inside half of the one mediated
// boundary. It wraps gateway protocol v1 (plain HTTP+JSON over the unix
// socket in $OVERNIGHT_SOCKET, or http://127.0.0.1:7070 through the
// sandbox's init relay) with three conveniences:
//
//   - Resume and Checkpoint track the last checkpoint's seq, so every
//     checkpoint after a Resume is written with expect_seq (a concurrent
//     writer is refused, not overwritten) and a retry of it is safe;
//   - Effect derives a stable idempotency key from the checkpointed step
//     ("step-3/0", then "step-3/1" for the next effect of the same step),
//     so an effect repeated after a crash returns its recorded result
//     instead of acting twice;
//   - calls are retried across transport failures (a restarted harness, a
//     dropped link) for a bounded time, but only when a retry is safe.
//
// The SDK is a convenience, not the only door: any HTTP client works.
package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// Sentinel errors callers branch on; *APIError matches them with errors.Is.
var (
	// ErrFenced: a newer attempt owns the run; this process must stop.
	ErrFenced = errors.New("fenced: a newer attempt owns this run")
	// ErrConflict: the checkpoint moved since this agent last read it.
	ErrConflict = errors.New("checkpoint conflict")
	// ErrKeyReused: the same idempotency key was sent with other arguments.
	ErrKeyReused = errors.New("idempotency key reused with different arguments")
	// ErrUnavailable: the gateway could not be reached within RetryFor.
	ErrUnavailable = errors.New("gateway unavailable")
)

// APIError is a non-2xx reply of the gateway.
type APIError struct {
	Status  int
	Code    string
	Message string
	Path    string
	// Param names the refused field of an LLM request, if any.
	Param string
	// RetryAfter is the reply's Retry-After header, if any.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	return fmt.Sprintf("gateway %s: %d %s: %s", e.Path, e.Status, e.Code, e.Message)
}

// Is maps protocol codes to the package's sentinels.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrFenced:
		return e.Code == protocol.CodeFenced
	case ErrConflict:
		return e.Code == protocol.CodeConflict
	case ErrKeyReused:
		return e.Code == protocol.CodeKeyReused
	}
	return false
}

// Options configure a Client. Zero values take the documented defaults.
type Options struct {
	// Socket is the gateway's unix socket path. Default $OVERNIGHT_SOCKET.
	Socket string
	// URL is used when Socket is empty. Default $OVERNIGHT_URL.
	URL string
	// Token is the attempt's bearer token. Default $OVERNIGHT_TOKEN.
	Token string
	// RetryFor bounds how long a call keeps retrying transport failures.
	// Default 2 minutes.
	RetryFor time.Duration
	// HTTPClient overrides the transport entirely (tests).
	HTTPClient *http.Client
}

// Client talks to the gateway. It is safe for concurrent use, but the
// step-derived keys of Effect assume one logical thread of work.
type Client struct {
	http     *http.Client
	base     string
	token    string
	retryFor time.Duration

	mu      sync.Mutex
	seq     int64 // seq of the last checkpoint read or written
	step    int   // step of that checkpoint
	effectN int   // effects sent since that checkpoint
	known   bool  // seq/step come from the gateway (Resume or Checkpoint)
}

// FromEnv builds a Client from the environment the harness sets.
func FromEnv() (*Client, error) { return New(Options{}) }

// New builds a Client.
func New(opts Options) (*Client, error) {
	if opts.Socket == "" && opts.URL == "" {
		opts.Socket = os.Getenv(protocol.EnvSocket)
		opts.URL = os.Getenv(protocol.EnvURL)
	}
	if opts.Token == "" {
		opts.Token = os.Getenv(protocol.EnvToken)
	}
	if opts.RetryFor == 0 {
		opts.RetryFor = 2 * time.Minute
	}
	if opts.Token == "" {
		return nil, fmt.Errorf("agent: no gateway token: $%s is empty (is this running inside an overnight sandbox?)", protocol.EnvToken)
	}
	c := &Client{token: opts.Token, retryFor: opts.RetryFor, http: opts.HTTPClient}
	switch {
	case opts.Socket != "":
		c.base = "http://gateway"
		if c.http == nil {
			c.http = &http.Client{Transport: &socketTransport{path: opts.Socket, maxIdle: 4, idleTimeout: 30 * time.Second}}
		}
	case opts.URL != "":
		c.base = strings.TrimRight(opts.URL, "/")
		if c.http == nil {
			c.http = &http.Client{Transport: &http.Transport{MaxIdleConns: 4, IdleConnTimeout: 30 * time.Second}}
		}
	default:
		return nil, fmt.Errorf("agent: no gateway address: set $%s or $%s", protocol.EnvSocket, protocol.EnvURL)
	}
	return c, nil
}

// retryMode says when a failed request may be sent again.
type retryMode int

const (
	retrySafe     retryMode = iota // idempotent: retry any transport failure
	retryDialOnly                  // not idempotent: retry only if the request never left
)

// do sends one call and decodes the reply into out (if non-nil).
func (c *Client) do(ctx context.Context, method, path string, body, out any, mode retryMode) error {
	var payload []byte
	if b, ok := body.(encodedBody); ok {
		payload = b
	} else if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("agent: encode %s %s: %w", method, path, err)
		}
		payload = b
	}
	deadline := time.Now().Add(c.retryFor)
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		retry, err := c.once(ctx, method, path, payload, out, mode)
		if err == nil || !retry {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().Add(backoff).After(deadline) {
			return fmt.Errorf("agent: %s %s: %w after %d tries over %s: %v", method, path, ErrUnavailable, attempt, c.retryFor, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Second)
	}
}

func (c *Client) once(ctx context.Context, method, path string, payload []byte, out any, mode retryMode) (retry bool, err error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return false, fmt.Errorf("agent: build %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		var op *net.OpError
		dialFailed := errors.As(err, &op) && op.Op == "dial"
		return mode == retrySafe || dialFailed, fmt.Errorf("agent: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return mode == retrySafe, fmt.Errorf("agent: read reply of %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb protocol.ErrorBody
		_ = json.Unmarshal(data, &eb)
		apiErr := &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message, Param: eb.Error.Param, Path: path}
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			apiErr.RetryAfter = time.Duration(secs) * time.Second
		}
		if apiErr.Code == "" {
			apiErr.Message = strings.TrimSpace(string(data))
		}
		return false, apiErr
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return false, fmt.Errorf("agent: decode reply of %s %s: %w", method, path, err)
		}
	}
	return false, nil
}

// Run returns who this agent is, which attempt, its task and lessons.
func (c *Client) Run(ctx context.Context) (protocol.RunInfo, error) {
	var info protocol.RunInfo
	err := c.do(ctx, http.MethodGet, "/v1/run", nil, &info, retrySafe)
	return info, err
}

// Resume returns the last durable checkpoint (seq 0 and null state before
// the first) and makes it the base of later Checkpoint and Effect calls.
func (c *Client) Resume(ctx context.Context) (protocol.Checkpoint, error) {
	var cp protocol.Checkpoint
	if err := c.do(ctx, http.MethodGet, "/v1/checkpoint", nil, &cp, retrySafe); err != nil {
		return cp, err
	}
	c.mu.Lock()
	c.seq, c.step, c.effectN, c.known = cp.Seq, cp.Step, 0, true
	c.mu.Unlock()
	return cp, nil
}

// Checkpoint durably records step and state and returns the new seq.
//
// After Resume or an earlier Checkpoint, the write carries expect_seq: the
// seq this client last read or wrote. The gateway refuses it with 409
// conflict (ErrConflict) when another writer has checkpointed since — a
// second process or goroutine holding the same attempt's token; an older
// attempt is fenced (ErrFenced) whatever it sends. On ErrConflict, Resume
// and go on from what the checkpoint says. Before any Resume or Checkpoint
// the client knows no seq and sends none, and the gateway accepts a
// checkpoint without expect_seq unconditionally.
//
// Retrying it after a lost reply is safe: the gateway answers a repeat of
// the last committed write (same step, state and expect_seq, same attempt)
// with its seq.
func (c *Client) Checkpoint(ctx context.Context, step int, state any) (int64, error) {
	return c.CheckpointClaims(ctx, step, state, nil)
}

// CheckpointClaims is Checkpoint with claims: what the agent says about
// the world as it stands now, such as
// map[string]any{"exists": map[string]string{"kind": "database", "name": "prod-db"}}
// (an object whose every member is one claim, or a list of such objects;
// nil: none). The harness judges them against the world and journals the
// judgement with the checkpoint: a checkpoint the world contradicts is
// poisoned, and a scenario with rollback: consistent never resumes an
// attempt from it (docs/state.md).
func (c *Client) CheckpointClaims(ctx context.Context, step int, state, claims any) (int64, error) {
	c.mu.Lock()
	var expect *int64
	if c.known {
		seq := c.seq
		expect = &seq
	}
	c.mu.Unlock()
	body, err := checkpointBody(step, state, claims, expect)
	if err != nil {
		return 0, err
	}
	var ack protocol.CheckpointAck
	if err := c.do(ctx, http.MethodPut, "/v1/checkpoint", body, &ack, retrySafe); err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.seq, c.step, c.effectN, c.known = ack.Seq, step, 0, true
	c.mu.Unlock()
	return ack.Seq, nil
}

// encodedBody is a request body already encoded as JSON: do sends it as
// it is.
type encodedBody []byte

// checkpointBody encodes the body of PUT /v1/checkpoint — the JSON of
// protocol.PutCheckpoint — in one buffer, encoding state and claims once:
// as json.RawMessage fields of a protocol.PutCheckpoint, json.Marshal would
// scan them again.
func checkpointBody(step int, state, claims any, expect *int64) (encodedBody, error) {
	var buf bytes.Buffer
	buf.Grow(256)
	enc := json.NewEncoder(&buf)
	buf.WriteString(`{"step":`)
	buf.Write(strconv.AppendInt(buf.AvailableBuffer(), int64(step), 10))
	buf.WriteString(`,"state":`)
	if err := enc.Encode(state); err != nil {
		return nil, fmt.Errorf("agent: encode checkpoint state of step %d: %w", step, err)
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	if expect != nil {
		buf.WriteString(`,"expect_seq":`)
		buf.Write(strconv.AppendInt(buf.AvailableBuffer(), *expect, 10))
	}
	if claims != nil {
		buf.WriteString(`,"claims":`)
		if err := enc.Encode(claims); err != nil {
			return nil, fmt.Errorf("agent: encode checkpoint claims of step %d: %w", step, err)
		}
		buf.Truncate(buf.Len() - 1)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// Step returns the step of the last checkpoint this client read or wrote.
func (c *Client) Step() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.step
}

// NextKey returns the key Effect will use next: "step-<S+1>/<n>", where S
// is the last checkpointed step and n counts the effects sent since.
func (c *Client) NextKey() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("step-%d/%d", c.step+1, c.effectN)
}

// Effect asks the world to act, under a key derived from the checkpointed
// step (see NextKey). A failed effect is returned as a result with status
// "failed", not as an error.
func (c *Client) Effect(ctx context.Context, kind string, args any) (protocol.EffectResult, error) {
	c.mu.Lock()
	key := fmt.Sprintf("step-%d/%d", c.step+1, c.effectN)
	c.effectN++
	c.mu.Unlock()
	return c.EffectWithKey(ctx, key, kind, args)
}

// EffectWithKey asks the world to act under the caller's idempotency key.
// A repeat of the key with the same arguments returns the recorded result.
func (c *Client) EffectWithKey(ctx context.Context, key, kind string, args any) (protocol.EffectResult, error) {
	return c.effect(ctx, key, kind, args, retrySafe)
}

// EffectUnkeyed asks the world to act with no idempotency key: nothing
// protects it from running twice, and the harness reports it as unkeyed.
// It is retried only when the request certainly never left.
func (c *Client) EffectUnkeyed(ctx context.Context, kind string, args any) (protocol.EffectResult, error) {
	return c.effect(ctx, "", kind, args, retryDialOnly)
}

func (c *Client) effect(ctx context.Context, key, kind string, args any, mode retryMode) (protocol.EffectResult, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return protocol.EffectResult{}, fmt.Errorf("agent: encode args of %s: %w", kind, err)
	}
	var res protocol.EffectResult
	err = c.do(ctx, http.MethodPost, "/v1/effects", protocol.EffectRequest{Key: key, Kind: kind, Args: raw}, &res, mode)
	return res, err
}

// Now returns the run's virtual time.
func (c *Client) Now(ctx context.Context) (time.Time, error) {
	var clk protocol.Clock
	err := c.do(ctx, http.MethodGet, "/v1/clock", nil, &clk, retrySafe)
	return clk.Now, err
}

// SleepUntil waits until the run's virtual time reaches t. A sleep a
// fault cut short (a pause, an outage) is slept again, so it returns only
// once t is reached — or with the error that ends it (the run's horizon,
// a fenced attempt).
func (c *Client) SleepUntil(ctx context.Context, t time.Time) (time.Time, error) {
	for {
		var clk protocol.Clock
		err := c.do(ctx, http.MethodPost, "/v1/sleep", protocol.SleepRequest{Until: &t}, &clk, retrySafe)
		var apiErr *APIError
		switch {
		case errors.As(err, &apiErr) && apiErr.Code == protocol.CodeInterrupted:
			if ctx.Err() != nil {
				return clk.Now, ctx.Err()
			}
			continue
		case err != nil:
			return clk.Now, err
		case !clk.Now.Before(t):
			return clk.Now, nil
		}
	}
}

// Sleep waits d of virtual time. It reads the clock and sleeps until
// now+d, so a retry does not sleep twice.
func (c *Client) Sleep(ctx context.Context, d time.Duration) (time.Time, error) {
	now, err := c.Now(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return c.SleepUntil(ctx, now.Add(d))
}

// Event records a trajectory event (progress, a thought, an error).
func (c *Client) Event(ctx context.Context, typ, message string, data any) error {
	var raw json.RawMessage
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			return fmt.Errorf("agent: encode event %s: %w", typ, err)
		}
		raw = b
	}
	return c.do(ctx, http.MethodPost, "/v1/events", protocol.Event{Type: typ, Message: message, Data: raw}, nil, retrySafe)
}

// Done records the agent's own claim of success or failure. The harness
// judges the claim against the world.
func (c *Client) Done(ctx context.Context, outcome, summary string, claims any) error {
	var raw json.RawMessage
	if claims != nil {
		b, err := json.Marshal(claims)
		if err != nil {
			return fmt.Errorf("agent: encode claims: %w", err)
		}
		raw = b
	}
	return c.do(ctx, http.MethodPost, "/v1/done", protocol.Done{Outcome: outcome, Summary: summary, Claims: raw}, nil, retrySafe)
}

// Attempt returns $OVERNIGHT_ATTEMPT, or 0 when unset.
func Attempt() int {
	n, _ := strconv.Atoi(os.Getenv(protocol.EnvAttempt))
	return n
}
