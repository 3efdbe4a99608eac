// Package httpworld makes an HTTP API a world: the upstream an agent calls
// with its ordinary HTTP client through the gateway, each request an
// effect of kind http.<api>.<kind> (scenarios.HTTPAPI).
//
// Execute sends the request upstream — the method and path of the kind's
// route, the effect's args as the JSON body (for GET and DELETE, as query
// parameters), the credentials header from the harness's environment — and
// reads the answer: a 2xx is done, its result the upstream's status,
// content type and body (Response gives them back); a 4xx is a failure
// carrying the upstream's answer, permanent but for 408, 425 and 429; a
// 5xx, a timeout or no answer at all is the upstream's fault (an error
// wrapping remote.ErrWorld): the effect is in doubt, and a retry of its key
// is reconciled through the API's lookup (LookupRequest) before anything is
// sent again.
//
// Every answer is recorded in a journal of the world's answers in the
// harness's store (world.OpenJournal), which is the world's ledger: reports
// read it when the upstream is gone, duplicates are judged from it (a
// non-idempotent kind done more than once for one identity under different
// keys), and a replay (mode: replay) answers from a recorded run's.
//
// What this package must not do: know about runs, attempts, tokens or the
// gateway, or ever take a credential from anything but its Config.
package httpworld

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/expr"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// Error codes of the failures the world answers with (besides http_<status>).
const (
	// CodeReplayDiverged: in replay, the recording has no answer for the
	// request; nothing was sent upstream.
	CodeReplayDiverged = world.CodeReplayDiverged
	// CodeUnknownKind: no route of the API has the effect's kind.
	CodeUnknownKind = "unknown_kind"
)

// Config is an HTTP API as the world reaches it.
type Config struct {
	API scenarios.HTTPAPI
	// Credential is the credentials header's value (the prefix included),
	// from the harness's environment; "" sends no credentials header.
	Credential string
	// Client carries the requests upstream. Default: a client of its own
	// whose timeout is API.Timeout.
	Client *http.Client
	// BaseURL replaces API.BaseURL ("" : the API's): where a shadow
	// upstream answers.
	BaseURL string
	// Recording is the journal of the recorded run's answers a replay
	// answers from (API.Mode replay), and RecordingRun names that run.
	Recording    []world.LedgerEntry
	RecordingRun string
	// Blobs keeps answers over InlineBodyBytes out of the journal record
	// (nil: every answer inline).
	Blobs Blobs
}

// World is an HTTP API as a world. It is safe for concurrent use.
type World struct {
	cfg     Config
	base    string
	client  *http.Client
	journal *world.Ledgered
	dups    *world.JournalDups // the journal with its duplicates index
	offline bool               // a journal-only view (OpenJournal)
	mu      sync.Mutex         // one replay answer at a time (its occurrence count)
	replay  *world.Replay      // the recording indexed (API.Mode replay), used under mu
}

var (
	_ world.World         = (*World)(nil)
	_ world.RequestLookup = (*World)(nil)
	_ world.Journaling    = (*World)(nil)
)

// Open opens the world of cfg's API, its journal of answers in store under
// prefix.
func Open(cfg Config, store world.Store, prefix []byte) (*World, error) {
	j, err := world.OpenJournal(cfg.API.Name, store, prefix)
	if err != nil {
		return nil, err
	}
	w := &World{cfg: cfg, base: strings.TrimSuffix(cfg.API.BaseURL, "/"), client: cfg.Client, journal: j,
		dups: world.NewJournalDups(j, identityOf(cfg.API))}
	if cfg.BaseURL != "" {
		w.base = strings.TrimSuffix(cfg.BaseURL, "/")
	}
	if cfg.API.Mode == scenarios.HTTPReplay {
		w.replay = world.NewReplay(cfg.Recording, j)
	}
	if w.client == nil {
		timeout := cfg.API.Timeout
		if timeout <= 0 {
			timeout = scenarios.DefaultHTTPTimeout
		}
		w.client = &http.Client{Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirect is the upstream's answer, for the agent to follow
		}}
	}
	return w, nil
}

// API is the API the world is.
func (w *World) API() scenarios.HTTPAPI { return w.cfg.API }

// Journal implements world.Journaling.
func (w *World) Journal() *world.Ledgered { return w.journal }

