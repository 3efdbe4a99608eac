package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// Process is what process faults act on: the agent's current container,
// and the harness itself.
type Process interface {
	// KillAgent SIGKILLs the current attempt's container.
	KillAgent(ctx context.Context) error
	// StopAgent sends SIGTERM and SIGKILLs after grace. If down > 0, the
	// next attempt starts only once down of virtual time has passed.
	StopAgent(ctx context.Context, grace, down time.Duration) error
	// PauseAgent freezes the container; UnpauseAgent thaws it.
	PauseAgent(ctx context.Context) error
	UnpauseAgent(ctx context.Context) error
	// CrashHarness SIGKILLs the harness process. In production it does
	// not return.
	CrashHarness(ctx context.Context) error
}

// Network is what network faults act on: the agent's only link, the
// gateway socket (see Link).
type Network interface {
	Drop()
	Blackhole()
	SetLatency(d, jitter time.Duration)
	Heal()
	// DisconnectSandbox detaches the agent's container from the network a
	// scenario gave its sandbox (the Docker network API);
	// ReconnectSandbox attaches it again.
	DisconnectSandbox(ctx context.Context) error
	ReconnectSandbox(ctx context.Context) error
}

// World is what world faults act on: the simulated world's API and the
// path of effects to it.
type World interface {
	// SetAPIVersion switches the world's API version and returns the
	// previous one.
	SetAPIVersion(ctx context.Context, version string) (string, error)
	// SetEffectToxic makes effects fail with a transient 5xx before they
	// reach the world, and/or delays them; once applies it to the next
	// effect only. The zero EffectToxic removes it.
	SetEffectToxic(t EffectToxic)
	// FireWorldEvent makes a world event happen to the world (kind, e.g.
	// "world.dep_update", with its arguments) and returns its result; a
	// world that does not undergo it is an error.
	FireWorldEvent(ctx context.Context, kind string, args json.RawMessage) (json.RawMessage, error)
	// CrashWorld SIGKILLs the process (or container) of a world the
	// harness started for the run; it is started again on its data when
	// next reached. Fired by effect:N, the effect's answer is lost (the
	// effect is in doubt, reconciled by lookup); by effect:N:before, the
	// effect never reaches the world.
	CrashWorld(ctx context.Context) error
}

// EffectToxic is a toxic on the effect path.
type EffectToxic struct {
	Fail5xx bool          // answer 503 (transient) without reaching the world
	Slow    time.Duration // hold the effect this long (real time, at most MaxEffectSlow) first
	Once    bool          // only the next effect
}

// MaxEffectSlow bounds the real time an effect-slow fault holds an effect.
const MaxEffectSlow = 5 * time.Second

// LLM is what LLM faults act on: the gateway's model endpoint.
type LLM interface {
	// SetLLMToxic makes LLM calls fail or come back damaged; once applies
	// it to the next call only. The zero LLMToxic removes it.
	SetLLMToxic(t LLMToxic)
}

// LLM toxic kinds.
const (
	LLMRateLimit   = "429"       // answer 429 with Retry-After
	LLMServerError = "5xx"       // answer 503
	LLMTimeout     = "timeout"   // hold the call, then reset the connection
	LLMTruncated   = "truncated" // cut the answer short (finish_reason "length")
	LLMMalformed   = "malformed" // break the JSON of the answer's tool call arguments
)

// LLMToxic is a toxic on the LLM path.
type LLMToxic struct {
	Kind       string        // one of the LLM* kinds; "" for none
	RetryAfter time.Duration // for 429
	Once       bool          // only the next call
}

// Clock is what time faults act on: the run's virtual clock.
type Clock interface {
	// Jump moves virtual time forward by d, firing what is scheduled in
	// between.
	Jump(ctx context.Context, d time.Duration) error
}

