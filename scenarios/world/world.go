// Package world defines what a world is to the harness: the system an
// agent acts on through effects, with its own ledger of every request it
// received, so that checkers judge what really happened rather than what
// the agent claims.
//
// A world is a plug-in. Its author writes a Model — its kinds, and what a
// request does to its state (Apply) — and offers the rest as optional
// capabilities found by type assertion: a goal (GoalJudge), duplicates
// (DuplicateFinder), API versions (VersionedModel), a snapshot
// (Snapshotter). The harness wraps every model in the durable ledger
// (Ledgered), which records each request with the model's change in one
// commit and answers Lookup by key; that wrapped World is what runs,
// replays, shadows and reports use. A world must not know about runs,
// attempts, tokens or the gateway; it sees only requests (with the
// harness's identity of each as Key) and its own state.
package world

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// Request is one effect as the world receives it.
type Request struct {
	// Key is the effect's idempotency key as the agent gave it, or a
	// harness-made "unkeyed-N" for an effect sent without one. The world
	// tags every resource it creates with it, so an in-doubt effect can be
	// reconciled by Lookup.
	Key  string
	Kind string
	Args json.RawMessage
	// Now is the run's virtual time at execution.
	Now time.Time
}

// Outcome is the world's answer to a request.
type Outcome struct {
	Status string                `json:"status"` // protocol.StatusDone or protocol.StatusFailed
	Result json.RawMessage       `json:"result,omitempty"`
	Error  *protocol.EffectError `json:"error,omitempty"`
}

// Failed builds a failed outcome. Status codes of 500 and above are transient.
func Failed(status int, code, format string, args ...any) Outcome {
	return Outcome{Status: protocol.StatusFailed, Error: &protocol.EffectError{
		Code: code, Message: fmt.Sprintf(format, args...), Status: status, Transient: status >= 500,
	}}
}

// FailedWith builds a failed outcome, like Failed, carrying details
// marshalled as the error's machine-readable Details: the hint an agent can
// act on to correct its request. Details that cannot be marshalled (a
// programming error) are left out and the reason appended to the message.
func FailedWith(status int, code string, details any, format string, args ...any) Outcome {
	o := Failed(status, code, format, args...)
	if details == nil {
		return o
	}
	b, err := json.Marshal(details)
	if err != nil {
		o.Error.Message += fmt.Sprintf(" (details unavailable: %v)", err)
		return o
	}
	o.Error.Details = b
	return o
}

// Done builds a successful outcome with v marshalled as the result.
func Done(v any) (Outcome, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Outcome{}, fmt.Errorf("marshal result: %w", err)
	}
	return Outcome{Status: protocol.StatusDone, Result: b}, nil
}

// KindInfo describes one effect kind a world offers.
type KindInfo struct {
	Name       string `json:"name"`       // e.g. "cloud.create_network"
	Idempotent bool   `json:"idempotent"` // a repeat with the same arguments changes nothing
	ReadOnly   bool   `json:"read_only"`  // no side effect at all
	// Destructive: it removes or overwrites what cannot be had back.
	Destructive bool `json:"destructive,omitempty"`
	// Identity says what names the logical resource a request of the kind
	// creates or acts on — two requests of one non-idempotent kind for one
	// identity are a duplicate — as an expression over its args, e.g.
	// "args.name"; "" when the kind creates nothing.
	Identity string `json:"identity,omitempty"`
	Args     string `json:"args"`   // the arguments, e.g. "{name, network_id}"
	Result   string `json:"result"` // the result, e.g. "{id, name, network_id}"
	Doc      string `json:"doc"`    // what it does, and what else to know
}

// LedgerEntry is one request the world received, in arrival order.
type LedgerEntry struct {
	Seq      int64           `json:"seq"`
	Key      string          `json:"key"`
	Kind     string          `json:"kind"`
	Args     json.RawMessage `json:"args"`
	Outcome  Outcome         `json:"outcome"`
	At       time.Time       `json:"at"`
	Resource string          `json:"resource,omitempty"` // id of the resource it created or changed
}

// EventAPIVersion is the ledger Kind of a world event recording an API
// version change (see Versioned). Its Args are {"version"} and its result
// {"previous", "version"}.
const EventAPIVersion = "world.api_version"

// IsEvent reports whether the entry is a world event (something that
// happened to the world, such as an API version change) rather than an
// effect an agent requested. World events have an empty Key and a Kind
// beginning with "world."; they never count as effects.
func (e LedgerEntry) IsEvent() bool {
	return e.Key == "" && strings.HasPrefix(e.Kind, "world.")
}