// Name implements world.World: the API's name.
func (w *World) Name() string { return w.cfg.API.Name }

// Kinds implements world.World: one kind per route.
func (w *World) Kinds() []world.KindInfo {
	out := make([]world.KindInfo, 0, len(w.cfg.API.Routes))
	for _, r := range w.cfg.API.Routes {
		k := world.KindInfo{
			Name: w.cfg.API.EffectKind(r.Kind), ReadOnly: r.ReadOnly, Idempotent: r.Idempotent || r.ReadOnly, Destructive: r.Destructive,
			Args: "the JSON body", Result: "{status, content_type, body}",
			Doc: fmt.Sprintf("%s %s%s through the gateway", r.Method, w.cfg.API.BaseURL, r.Path),
		}
		if !scenarios.HasBody(r.Method) {
			k.Args = "the query parameters, as an object"
		}
		if r.Identity != nil {
			k.Identity = r.Identity.Source()
		}
		out = append(out, k)
	}
	return out
}

// Result is the result of a request the upstream answered 2xx (and the
// details of a 4xx failure): what the gateway answers the agent with.
type Result struct {
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	// Exactly one of Body (a JSON answer), Text (any other UTF-8 text) and
	// Base64 (bytes) holds the answer's body, whole; none when it had none.
	Body   json.RawMessage `json:"body,omitempty"`
	Text   *string         `json:"text,omitempty"`
	Base64 []byte          `json:"base64,omitempty"`
	// RetryAfter is the upstream's Retry-After header (of a 429, say).
	RetryAfter string `json:"retry_after,omitempty"`
	// BodyBlob is the hash of the body kept as a blob (an answer over
	// InlineBodyBytes; Resolve reads it), of BodySize bytes.
	BodyBlob string `json:"body_blob,omitempty"`
	BodySize int64  `json:"body_size,omitempty"`
	// TooLarge is the size of a 2xx body over the limit, left out (a
	// journal written before max_body: such an answer now fails).
	TooLarge int64 `json:"too_large,omitempty"`
	// Reconciled says the request's answer was lost and its effect found
	// upstream by the API's lookup: Body is then the lookup's answer.
	Reconciled bool `json:"reconciled,omitempty"`
}

// Bytes is the body as the upstream sent it (a JSON body compacted).
func (r Result) Bytes() []byte {
	switch {
	case r.Body != nil:
		return r.Body
	case r.Text != nil:
		return []byte(*r.Text)
	}
	return r.Base64
}

// ResultOf reads a result or failure details of this package's shape.
func ResultOf(raw json.RawMessage) (Result, bool) {
	var r Result
	if len(raw) == 0 || json.Unmarshal(raw, &r) != nil || r.Status == 0 {
		return Result{}, false
	}
	return r, true
}

// UpstreamError is a request whose effect is in doubt: the upstream
// answered 5xx, did not answer in time, or not in HTTP. It wraps
// remote.ErrWorld (the world's fault, not the agent's).
type UpstreamError struct {
	API, Route string
	Status     int // 0: no answer
	Msg        string
}

func (e *UpstreamError) Error() string {
	return fmt.Sprintf("HTTP API %s: %s: %s", e.API, e.Route, e.Msg)
}

// Unwrap makes it a remote.ErrWorld.
func (e *UpstreamError) Unwrap() error { return remote.ErrWorld }

// Execute implements world.World: see the package doc. In replay, the
// request is answered from the recording.
func (w *World) Execute(ctx context.Context, req world.Request) (world.Outcome, error) {
	route, ok := w.cfg.API.Route(req.Kind)
	if !ok {
		return world.Failed(http.StatusBadRequest, CodeUnknownKind, "HTTP API %s has no route of kind %q", w.cfg.API.Name, req.Kind), nil
	}
	var out world.Outcome
	if w.offline {
		return world.Outcome{}, fmt.Errorf("HTTP API %s: %s (key %q): %w", w.cfg.API.Name, route, req.Key, ErrOffline)
	}
	if w.cfg.API.Mode == scenarios.HTTPReplay {
		w.mu.Lock()
		defer w.mu.Unlock()
		var err error
		if out, err = w.answer(ctx, route, req); err != nil {
			return world.Outcome{}, err
		}
	} else {
		res, err := w.send(ctx, route.Method, route.Path, req.Args)
		if err != nil {
			return world.Outcome{}, err
		}
		if out, err = w.outcome(ctx, route, res); err != nil {
			return world.Outcome{}, err
		}
	}
	e := world.LedgerEntry{Key: req.Key, Kind: req.Kind, Args: req.Args, Outcome: out, At: req.Now}
	if err := w.record(ctx, e); err != nil {
		return world.Outcome{}, fmt.Errorf("journal the answer of HTTP API %s to %s (key %q): %w", w.cfg.API.Name, route, req.Key, err)
	}
	if w.replay != nil {
		w.replay.Journaled(e) // w.mu is held
	}
	return out, nil
}

