package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// Defaults of Config.
const (
	DefaultTimeout        = 30 * time.Second
	DefaultMaxAnswerBytes = 256 << 20
)

// Config says how a Client reaches its world. The zero value is usable.
type Config struct {
	// HTTPClient sends the calls. Default: a client of the package's own
	// with no overall timeout (Timeout bounds each call).
	HTTPClient *http.Client
	// Timeout bounds each call, from sending the request to reading the
	// whole answer. Default DefaultTimeout (30 s).
	Timeout time.Duration
	// Label names the world in errors. Default `world "<name>" (<base
	// URL>)`, the name being the one describe answers.
	Label string
	// Scope, when set, makes the client one run's view of a world many
	// runs share: every key it sends is "<Scope>/<key>"; Ledger and
	// Duplicates keep only the entries (and duplicates' keys) that carry
	// the scope, with the scope stripped and the entries renumbered seq
	// 1..n in order; world events (key "", kind "world.*") are kept, since
	// they happen to every run. Lookup adds the scope too. Snapshot and
	// CheckGoal still see the whole world. Default: none.
	Scope string
	// MaxAnswerBytes bounds the body of an answer. Default
	// DefaultMaxAnswerBytes (256 MiB).
	MaxAnswerBytes int64
}

// Client is a world over the world protocol: a world.World, and a
// world.Versioned, whose calls go to a world served at a base URL. It is
// safe for concurrent use. Dial returns the client of the world itself
// (instance ""); Instance the client of one of its instances.
type Client struct {
	conn     *conn
	instance string
	scope    string
}

var (
	_ world.World     = (*Client)(nil)
	_ world.Versioned = (*Client)(nil)
)

// conn is what every Client of one Dial shares.
type conn struct {
	base      string
	http      *http.Client
	timeout   time.Duration
	maxAnswer int64
	label     string
	desc      Description

	mu       sync.Mutex
	versions map[string]string // instance -> the API version last seen
}

// Dial asks the world at baseURL (e.g. "http://127.0.0.1:8080") to
// describe itself, checks it speaks Protocol, and returns the client of
// the world itself, instance "".
func Dial(ctx context.Context, baseURL string, cfg Config) (*Client, error) {
	base := strings.TrimRight(baseURL, "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("world URL %q: want http://HOST:PORT or https://HOST:PORT", baseURL)
	}
	c := &conn{base: base, http: cfg.HTTPClient, timeout: cfg.Timeout, maxAnswer: cfg.MaxAnswerBytes, label: cfg.Label, versions: map[string]string{}}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxAnswer <= 0 {
		c.maxAnswer = DefaultMaxAnswerBytes
	}
	if c.label == "" {
		c.label = "world at " + base
	}
	cl := &Client{conn: c, scope: cfg.Scope}
	var d Description
	body, err := cl.do(ctx, PathDescribe, "describe", struct{}{}, &d, nil)
	if err != nil {
		return nil, err
	}
	if d.Protocol != Protocol {
		return nil, c.wrong("describe", fmt.Sprintf("answered protocol %q; this client speaks %s (is %s a world?)", d.Protocol, Protocol, base), body)
	}
	if problem := checkDescription(d); problem != "" {
		return nil, c.wrong("describe", problem, body)
	}
	c.desc = d
	if cfg.Label == "" {
		c.label = fmt.Sprintf("world %q (%s)", d.Name, base)
	}
	c.versions[""] = d.APIVersion
	if d.APIVersion == "" {
		c.versions[""] = d.Versions[0].Name
	}
	return cl, nil
}

