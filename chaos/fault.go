package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Target is what a fault acts on. The harness implements it for a live
// run; faults never reach Docker, the journal or the world except through
// it.
type Target interface {
	// KillAgent SIGKILLs the current attempt's container.
	KillAgent(ctx context.Context) error
	// CrashHarness SIGKILLs the harness process itself. In production it
	// does not return.
	CrashHarness(ctx context.Context) error
}

// Fault is one fault, ready to fire. Inject is the one required method.
type Fault interface {
	Inject(ctx context.Context, t Target) error
}

// Undoer is implemented by faults that last (a /DURATION) and must be
// healed. Undo must work even when ctx is already cancelled: callers run it
// under context.WithoutCancel with a timeout of their own.
type Undoer interface {
	Undo(ctx context.Context, t Target) error
}

// Kind describes a fault kind in the catalog and builds its faults.
type Kind struct {
	Name     string        `json:"name"`
	Summary  string        `json:"summary"`
	Triggers []TriggerType `json:"triggers"`           // the triggers this kind supports
	Arg      string        `json:"arg,omitempty"`      // what ARG means; empty: the kind takes none
	Duration bool          `json:"duration,omitempty"` // whether it takes /DURATION
	Example  string        `json:"example"`
	// New builds a fault from a spec already checked against the fields above.
	New func(Spec) (Fault, error) `json:"-"`
}

// ErrUnknownFault is returned by Registry.Build for a kind nobody registered.
var ErrUnknownFault = errors.New("unknown fault kind")

// ErrUnsupported is returned by Registry.Build for a spec its kind cannot take.
var ErrUnsupported = errors.New("unsupported fault spec")

// Registry is the catalog of fault kinds. Registration is explicit (no
// init side effects): the caller decides which kinds exist.
type Registry struct {
	kinds map[string]Kind
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{kinds: map[string]Kind{}} }

// Register adds a kind; registering a name twice, or a kind without New,
// panics (a programming error).
func (r *Registry) Register(k Kind) {
	if _, dup := r.kinds[k.Name]; dup {
		panic("chaos: fault kind " + k.Name + " registered twice")
	}
	if k.New == nil || len(k.Triggers) == 0 {
		panic("chaos: fault kind " + k.Name + " needs New and at least one trigger")
	}
	r.kinds[k.Name] = k
}

// Kinds lists the catalog, sorted by name.
func (r *Registry) Kinds() []Kind {
	out := make([]Kind, 0, len(r.kinds))
	for _, k := range r.kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the kind called name.
func (r *Registry) Lookup(name string) (Kind, bool) {
	k, ok := r.kinds[name]
	return k, ok
}

func (r *Registry) names() string {
	var ns []string
	for _, k := range r.Kinds() {
		ns = append(ns, k.Name)
	}
	return strings.Join(ns, ", ")
}

// Build checks spec against its kind (known kind, supported trigger,
// argument and duration) and returns the fault.
func (r *Registry) Build(spec Spec) (Fault, error) {
	k, ok := r.kinds[spec.Kind]
	if !ok {
		return nil, fmt.Errorf("fault %q: %w %q (known kinds: %s; see `overnight faults`)", spec.String(), ErrUnknownFault, spec.Kind, r.names())
	}
	supported := false
	var trig []string
	for _, t := range k.Triggers {
		trig = append(trig, string(t))
		if t == spec.Trigger.Type {
			supported = true
		}
	}
	switch {
	case !supported:
		return nil, fmt.Errorf("fault %q: %w: %s does not support trigger %s in this version (it supports: %s)",
			spec.String(), ErrUnsupported, k.Name, spec.Trigger.Type, strings.Join(trig, ", "))
	case spec.Arg != "" && k.Arg == "":
		return nil, fmt.Errorf("fault %q: %w: %s takes no argument (got %q)", spec.String(), ErrUnsupported, k.Name, spec.Arg)
	case spec.Duration != 0 && !k.Duration:
		return nil, fmt.Errorf("fault %q: %w: %s is instantaneous and takes no /DURATION", spec.String(), ErrUnsupported, k.Name)
	}
	f, err := k.New(spec)
	if err != nil {
		return nil, fmt.Errorf("fault %q: %w", spec.String(), err)
	}
	return f, nil
}

// Default returns a registry holding every fault kind this version ships.
func Default() *Registry {
	r := NewRegistry()
	r.Register(Kind{
		Name:     "kill",
		Summary:  "SIGKILL the agent's container once the first checkpoint with step >= N is durable, before the agent hears back; the harness starts a new attempt",
		Triggers: []TriggerType{TriggerStep},
		Example:  "kill@step:3",
		New:      func(Spec) (Fault, error) { return killFault{}, nil },
	})
	r.Register(Kind{
		Name:     "harness-crash",
		Summary:  "the harness SIGKILLs itself at that point; `overnight resume RUN` continues the run from the journal alone",
		Triggers: []TriggerType{TriggerStep},
		Example:  "harness-crash@step:3",
		New:      func(Spec) (Fault, error) { return crashFault{}, nil },
	})
	return r
}

type killFault struct{}

func (killFault) Inject(ctx context.Context, t Target) error { return t.KillAgent(ctx) }

type crashFault struct{}

func (crashFault) Inject(ctx context.Context, t Target) error { return t.CrashHarness(ctx) }