// answer is what the upstream answered.
type answer struct {
	route    string
	status   int
	header   http.Header
	body     []byte
	overSize int64 // a body over max_body: the bytes read of it, past the limit (then body is empty)
}

// send sends one request upstream: args as the JSON body, or as the query
// parameters of a bodiless method. Anything but an answer below 500 is an
// *UpstreamError.
func (w *World) send(ctx context.Context, method, path string, args json.RawMessage) (answer, error) {
	route := method + " " + path
	if w.offline {
		return answer{}, fmt.Errorf("HTTP API %s: %s: %w", w.cfg.API.Name, route, ErrOffline)
	}
	fail := func(status int, format string, a ...any) (answer, error) {
		return answer{}, &UpstreamError{API: w.cfg.API.Name, Route: route, Status: status, Msg: fmt.Sprintf(format, a...)}
	}
	target := w.base + path
	var body io.Reader
	if scenarios.HasBody(method) {
		if len(args) > 0 && string(args) != "null" {
			body = bytes.NewReader(args)
		}
	} else {
		q, err := Query(args)
		if err != nil {
			return answer{}, fmt.Errorf("HTTP API %s: %s: %w", w.cfg.API.Name, route, err)
		}
		if enc := q.Encode(); enc != "" {
			target += "?" + enc
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return answer{}, fmt.Errorf("HTTP API %s: %s: %w", w.cfg.API.Name, route, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c := w.cfg.API.Credentials; c != nil && w.cfg.Credential != "" {
		req.Header.Set(c.Header, w.cfg.Credential)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) && ue.Timeout() {
			return fail(0, "no answer within %s: the request is in doubt", w.client.Timeout)
		}
		return fail(0, "no answer: %v", err)
	}
	defer resp.Body.Close()
	most := MaxBody(w.cfg.API)
	data, err := io.ReadAll(io.LimitReader(resp.Body, most+1))
	if err != nil {
		return fail(resp.StatusCode, "the answer (%s) broke off: %v", resp.Status, err)
	}
	a := answer{route: route, status: resp.StatusCode, header: resp.Header, body: data}
	if int64(len(data)) > most && resp.StatusCode < 500 {
		a.body, a.overSize = nil, int64(len(data))
	}
	if resp.StatusCode >= 500 {
		return fail(resp.StatusCode, "answered %s: %s", resp.Status, snippet(data))
	}
	return a, nil
}

// outcome reads an answer below 500 as the world's answer: one over
// max_body a failure (too_large), a large body kept as a blob.
func (w *World) outcome(ctx context.Context, route scenarios.HTTPRoute, a answer) (world.Outcome, error) {
	if a.overSize > 0 {
		return w.tooLarge(route.String(), a.status, a.overSize), nil
	}
	res := Result{Status: a.status, ContentType: a.header.Get("Content-Type"), RetryAfter: a.header.Get("Retry-After")}
	if err := w.keepBody(ctx, &res, a.body); err != nil {
		return world.Outcome{}, err
	}
	if a.status/100 == 2 {
		b, err := json.Marshal(res)
		if err != nil {
			return world.Failed(http.StatusBadGateway, "bad_answer", "%s: %v", route, err), nil
		}
		return world.Outcome{Status: protocol.StatusDone, Result: b}, nil
	}
	o := world.FailedWith(a.status, fmt.Sprintf("http_%d", a.status), res, "%s answered %d %s: %s", route, a.status, http.StatusText(a.status), snippet(a.body))
	switch a.status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		o.Error.Transient = true // not an answer about these arguments: the same key runs again
	default:
		if a.status < 400 {
			o.Error.Transient = false // a 1xx or 3xx the client did not follow: the upstream's answer
		}
	}
	return o, nil
}

// setBody keeps body as JSON, text or bytes.
func (r *Result) setBody(body []byte) {
	switch {
	case len(body) == 0:
	case json.Valid(body):
		var buf bytes.Buffer
		if json.Compact(&buf, body) == nil {
			r.Body = buf.Bytes()
		}
	case utf8.Valid(body):
		s := string(body)
		r.Text = &s
	default:
		r.Base64 = body
	}
}

// snippet is the start of a body, for a message.
func snippet(b []byte) string {
	const most = 200
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(no body)"
	}
	if !utf8.ValidString(s) {
		return fmt.Sprintf("(%d bytes, not text)", len(b))
	}
	if r := []rune(s); len(r) > most {
		return string(r[:most]) + "…"
	}
	return s
}