// checkDescription says what is wrong with a describe answer ("": nothing).
func checkDescription(d Description) string {
	if d.Name == "" {
		return "answered no name"
	}
	if len(d.Versions) == 0 {
		return "answered no versions (a world with one API version gives one)"
	}
	var names []string
	for i, v := range d.Versions {
		if v.Name == "" {
			return fmt.Sprintf("answered versions[%d] without a name", i)
		}
		if slices.Contains(names, v.Name) {
			return fmt.Sprintf("answered version %q twice", v.Name)
		}
		names = append(names, v.Name)
	}
	if d.APIVersion != "" && !slices.Contains(names, d.APIVersion) {
		return fmt.Sprintf("answered api_version %q, not among its versions (%s)", d.APIVersion, strings.Join(names, ", "))
	}
	return ""
}

// Description is what the world answered to describe when dialled.
func (cl *Client) Description() Description { return cl.conn.desc }

// Instance is the client of the world's instance name (no key scope):
// calls on it reach that instance alone.
func (cl *Client) Instance(name string) *Client {
	return &Client{conn: cl.conn, instance: name}
}

// WithScope is the client of the same instance with keys scoped to scope
// (see Config.Scope); "" is no scope.
func (cl *Client) WithScope(scope string) *Client {
	return &Client{conn: cl.conn, instance: cl.instance, scope: scope}
}

// Scope is the client's key scope ("" : none).
func (cl *Client) Scope() string { return cl.scope }

// Name implements world.World: the name describe answered.
func (cl *Client) Name() string { return cl.conn.desc.Name }

// Kinds implements world.World: the kinds of the API version APIVersion
// returns, as describe answered them.
func (cl *Client) Kinds() []world.KindInfo {
	v := cl.APIVersion()
	for _, ver := range cl.conn.desc.Versions {
		if ver.Name == v {
			return ver.Kinds
		}
	}
	return cl.conn.desc.Versions[0].Kinds
}

// APIVersion implements world.Versioned. It makes no call: it is the
// version the instance answered last — to state (Snapshot), set_version,
// create_instance, or, for the world itself, describe when dialled — and
// for an instance nothing was seen of yet, the first described version.
func (cl *Client) APIVersion() string {
	cl.conn.mu.Lock()
	defer cl.conn.mu.Unlock()
	if v, ok := cl.conn.versions[cl.instance]; ok {
		return v
	}
	return cl.conn.desc.Versions[0].Name
}

func (cl *Client) sawVersion(v string) {
	cl.conn.mu.Lock()
	defer cl.conn.mu.Unlock()
	cl.conn.versions[cl.instance] = v
}

// call names a call for errors, with the instance it is on.
func (cl *Client) call(what string) string {
	if cl.instance != "" {
		return what + " on instance " + cl.instance
	}
	return what
}

func (cl *Client) wireKey(key string) string {
	if cl.scope == "" {
		return key
	}
	return cl.scope + "/" + key
}

// Execute implements world.World: apply. An error wrapping ErrWorld means
// the world's answer was not had; whether it executed the request is then
// for Lookup to say.
func (cl *Client) Execute(ctx context.Context, req world.Request) (world.Outcome, error) {
	call := cl.call(fmt.Sprintf("apply %s key %s", req.Kind, req.Key))
	args := req.Args
	if len(args) == 0 {
		args = json.RawMessage("null") // as the ledger records no arguments
	}
	var resp ApplyResponse
	body, err := cl.do(ctx, PathApply, call, ApplyRequest{Instance: cl.instance, Key: cl.wireKey(req.Key), Kind: req.Kind, Args: args, Now: req.Now.UTC()}, &resp, nil)
	if err != nil {
		return world.Outcome{}, err
	}
	if problem := checkOutcome("outcome", resp.Outcome); problem != "" {
		return world.Outcome{}, cl.conn.wrong(call, problem, body)
	}
	if resp.Seq < 1 {
		return world.Outcome{}, cl.conn.wrong(call, fmt.Sprintf("answered seq %d; an applied request is a ledger entry, seq 1 or more", resp.Seq), body)
	}
	return resp.Outcome, nil
}