// Target is everything a fault can act on. The harness implements it for a
// live run; faults never reach Docker, the journal or the world except
// through it.
type Target interface {
	Process
	Network
	World
	LLM
	MCP
	Clock
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

// Stateful is implemented by faults that keep what they need to undo
// themselves (say, the API version to return to). The harness journals
// State after Inject and hands it back with Restore after a restart, so a
// fault heals correctly even when the harness died in between.
type Stateful interface {
	State() string
	Restore(state string)
}

// DurationRule says whether a kind takes a /DURATION.
type DurationRule int

// Duration rules.
const (
	DurationNone     DurationRule = iota // instantaneous
	DurationOptional                     // lasts if given one
	DurationRequired                     // must heal: a /DURATION is required
)

// Reach is what a run can reach, for drawing random faults that can fire:
// checkpoint steps, effects, LLM calls and virtual time; and which kinds
// a random schedule draws from.
type Reach struct {
	Steps    int           `json:"steps"`
	Effects  int           `json:"effects"`
	LLMCalls int           `json:"llm_calls"`
	Virtual  time.Duration `json:"virtual"`
	// Kinds, when not empty, are the only kinds RandomSchedule draws
	// (a scenario's reach.kinds, or --chaos-kinds); empty: every kind it
	// can draw. See Registry.RandomKinds.
	Kinds []string `json:"kinds,omitempty"`
	// MCP says the run fronts MCP servers (a scenario with mcp:): only
	// then does RandomSchedule draw the MCP faults (Kind.MCP).
	MCP bool `json:"-"`
}

// Kind describes a fault kind in the catalog and builds its faults.
type Kind struct {
	Name     string        `json:"name"`
	Group    string        `json:"group"` // process, network, llm, world, mcp, time
	Summary  string        `json:"summary"`
	Triggers []TriggerType `json:"triggers"`      // the triggers this kind supports
	Arg      string        `json:"arg,omitempty"` // what ARG means; empty: the kind takes none
	ArgNeed  bool          `json:"arg_required,omitempty"`
	Duration DurationRule  `json:"-"`
	Example  string        `json:"example"`
	// DefaultPhase is where an effect:N trigger without a phase lands for
	// this kind (see Phase).
	DefaultPhase Phase `json:"-"`
	// Path is what a lasting fault of the kind acts on, when that path
	// holds one state at a time (PathLink, PathEffect, PathLLM); "" when
	// faults of the kind do not stack.
	Path string `json:"path,omitempty"`
	// Severity ranks faults on one Path: the most severe active one acts
	// (an outage makes latency moot; a 5xx makes slowness moot).
	Severity int `json:"severity,omitempty"`
	// MetBy says what shows that the agent really met a fault of the kind.
	MetBy MetBy `json:"met_by"`
	// PerAttempt marks lasting kinds that act on the agent's container:
	// while one lasts, every new attempt's container meets it too — after a
	// kill, a restart or the harness's own crash — so that a frozen agent
	// or a cut sandbox network outlives the process it first hit.
	PerAttempt bool `json:"per_attempt,omitempty"`
	// EndsAttempt marks kinds that end the agent's attempt (its container
	// dies and the next attempt starts): a run whose schedule has one
	// starts the next attempt's sandbox ahead.
	EndsAttempt bool `json:"ends_attempt,omitempty"`
	// EndsHarness marks kinds that end the harness's own process: an
	// isolated re-run, which shares that process, leaves them out.
	EndsHarness bool `json:"ends_harness,omitempty"`
	// Needs names the optional capabilities of the sandbox backend a fault
	// of the kind acts through (sandbox.Capability values: "freeze",
	// "link", "exec"); a scenario that schedules it on a backend without
	// one is refused before it starts, naming the backend and the
	// capability, and "link" also needs a sandbox network for the scenario
	// to give its agent (sandbox: {network: internal}).
	Needs []string `json:"needs,omitempty"`
	// StartedWorld marks kinds that act on a world the harness starts for
	// the run — a scenario's world: {command: ...} or {image: ...} — and
	// on nothing else: a scenario whose world is built in or reached by
	// URL is refused before it starts.
	StartedWorld bool `json:"started_world,omitempty"`
	// WorldEvent names the world event a fault of the kind fires (its
	// ledger kind, e.g. "world.dep_update"): a scenario whose world does
	// not declare it is refused before it starts.
	WorldEvent string `json:"world_event,omitempty"`
	// MCP marks kinds that act on the scenario's MCP servers (mcp:): a
	// scenario without them is refused before it starts, and --chaos
	// random draws them only for one with them (Reach.MCP).
	MCP bool `json:"mcp,omitempty"`
	// New builds one fault from a spec already checked against the fields
	// above; it parses and checks ARG.
	New func(Spec) (Fault, error) `json:"-"`
	// DrawTriggers, if set, are the only triggers --chaos random uses for
	// the kind (an LLM fault only means something at an LLM call).
	DrawTriggers []TriggerType `json:"-"`
	// Draw, if set, makes the kind eligible for --chaos random: it draws
	// an argument and a duration suited to a run that can reach r.
	Draw func(rng *rand.Rand, r Reach) (arg string, d time.Duration) `json:"-"`
}

// DurationText says what /DURATION means for the kind, for the catalog.
func (k Kind) DurationText() string {
	switch k.Duration {
	case DurationRequired:
		return "required"
	case DurationOptional:
		return "optional"
	}
	return "none"
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

// Register adds a kind; registering a name twice, or a kind without New or
// triggers, panics (a programming error).
func (r *Registry) Register(k Kind) {
	if _, dup := r.kinds[k.Name]; dup {
		panic("chaos: fault kind " + k.Name + " registered twice")
	}
	if k.New == nil || len(k.Triggers) == 0 {
		panic("chaos: fault kind " + k.Name + " needs New and at least one trigger")
	}
	r.kinds[k.Name] = k
}

// Kinds lists the catalog, sorted by group then name.
func (r *Registry) Kinds() []Kind {
	out := make([]Kind, 0, len(r.kinds))
	for _, k := range r.kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return groupOrder(out[i].Group) < groupOrder(out[j].Group)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func groupOrder(g string) int {
	switch g {
	case "process":
		return 0
	case "network":
		return 1
	case "llm":
		return 2
	case "world":
		return 3
	case "mcp":
		return 4
	case "time":
		return 5
	}
	return 6
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
		return nil, fmt.Errorf("fault %q: %w: %s does not support trigger %s (it supports: %s)",
			spec.String(), ErrUnsupported, k.Name, spec.Trigger.Type, strings.Join(trig, ", "))
	case spec.Arg != "" && k.Arg == "":
		return nil, fmt.Errorf("fault %q: %w: %s takes no argument (got %q)", spec.String(), ErrUnsupported, k.Name, spec.Arg)
	case spec.Arg == "" && k.ArgNeed:
		return nil, fmt.Errorf("fault %q: %w: %s needs an argument: %s (e.g. %s)", spec.String(), ErrUnsupported, k.Name, k.Arg, k.Example)
	case spec.Duration != 0 && k.Duration == DurationNone:
		return nil, fmt.Errorf("fault %q: %w: %s is instantaneous and takes no /DURATION", spec.String(), ErrUnsupported, k.Name)
	case spec.Duration == 0 && k.Duration == DurationRequired:
		return nil, fmt.Errorf("fault %q: %w: %s must heal: give it a /DURATION (e.g. %s)", spec.String(), ErrUnsupported, k.Name, k.Example)
	}
	f, err := k.New(spec)
	if err != nil {
		return nil, fmt.Errorf("fault %q: %w", spec.String(), err)
	}
	return f, nil
}

// PhaseOf returns where an effect-triggered spec lands: its explicit
// phase, else its kind's default.
func (r *Registry) PhaseOf(spec Spec) Phase {
	if spec.Trigger.Phase != PhaseDefault {
		return spec.Trigger.Phase
	}
	if k, ok := r.kinds[spec.Kind]; ok && k.DefaultPhase != PhaseDefault {
		return k.DefaultPhase
	}
	return PhaseMid
}