// Query is args (a JSON object) as query parameters: a string as it is, a
// number or bool as JSON writes it, a list as the parameter repeated.
func Query(args json.RawMessage) (url.Values, error) {
	q := url.Values{}
	if len(args) == 0 || string(args) == "null" {
		return q, nil
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("query parameters: want a JSON object, got %s", snippet(args))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		values, ok := m[k].([]any)
		if !ok {
			values = []any{m[k]}
		}
		for _, v := range values {
			switch v := v.(type) {
			case string:
				q.Add(k, v)
			case json.Number:
				q.Add(k, v.String())
			case bool:
				q.Add(k, strconv.FormatBool(v))
			case nil:
				q.Add(k, "")
			default:
				return nil, fmt.Errorf("query parameter %s: a nested object has no query form", k)
			}
		}
	}
	return q, nil
}

// answer answers req from the recording: the recorded answer to the same
// occurrence of the same kind and args (the n-th such request of this run
// gets the n-th such answer). One the recording lacks is refused — the
// first divergence — and nothing is sent upstream. w.mu is held.
func (w *World) answer(ctx context.Context, route scenarios.HTTPRoute, req world.Request) (world.Outcome, error) {
	a, err := w.replay.Answer(ctx, req)
	if err != nil {
		return world.Outcome{}, err
	}
	if a.Found {
		return a.Outcome, nil
	}
	return w.diverged(route, a.Occurrence, a.Recorded), nil
}

// Lookup implements world.World: the journal of answers (an answer the
// world gave, or a request reconciled), by key.
func (w *World) Lookup(ctx context.Context, key string) (world.Outcome, bool, error) {
	return w.journal.Lookup(ctx, key)
}