// checkOutcome says what is wrong with an outcome ("": nothing).
func checkOutcome(field string, o world.Outcome) string {
	switch o.Status {
	case protocol.StatusDone:
		if o.Error != nil {
			return field + ": status done with an error"
		}
	case protocol.StatusFailed:
		if o.Error == nil || o.Error.Code == "" {
			return field + ": status failed without an error code"
		}
	default:
		return fmt.Sprintf("%s: status %q; want %q or %q", field, o.Status, protocol.StatusDone, protocol.StatusFailed)
	}
	return ""
}

// Lookup implements world.World. The empty key finds nothing, without a
// call: world events have no key.
func (cl *Client) Lookup(ctx context.Context, key string) (world.Outcome, bool, error) {
	if key == "" {
		return world.Outcome{}, false, nil
	}
	call := cl.call("lookup key " + key)
	var resp LookupResponse
	body, err := cl.do(ctx, PathLookup, call, LookupRequest{Instance: cl.instance, Key: cl.wireKey(key)}, &resp, nil)
	if err != nil {
		return world.Outcome{}, false, err
	}
	if !resp.Found {
		return world.Outcome{}, false, nil
	}
	if resp.Outcome == nil {
		return world.Outcome{}, false, cl.conn.wrong(call, "answered found without an outcome", body)
	}
	if problem := checkOutcome("outcome", *resp.Outcome); problem != "" {
		return world.Outcome{}, false, cl.conn.wrong(call, problem, body)
	}
	return *resp.Outcome, true, nil
}

// Ledger implements world.World (scoped: see Config.Scope).
func (cl *Client) Ledger(ctx context.Context) ([]world.LedgerEntry, error) {
	call := cl.call("ledger")
	var resp LedgerResponse
	body, err := cl.do(ctx, PathLedger, call, InstanceRequest{Instance: cl.instance}, &resp, nil)
	if err != nil {
		return nil, err
	}
	var last int64
	for i, e := range resp.Entries {
		if e.Seq <= last {
			return nil, cl.conn.wrong(call, fmt.Sprintf("entries[%d]: seq %d after seq %d; want them increasing", i, e.Seq, last), body)
		}
		last = e.Seq
		if e.Kind == "" {
			return nil, cl.conn.wrong(call, fmt.Sprintf("entries[%d] (seq %d): no kind", i, e.Seq), body)
		}
		if problem := checkOutcome(fmt.Sprintf("entries[%d] (seq %d) outcome", i, e.Seq), e.Outcome); problem != "" {
			return nil, cl.conn.wrong(call, problem, body)
		}
	}
	if cl.scope == "" {
		return resp.Entries, nil
	}
	return scopeLedger(resp.Entries, cl.scope), nil
}

// scopeLedger is the scope's view of a ledger: its entries and the world
// events, keys stripped of the scope, renumbered 1..n.
func scopeLedger(entries []world.LedgerEntry, scope string) []world.LedgerEntry {
	prefix := scope + "/"
	var out []world.LedgerEntry
	for _, e := range entries {
		if !e.IsEvent() {
			k, ok := strings.CutPrefix(e.Key, prefix)
			if !ok {
				continue
			}
			e.Key = k
		}
		e.Seq = int64(len(out) + 1)
		out = append(out, e)
	}
	return out
}

// Duplicates implements world.World: the duplicates call when the world
// offers it, else none (scoped: only duplicates with at least two keys in
// the scope, with those keys alone, stripped, and their ids when the
// world gives one id per key).
func (cl *Client) Duplicates(ctx context.Context) ([]world.Duplicate, error) {
	if !cl.conn.desc.Capabilities.Duplicates {
		return nil, nil
	}
	call := cl.call("duplicates")
	var resp DuplicatesResponse
	body, err := cl.do(ctx, PathDuplicates, call, InstanceRequest{Instance: cl.instance}, &resp, nil)
	if err != nil {
		return nil, err
	}
	for i, d := range resp.Duplicates {
		if d.Kind == "" {
			return nil, cl.conn.wrong(call, fmt.Sprintf("duplicates[%d]: no kind", i), body)
		}
	}
	if cl.scope == "" {
		return resp.Duplicates, nil
	}
	return scopeDuplicates(resp.Duplicates, cl.scope), nil
}