// Duplicate is a logical resource (kind + name, within Scope) of a
// non-idempotent kind that the world shows created more than once.
type Duplicate struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Scope is the id of the resource the name is unique within, e.g. the
	// database a snapshot belongs to; empty where names are global.
	Scope string   `json:"scope,omitempty"`
	IDs   []string `json:"ids"`
	Keys  []string `json:"keys"` // the idempotency keys that created them
	Count int      `json:"count"`
}

// Check is a yes/no judgement with the evidence for a person.
type Check struct {
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// World is a world as the harness drives it: a Model wrapped in the
// durable ledger (Ledgered, made by Definition.Instance and
// Registry.Open). A world's author writes a Model, not a World.
// Implementations are safe for concurrent use.
type World interface {
	// Name is the world's registry name, e.g. "cloud".
	Name() string
	// Kinds lists the effect kinds offered.
	Kinds() []KindInfo
	// Execute applies one request and returns the world's answer. The
	// request, its outcome and every state change are durable when it
	// returns nil. A non-nil error means the world could not record the
	// execution (the harness treats the effect as unknown).
	Execute(ctx context.Context, req Request) (Outcome, error)
	// Lookup reports the recorded outcome of the last request received
	// with this key, and whether there was one: the reconciliation of an
	// effect whose result the harness never journaled.
	Lookup(ctx context.Context, key string) (Outcome, bool, error)
	// Ledger lists every request received, in order.
	Ledger(ctx context.Context) ([]LedgerEntry, error)
	// Duplicates lists logical resources created more than once.
	Duplicates(ctx context.Context) ([]Duplicate, error)
	// CheckGoal judges from the world's state whether the task's goal holds.
	CheckGoal(ctx context.Context, task json.RawMessage) (Check, error)
	// Snapshot returns the world's whole state as JSON.
	Snapshot(ctx context.Context) (json.RawMessage, error)
}

// ErrUnknownAPIVersion is returned by Versioned.SetAPIVersion for a
// version the world does not have.
var ErrUnknownAPIVersion = errors.New("unknown API version")

// Versioned is a world whose API can change version mid-run (the
// api-version fault). A world offers it optionally; callers discover it with
// a type assertion.
type Versioned interface {
	// APIVersion is the version the world currently serves, e.g. "v1".
	APIVersion() string
	// SetAPIVersion switches the API durably (recorded in the world's
	// ledger as a world event, kind EventAPIVersion, key "") and returns
	// the previous version. Switching to the current version changes and
	// records nothing, so re-applying a switch after a crash is safe.
	// Unknown versions are an error wrapping ErrUnknownAPIVersion that names
	// the known ones; the version is then left as it was.
	SetAPIVersion(ctx context.Context, version string, now time.Time) (previous string, err error)
}

// ErrUnknownWorld is returned by Registry.Open for a name nobody registered.
var ErrUnknownWorld = errors.New("unknown world")

// Registry maps world names to their definitions. Registration is
// explicit: the caller that builds the harness decides which worlds exist.
type Registry struct {
	defs map[string]Definition
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{defs: map[string]Definition{}}
}

// Register adds a world; registering a name twice, or a definition without
// a name or Open, panics (a programming error).
func (r *Registry) Register(d Definition) {
	if _, dup := r.defs[d.Name]; dup {
		panic("world: " + d.Name + " registered twice")
	}
	if d.Name == "" || d.Open == nil {
		panic("world: a definition needs a name and Open")
	}
	r.defs[d.Name] = d
}

// Names lists the registered worlds, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.defs))
	for n := range r.defs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Definition returns the named world's definition.
func (r *Registry) Definition(name string) (Definition, bool) {
	d, ok := r.defs[name]
	return d, ok
}

// Definitions lists every registered world's definition, sorted by name.
func (r *Registry) Definitions() []Definition {
	out := make([]Definition, 0, len(r.defs))
	for _, n := range r.Names() {
		out = append(out, r.defs[n])
	}
	return out
}

// Open opens the named world.
func (r *Registry) Open(ctx context.Context, name string, store Store, prefix []byte, options map[string]any) (World, error) {
	d, ok := r.defs[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known worlds: %v)", ErrUnknownWorld, name, r.Names())
	}
	w, err := d.Instance(ctx, store, prefix, options)
	if err != nil {
		return nil, fmt.Errorf("open world %q: %w", name, err)
	}
	return w, nil
}