// LookupRequest implements world.RequestLookup: the journal first; then,
// for a request whose answer was lost, the API's lookup upstream — a
// request built from req's args by lookup.body, its answer judged by
// lookup.found. Found, the request is done (its result says it was
// reconciled, with the lookup's answer) and journaled as the world's
// answer; a 404 is not found. An API without a lookup, or whose lookup is
// refused (another 4xx) or cannot be evaluated, cannot say: an error
// wrapping world.ErrCannotLookup. A lookup the upstream fails (5xx, no
// answer) is an *UpstreamError.
func (w *World) LookupRequest(ctx context.Context, req world.Request) (world.Outcome, bool, error) {
	if out, found, err := w.journal.Lookup(ctx, req.Key); err != nil || found {
		return out, found, err
	}
	l := w.cfg.API.Lookup
	if w.offline {
		return world.Outcome{}, false, fmt.Errorf("HTTP API %s: lookup of key %q: %w", w.cfg.API.Name, req.Key, ErrOffline)
	}
	if w.cfg.API.Mode == scenarios.HTTPReplay {
		return world.Outcome{}, false, nil // nothing was sent upstream: a retry is answered from the recording
	}
	if l == nil {
		return world.Outcome{}, false, fmt.Errorf("HTTP API %s declares no lookup, so whether %s (key %q) happened upstream is unknown: %w", w.cfg.API.Name, req.Kind, req.Key, world.ErrCannotLookup)
	}
	var args any
	if err := json.Unmarshal(req.Args, &args); err != nil {
		return world.Outcome{}, false, fmt.Errorf("HTTP API %s: lookup of key %q: the request's args: %v: %w", w.cfg.API.Name, req.Key, err, world.ErrCannotLookup)
	}
	var body json.RawMessage
	if l.Body != nil {
		b, err := l.Body.EvalJSON(ctx, map[string]any{string(expr.Args): args})
		if err != nil {
			return world.Outcome{}, false, fmt.Errorf("HTTP API %s: lookup.body for key %q: %v: %w", w.cfg.API.Name, req.Key, err, world.ErrCannotLookup)
		}
		body = b
	}
	a, err := w.send(ctx, l.Method, l.Path, body)
	if err != nil {
		return world.Outcome{}, false, err
	}
	lookup := l.Method + " " + l.Path
	switch {
	case a.overSize > 0:
		return world.Outcome{}, false, fmt.Errorf("HTTP API %s: the lookup %s for key %q answered %d with a body over its max_body (%d bytes): %w", w.cfg.API.Name, lookup, req.Key, a.status, MaxBody(w.cfg.API), world.ErrCannotLookup)
	case a.status == http.StatusNotFound:
		return world.Outcome{}, false, nil
	case a.status/100 != 2:
		return world.Outcome{}, false, fmt.Errorf("HTTP API %s: the lookup %s for key %q answered %d: %s: %w", w.cfg.API.Name, lookup, req.Key, a.status, snippet(a.body), world.ErrCannotLookup)
	}
	var response any
	if len(a.body) > 0 {
		if err := json.Unmarshal(a.body, &response); err != nil {
			return world.Outcome{}, false, fmt.Errorf("HTTP API %s: the lookup %s for key %q answered no JSON (%s): %w", w.cfg.API.Name, lookup, req.Key, snippet(a.body), world.ErrCannotLookup)
		}
	}
	found, err := l.Found.EvalBool(ctx, map[string]any{string(expr.Args): args, string(expr.Response): response})
	if err != nil {
		return world.Outcome{}, false, fmt.Errorf("HTTP API %s: lookup.found for key %q: %v: %w", w.cfg.API.Name, req.Key, err, world.ErrCannotLookup)
	}
	if !found {
		return world.Outcome{}, false, nil
	}
	res := Result{Status: http.StatusOK, ContentType: "application/json", Reconciled: true}
	if err := w.keepBody(ctx, &res, a.body); err != nil {
		return world.Outcome{}, false, err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return world.Outcome{}, false, err
	}
	out := world.Outcome{Status: protocol.StatusDone, Result: b}
	e := world.LedgerEntry{Key: req.Key, Kind: req.Kind, Args: req.Args, Outcome: out, At: req.Now}
	if err := w.record(ctx, e); err != nil {
		return world.Outcome{}, false, fmt.Errorf("journal the reconciled answer of HTTP API %s to key %q: %w", w.cfg.API.Name, req.Key, err)
	}
	return out, true, nil
}

// Ledger implements world.World: the journal of answers.
func (w *World) Ledger(ctx context.Context) ([]world.LedgerEntry, error) {
	return w.journal.Ledger(ctx)
}

// record journals an answer and tells the duplicates index of it.
func (w *World) record(ctx context.Context, e world.LedgerEntry) error {
	return w.dups.Record(ctx, e)
}

// Duplicates implements world.World: see DuplicatesIn. The journal is
// read once; what this World records after is indexed as it goes. A
// diverged replay's are not known: an error wrapping ErrReplayDiverged.
func (w *World) Duplicates(ctx context.Context) ([]world.Duplicate, error) {
	if err := w.notDiverged(ctx, "no-duplicate-effects on HTTP API "+w.cfg.API.Name); err != nil {
		return nil, err
	}
	return w.dups.Duplicates(ctx)
}

// DuplicatesIn finds, in a journal of api's answers, the requests of a
// kind neither read-only nor idempotent done more than once for one
// identity (the route's identity over the args; the whole canonical args
// without one) under different keys.
func DuplicatesIn(ctx context.Context, api scenarios.HTTPAPI, ledger []world.LedgerEntry) ([]world.Duplicate, error) {
	return world.DuplicatesIn(ctx, identityOf(api), ledger)
}