func scopeDuplicates(dups []world.Duplicate, scope string) []world.Duplicate {
	prefix := scope + "/"
	var out []world.Duplicate
	for _, d := range dups {
		paired := len(d.IDs) == len(d.Keys)
		s := world.Duplicate{Kind: d.Kind, Name: d.Name, Scope: d.Scope}
		if !paired {
			s.IDs = d.IDs
		}
		for i, k := range d.Keys {
			k, ok := strings.CutPrefix(k, prefix)
			if !ok {
				continue
			}
			s.Keys = append(s.Keys, k)
			if paired {
				s.IDs = append(s.IDs, d.IDs[i])
			}
		}
		if s.Count = len(s.Keys); s.Count > 1 {
			out = append(out, s)
		}
	}
	return out
}

// CheckGoal implements world.World: the goal call. A world that declares
// no goal capability is not called: the error wraps world.ErrNoGoal (as
// does a world's 501 unsupported).
func (cl *Client) CheckGoal(ctx context.Context, task json.RawMessage) (world.Check, error) {
	call := cl.call("goal")
	if !cl.conn.desc.Capabilities.Goal {
		return world.Check{}, cl.conn.unsupported(call, "goal", world.ErrNoGoal)
	}
	if len(task) == 0 {
		task = json.RawMessage("null")
	}
	var resp struct {
		OK     *bool  `json:"ok"`
		Detail string `json:"detail"`
	}
	sentinel := func(code string) error {
		if code == CodeUnsupported {
			return world.ErrNoGoal
		}
		return nil
	}
	body, err := cl.do(ctx, PathGoal, call, GoalRequest{Instance: cl.instance, Task: task}, &resp, sentinel)
	if err != nil {
		return world.Check{}, err
	}
	if resp.OK == nil {
		return world.Check{}, cl.conn.wrong(call, `answered no "ok"`, body)
	}
	return world.Check{OK: *resp.OK, Detail: resp.Detail}, nil
}

// Snapshot implements world.World: the state call's state (the whole
// world's, scope or not). It also updates APIVersion.
func (cl *Client) Snapshot(ctx context.Context) (json.RawMessage, error) {
	call := cl.call("state")
	var resp StateResponse
	body, err := cl.do(ctx, PathState, call, InstanceRequest{Instance: cl.instance}, &resp, nil)
	if err != nil {
		return nil, err
	}
	if len(resp.State) == 0 || string(resp.State) == "null" {
		return nil, cl.conn.wrong(call, `answered no "state"`, body)
	}
	if problem := cl.conn.checkVersion("api_version", resp.APIVersion); problem != "" {
		return nil, cl.conn.wrong(call, problem, body)
	}
	cl.sawVersion(resp.APIVersion)
	return resp.State, nil
}

// checkVersion says what is wrong with a version a world answered ("": nothing).
func (c *conn) checkVersion(field, v string) string {
	var names []string
	for _, ver := range c.desc.Versions {
		if ver.Name == v {
			return ""
		}
		names = append(names, ver.Name)
	}
	return fmt.Sprintf("answered %s %q, which is not among the versions it described (%s)", field, v, strings.Join(names, ", "))
}