// identityOf judges the entries of api's journal for duplicates: a route
// neither read-only nor idempotent counts, by its identity.
func identityOf(api scenarios.HTTPAPI) world.IdentityFunc {
	return func(ctx context.Context, e world.LedgerEntry) (string, bool, error) {
		route, ok := api.Route(e.Kind)
		if !ok || route.ReadOnly || route.Idempotent {
			return "", false, nil
		}
		name, err := identity(ctx, route, e.Args)
		if err != nil {
			return "", false, fmt.Errorf("HTTP API %s: identity of ledger entry %d (%s): %w", api.Name, e.Seq, e.Kind, err)
		}
		return name, true, nil
	}
}

// identity is the name of the resource a request acts on.
func identity(ctx context.Context, route scenarios.HTTPRoute, args json.RawMessage) (string, error) {
	if route.Identity == nil {
		return string(world.CompactJSON(args)), nil
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return "", err
	}
	return route.Identity.EvalString(ctx, map[string]any{string(expr.Args): v})
}

// CheckGoal implements world.World: an API judges no goal of its own (a
// scenario's goal: probes it: JudgeGoal).
func (w *World) CheckGoal(context.Context, json.RawMessage) (world.Check, error) {
	return world.Check{}, fmt.Errorf("HTTP API %s: %w (declare goal: {probe, expect} in the scenario)", w.cfg.API.Name, world.ErrNoGoal)
}

// Snapshot implements world.World: the upstream has no snapshot to give,
// so the journal of its answers stands for it — its length and a hash.
func (w *World) Snapshot(ctx context.Context) (json.RawMessage, error) {
	ledger, err := w.journal.Ledger(ctx)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"api": w.cfg.API.Name, "ledger_seq": w.journal.LedgerSeq(), "ledger_sha256": world.LedgerHash(ledger)})
}

// JudgeGoal judges goal-reached by g: its probe sent to w (which must be
// its API's world), its expectation evaluated over the answer and task.
func JudgeGoal(ctx context.Context, w *World, g *scenarios.Goal, task json.RawMessage) (world.Check, error) {
	var t any
	if len(task) > 0 {
		if err := json.Unmarshal(task, &t); err != nil {
			return world.Check{}, fmt.Errorf("goal: the task: %w", err)
		}
	}
	var body json.RawMessage
	if g.Body != nil {
		b, err := g.Body.EvalJSON(ctx, scenarios.GoalVars(t, nil))
		if err != nil {
			return world.Check{}, fmt.Errorf("goal.probe.body: %w", err)
		}
		body = b
	}
	probe := g.Method + " " + g.Path
	status, response, err := w.Probe(ctx, g.Method, g.Path, body)
	if err != nil {
		return world.Check{}, err
	}
	if status/100 != 2 {
		return world.Check{}, fmt.Errorf("goal: the probe %s to HTTP API %s answered %d %s", probe, g.API, status, http.StatusText(status))
	}
	ok, err := g.Expect.EvalBool(ctx, scenarios.GoalVars(t, response))
	if err != nil {
		return world.Check{}, fmt.Errorf("goal.expect: %w", err)
	}
	answer, _ := json.Marshal(response)
	verdict := "holds"
	if !ok {
		verdict = "does not hold"
	}
	return world.Check{OK: ok, Detail: fmt.Sprintf("%s of HTTP API %s answered %s; `%s` %s", probe, g.API, snippet(answer), g.Expect.Source(), verdict)}, nil
}

// RetryAfter reads a Retry-After header's seconds (0: none, or a date).
func RetryAfter(h string) time.Duration {
	if n, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	return 0
}

// ErrOffline is wrapped by a journal-only view's answer to a call only the
// upstream answers (OpenJournal).
var ErrOffline = errors.New("this view of an HTTP API reads only what the harness journaled of its answers")

// OpenJournal is the world of api read from its journal alone, as a report
// reads it when the upstream is gone: its ledger, the outcome of each key,
// its duplicates and snapshot; a call only the upstream answers (a
// request, a lookup upstream, a probe) fails wrapping ErrOffline.
func OpenJournal(api scenarios.HTTPAPI, store world.Store, prefix []byte) (*World, error) {
	w, err := Open(Config{API: api}, store, prefix)
	if err != nil {
		return nil, err
	}
	w.offline = true
	return w, nil
}