// SetAPIVersion implements world.Versioned: set_version. On a world that
// declares no versions capability nothing is sent: its one version is
// kept (and nothing recorded), any other is unknown. An unknown version's
// error wraps world.ErrUnknownAPIVersion.
func (cl *Client) SetAPIVersion(ctx context.Context, version string, now time.Time) (string, error) {
	call := cl.call("set_version " + version)
	if !cl.conn.desc.Capabilities.Versions {
		current := cl.APIVersion()
		if version == current {
			return current, nil
		}
		return "", &RefusedError{World: cl.conn.label, Call: call, Code: CodeUnknownVersion,
			Message:  fmt.Sprintf("%s serves only %s (it declares no versions capability; nothing was sent)", cl.conn.desc.Name, current),
			sentinel: world.ErrUnknownAPIVersion}
	}
	sentinel := func(code string) error {
		if code == CodeUnknownVersion {
			return world.ErrUnknownAPIVersion
		}
		return nil
	}
	var resp SetVersionResponse
	body, err := cl.do(ctx, PathSetVersion, call, SetVersionRequest{Instance: cl.instance, Version: version, Now: now.UTC()}, &resp, sentinel)
	if err != nil {
		return "", err
	}
	if resp.Version != version {
		return "", cl.conn.wrong(call, fmt.Sprintf("answered version %q", resp.Version), body)
	}
	if problem := cl.conn.checkVersion("previous", resp.Previous); problem != "" {
		return "", cl.conn.wrong(call, problem, body)
	}
	cl.sawVersion(resp.Version)
	return resp.Previous, nil
}

var _ world.Eventful = (*Client)(nil)

// Events implements world.Eventful: the world events the world described
// (none without the events capability).
func (cl *Client) Events() []world.EventInfo {
	if !cl.conn.desc.Capabilities.Events {
		return nil
	}
	return cl.conn.desc.Events
}

// FireEvent implements world.Eventful: event. An event the world did not
// describe is refused without sending anything; its error, like the
// world's unknown_event, wraps world.ErrUnknownEvent.
func (cl *Client) FireEvent(ctx context.Context, ev world.Event) (world.Outcome, error) {
	call := cl.call("event " + ev.Kind)
	if !world.HasEvent(cl.Events(), ev.Kind) {
		return world.Outcome{}, &RefusedError{World: cl.conn.label, Call: call, Code: CodeUnknownEvent,
			Message:  fmt.Sprintf("%s does not describe the world event %s (nothing was sent)", cl.conn.desc.Name, ev.Kind),
			sentinel: world.ErrUnknownEvent}
	}
	sentinel := func(code string) error {
		if code == CodeUnknownEvent {
			return world.ErrUnknownEvent
		}
		return nil
	}
	args := ev.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var resp EventResponse
	if _, err := cl.do(ctx, PathEvent, call, EventRequest{Instance: cl.instance, Kind: ev.Kind, Args: args, Now: ev.Now.UTC()}, &resp, sentinel); err != nil {
		return world.Outcome{}, err
	}
	return resp.Outcome, nil
}

// CreateInstance makes the world's instance name, empty, or restored from
// ledger by applying its requests and events in order (see
// CreateInstanceRequest): a shadow of the world at a point of its ledger.
// A restore answered otherwise than recorded is refused with
// replay_differs, an error wrapping world.ErrNotReplayable, and leaves no
// instance. The keys are sent as they are, whatever the client's scope.
func (cl *Client) CreateInstance(ctx context.Context, name string, ledger []world.LedgerEntry) error {
	call := "create_instance " + name
	if !cl.conn.desc.Capabilities.Instances {
		return cl.conn.unsupported(call, "instances", nil)
	}
	sentinel := func(code string) error {
		if code == CodeReplayDiffers {
			return world.ErrNotReplayable
		}
		return nil
	}
	var resp CreateInstanceResponse
	body, err := cl.do(ctx, PathCreateInstance, call, CreateInstanceRequest{Instance: name, Ledger: ledger}, &resp, sentinel)
	if err != nil {
		return err
	}
	if resp.Instance != name {
		return cl.conn.wrong(call, fmt.Sprintf("answered instance %q", resp.Instance), body)
	}
	if problem := cl.conn.checkVersion("api_version", resp.APIVersion); problem != "" {
		return cl.conn.wrong(call, problem, body)
	}
	cl.Instance(name).sawVersion(resp.APIVersion)
	return nil
}

// DropInstance drops the world's instance name; one that does not exist
// is refused with unknown_instance.
func (cl *Client) DropInstance(ctx context.Context, name string) error {
	call := "drop_instance " + name
	if !cl.conn.desc.Capabilities.Instances {
		return cl.conn.unsupported(call, "instances", nil)
	}
	var resp DropInstanceResponse
	body, err := cl.do(ctx, PathDropInstance, call, InstanceRequest{Instance: name}, &resp, nil)
	if err != nil {
		return err
	}
	if resp.Instance != name {
		return cl.conn.wrong(call, fmt.Sprintf("answered instance %q", resp.Instance), body)
	}
	cl.conn.mu.Lock()
	delete(cl.conn.versions, name)
	cl.conn.mu.Unlock()
	return nil
}

// unsupported refuses, without a call, what the world's description
// declares it does not offer.
func (c *conn) unsupported(call, capability string, sentinel error) error {
	return &RefusedError{World: c.label, Call: call, Code: CodeUnsupported,
		Message: fmt.Sprintf("its describe declares no %s capability; nothing was sent", capability), sentinel: sentinel}
}

// wrong is an answer of the wrong shape: the world's fault.
func (c *conn) wrong(call, problem string, body []byte) error {
	return &worldError{label: c.label, call: call, problem: fmt.Sprintf("%s: %s", problem, excerpt(body))}
}

// excerpt quotes the first 200 bytes of an answer.
func excerpt(body []byte) string {
	const n = 200
	if len(body) > n {
		return fmt.Sprintf("%q…", body[:n])
	}
	return fmt.Sprintf("%q", body)
}

// do sends one call and decodes its answer into out, returning the
// answer's body. A refusal (4xx, or 501 unsupported, with an ErrorBody)
// is a *RefusedError wrapping sentinel(code); anything else gone wrong is
// the world's fault (ErrWorld), unless ctx itself ended.
func (cl *Client) do(ctx context.Context, path, call string, in, out any, sentinel func(code string) error) ([]byte, error) {
	c := cl.conn
	reqBody, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: encode the request: %w", c.label, call, err)
	}
	callCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(callCtx, http.MethodPost, c.base+path, bytes.NewReader(reqBody))
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c.label, call, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	failed := func(problem string, cause error) error {
		if ctx.Err() != nil { // the caller gave up: not the world's fault
			return fmt.Errorf("%s: %s: %w", c.label, call, context.Cause(ctx))
		}
		if callCtx.Err() != nil {
			return &worldError{label: c.label, call: call, problem: fmt.Sprintf("no answer within %s", c.timeout), cause: context.DeadlineExceeded}
		}
		return &worldError{label: c.label, call: call, problem: problem, cause: cause}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, failed("unreachable: "+err.Error(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxAnswer+1))
	if err != nil {
		return nil, failed("read the answer: "+err.Error(), err)
	}
	if int64(len(body)) > c.maxAnswer {
		return nil, failed(fmt.Sprintf("answered more than %d bytes", c.maxAnswer), nil)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var eb ErrorBody
		if json.Unmarshal(body, &eb) != nil || eb.Error.Code == "" {
			return nil, failed(fmt.Sprintf("answered %d: %s", resp.StatusCode, excerpt(body)), nil)
		}
		refusal := resp.StatusCode < 500 || eb.Error.Code == CodeUnsupported
		if !refusal {
			return nil, failed(fmt.Sprintf("answered %d %s: %s", resp.StatusCode, eb.Error.Code, eb.Error.Message), nil)
		}
		re := &RefusedError{World: c.label, Call: call, Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
		if sentinel != nil {
			re.sentinel = sentinel(eb.Error.Code)
		}
		return nil, re
	}
	if err := json.Unmarshal(body, out); err != nil {
		if !json.Valid(body) {
			return nil, failed("answered non-JSON: "+excerpt(body), nil)
		}
		return nil, failed(fmt.Sprintf("answered a body of the wrong shape (%v): %s", err, excerpt(body)), nil)
	}
	return body, nil
}
