package scenarios

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/scenarios/expr"
	"github.com/overnight-dev/overnight/scenarios/invariant"
)

// File format identifiers.
const (
	// APIVersion is the only apiVersion this package reads.
	APIVersion = "overnight/v1"
	// KindScenario is the kind of a scenario file.
	KindScenario = "Scenario"
	// BuiltinPrefix starts the Source of a built-in scenario: "builtin:deploy".
	BuiltinPrefix = "builtin:"
)

// Defaults applied to a scenario's limits.
const (
	DefaultTimeout     = 5 * time.Minute  // limits.timeout: wall-clock time of a run
	DefaultMaxAttempts = 10               // limits.max_attempts: attempts before the run fails
	DefaultHorizon     = 30 * chaos.Day   // limits.horizon: virtual time of a run
	MaxAttemptsLimit   = 1000             // the largest limits.max_attempts accepted
	DefaultApproval    = 10 * time.Minute // limits.approval: how long a held effect waits for a person
	DefaultReplays     = 3                // reflect.replays
	DefaultReflections = 2                // reflect.max
)

// DefaultInvariants returns the invariants a scenario checks when it names none.
func DefaultInvariants() []string { return invariant.Defaults() }

// KnownInvariants returns the names of the invariants this version ships
// (invariant.Default). A scenario may list others: a harness checks its
// names against its own registry (harness.Options.Invariants), which a
// program may extend.
func KnownInvariants() []string { return invariant.Default().Names() }

// Scenario is a validated scenario file with its defaults applied.
type Scenario struct {
	APIVersion  string // always APIVersion
	Kind        string // always KindScenario
	Name        string // [a-z0-9][a-z0-9-]*
	Description string

	World World // the world the agent acts on; zero when the scenario declares only HTTP APIs or MCP servers (see HasWorld)
	// HTTP are the HTTP APIs the agent calls through the gateway, in file
	// order; nil if none.
	HTTP []HTTPAPI
	// MCP is the mcp: block, the MCP servers the agent calls through the
	// gateway; nil if none.
	MCP *MCP
	// Goal judges goal-reached from an HTTP API's answer to a probe; nil:
	// the world's own goal judges.
	Goal  *Goal
	Agent AgentSpec // the default agent
	// Agents are the named variants, chosen with --agent NAME (see SelectAgent); nil if none.
	Agents map[string]AgentSpec

	// Task is handed to the agent as JSON. Values are JSON-compatible: map[string]any, []any,
	// string, bool, nil, int64 for integers that fit in it and float64 for every other number
	// (always finite). YAML timestamps and !!binary stay the text as written. Never nil.
	Task map[string]any

	Faults     []chaos.Spec // parsed faults, in file order; never nil
	FaultText  []string     // the faults as written, same order; never nil
	Draws      []chaos.Draw // faults drawn from the run's seed; nil if none
	Reach      *chaos.Reach // what a run can reach, for --chaos random; nil if not declared
	Sandbox    Sandbox      // the agent's sandbox
	Report     *Report      // the agent's report file; nil if the file has none
	Invariants []string     // DefaultInvariants when the file names none (absent or null)
	Limits     Limits       // with defaults applied
	Seed       *int64       // the default seed, nil if the file sets none
	LLM        *LLM         // the llm block; nil if the file has none
	Reflect    *Reflect     // the reflect block; nil: reflection is off
	Gate       []GateRule   // the effect path's gate policies, in order; nil: every effect is allowed
	// Claims are the scenario's judges of an agent's claims, by claim
	// name: CEL yielding a bool over state (the world's snapshot) and claim
	// (the claim's value); nil if none.
	Claims map[string]*expr.Program
	// Rollback is RollbackNone (the default) or RollbackConsistent.
	Rollback string

	Source string // the path given to Parse or Load, or "builtin:<name>"
	Raw    []byte // the exact bytes loaded, for the journal

	positions   map[string]position // JSON pointer -> where its value is written
	invariantAt map[string]string   // invariant name -> the JSON pointer where the file lists it
}

// Rollback policies (rollback:).
const (
	// RollbackNone resumes an attempt from the last checkpoint, whatever
	// it claims.
	RollbackNone = "none"
	// RollbackConsistent never resumes an attempt from a poisoned
	// checkpoint: the harness first writes one carrying the state of the
	// newest consistent checkpoint.
	RollbackConsistent = "consistent"
)

// Claim expression variables: the world's state and the claim's value.
const (
	ClaimVarState          = expr.State
	ClaimVarClaim expr.Var = "claim"
)

// World names the world a scenario runs against: a built-in (Name, with
// Options), or a world served over the world protocol (docs/world-protocol.md)
// at URL, started from Command, or started from Image — at most one of the
// three, and then Name, if set, is the name the world must describe itself
// with.
type World struct {
	Name    string
	Options map[string]any // free-form, JSON-compatible as Scenario.Task; never nil

	URL     string            // a world already running: its base URL
	Command []string          // a world the harness starts per run from this command
	Env     map[string]string // a command or image world's environment; nil if none
	Image   string            // a world the harness starts per run as a container of this image
	Port    int               // the port an image world listens on (default DefaultWorldPort)
	// Dir is the directory a command world runs in: the scenario file's
	// ("" for a built-in scenario, which cannot have one).
	Dir string
}

// DefaultWorldPort is the port an image world listens on when the scenario
// gives none.
const DefaultWorldPort = 8080

// Remote reports whether the world is served over the world protocol
// rather than built into the harness.
func (w World) Remote() bool { return w.URL != "" || len(w.Command) > 0 || w.Image != "" }

// Label names the world for people: its name, or where it is served from.
func (w World) Label() string {
	switch {
	case w.URL != "":
		return w.URL
	case len(w.Command) > 0:
		return "command " + strings.Join(w.Command, " ")
	case w.Image != "":
		return "image " + w.Image
	}
	return w.Name
}

// AgentSpec says which agent to run. Exactly one of Builtin, Binary and Image is set.
type AgentSpec struct {
	Builtin string            // an example agent built into the overnight binary (`/overnight agent NAME ARGS`)
	Binary  string            // a static linux/amd64 binary: an absolute path (relative ones are resolved at Parse)
	Image   string            // an image already on the engine
	Command []string          // nil if none: replaces the image's ENTRYPOINT (image agents only)
	Args    []string          // nil if none: the agent's arguments (an image's CMD)
	Env     map[string]string // nil if none; never a key starting with OVERNIGHT_
}

// Sandbox says how the agent's sandbox differs from the hardened default.
type Sandbox struct {
	// Network is "none" (the default: no network at all) or "internal": a
	// per-run internal network (no route out), which the disconnect fault
	// can cut.
	Network string
}

// Report is the agent's report file (a report: block): copied out of the
// sandbox when the agent reports done, and kept with the run.
type Report struct {
	Path     string // absolute and clean, under /workspace
	MaxBytes int64  // the largest report kept; DefaultReportMaxBytes
}

// DefaultReportMaxBytes is the largest report kept when the scenario's
// report: sets no max_bytes: 1 MiB.
const DefaultReportMaxBytes = 1 << 20

// Limits bound a run.
type Limits struct {
	Timeout     time.Duration // wall-clock; DefaultTimeout
	Horizon     time.Duration // virtual; DefaultHorizon
	MaxAttempts int           // 1..MaxAttemptsLimit; DefaultMaxAttempts
	Recovery    time.Duration // virtual; 0: the goal only has to hold at the end
	Approval    time.Duration // real time an approve policy waits for a person; DefaultApproval
}

// Reflect turns the reflection loop on (a reflect: block).
type Reflect struct {
	Replays int // isolated replays of a failing attempt; DefaultReplays
	Max     int // reflections a run may open; DefaultReflections
}

// Gate policies.
const (
	PolicyAllow   = "allow"   // the effect goes on
	PolicyVerify  = "verify"  // guarded by reflection: held while one runs, denied when it gave up
	PolicyApprove = "approve" // held until a person approves or denies it, at most limits.approval
	PolicyDeny    = "deny"    // never executed
)

// GateRule is one gate policy: effects whose kind matches the glob Kinds
// (path.Match syntax) get Policy.
type GateRule struct {
	Kinds  string
	Policy string
}

// Parse validates a scenario file and returns it with defaults applied. file names the input in
// error messages ("" reads as "<scenario>") and anchors relative binary paths (a file starting
// with "builtin:" may not use one). Parse does no I/O: it does not check that a binary or image exists.
//
// Every problem found is reported with its position: one problem as an *Error, more as an
// ErrorList sorted by position. Checks run in this order, and a stage that cannot run on what
// the previous one produced is skipped: text (size, UTF-8) and YAML syntax; the document is one
// mapping; values are JSON-compatible, no duplicate keys; apiVersion; the JSON Schema
// (SchemaJSON); then faults, durations, agents, env keys, invariants (listed once; which exist is
// the harness's to check), the llm block and seed.
func Parse(file string, data []byte) (*Scenario, error) {
	sc, err := parse(file, data)
	if err != nil {
		return nil, err
	}
	return sc, nil
}

// parse is Parse, but it also returns what it could read of a file with problems: a scenario
// that may be incomplete, never to be run (see Validate). It is nil when there is nothing to
// read: the text is not a YAML mapping, or it is of another apiVersion.
func parse(file string, data []byte) (*Scenario, error) {
	if file == "" {
		file = "<scenario>"
	}
	sink := &errorSink{file: file}
	t := parseYAML(data, sink)
	if t == nil {
		return nil, sink.result()
	}
	root, _ := t.root.(map[string]any)
	if v, ok := root["apiVersion"].(string); ok && v != APIVersion {
		n := t.at["/apiVersion"].value
		sink.addAt("/apiVersion", n.Line, n.Column, "apiVersion: unsupported version %q; this overnight reads %s", v, APIVersion)
		return nil, sink.result()
	}
	validateSchema(t, sink)
	b := builder{file: file, data: data, t: t, sink: sink}
	sc := b.build(root)
	sc.Source = file
	sc.Raw = bytes.Clone(data)
	sc.positions = t.positions()
	return sc, sink.result()
}

// Load reads and parses the scenario file at path.
func Load(path string) (*Scenario, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// readFile reads the scenario file at path, up to one byte more than MaxFileSize (which Parse
// then refuses).
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("load scenario %s: no such file (give the path of a scenario .yaml file or a built-in scenario's name): %w", path, err)
		}
		return nil, fmt.Errorf("load scenario %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("load scenario %s: %w", path, err)
	}
	return data, nil
}

// BuiltinMap is a convenient source of built-in scenarios for Resolve, a map from name to
// scenario file: Resolve(arg, m.Lookup, m.Names()).
type BuiltinMap map[string][]byte

// Lookup returns the scenario file of the built-in scenario name.
func (m BuiltinMap) Lookup(name string) ([]byte, bool) {
	data, ok := m[name]
	return data, ok
}

// Names lists the built-in scenarios, sorted.
func (m BuiltinMap) Names() []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Resolve finds a scenario by what a user typed (`overnight run NAME|PATH`). Something that looks
// like a path — it contains a path separator or ends in .yaml or .yml — is loaded as a file;
// otherwise a regular file of that name in the working directory wins, and then builtin(name),
// parsed with Source "builtin:NAME". builtin may be nil; builtinNames (used only in messages)
// lists the built-in scenarios. The caller supplies both so that this package need not import
// scenarios/builtin. When neither a file nor a built-in exists, the error wraps
// ErrUnknownScenario and lists builtinNames.
func Resolve(nameOrPath string, builtin func(name string) ([]byte, bool), builtinNames []string) (*Scenario, error) {
	file, data, err := locate(nameOrPath, builtin, builtinNames)
	if err != nil {
		return nil, err
	}
	return Parse(file, data)
}

// locate finds what Resolve parses: the file name for messages, and its bytes.
func locate(nameOrPath string, builtin func(name string) ([]byte, bool), builtinNames []string) (string, []byte, error) {
	if nameOrPath == "" {
		return "", nil, &unknownScenarioError{msg: "no scenario given: name a built-in scenario or a scenario file" + builtinList(builtinNames)}
	}
	ext := strings.ToLower(filepath.Ext(nameOrPath))
	isFile := strings.ContainsRune(nameOrPath, '/') || strings.ContainsRune(nameOrPath, filepath.Separator) || ext == ".yaml" || ext == ".yml"
	if fi, err := os.Stat(nameOrPath); err == nil && fi.Mode().IsRegular() {
		isFile = true
	}
	if isFile {
		data, err := readFile(nameOrPath)
		return nameOrPath, data, err
	}
	if builtin != nil {
		if data, ok := builtin(nameOrPath); ok {
			return BuiltinPrefix + nameOrPath, data, nil
		}
	}
	return "", nil, &unknownScenarioError{msg: fmt.Sprintf("no built-in scenario %q and no file %q", nameOrPath, nameOrPath) + builtinList(builtinNames)}
}

func builtinList(names []string) string {
	if len(names) == 0 {
		return "; there are no built-in scenarios"
	}
	return "; built-in scenarios: " + strings.Join(names, ", ")
}

// unknownScenarioError keeps Resolve's message as written while matching ErrUnknownScenario.
type unknownScenarioError struct{ msg string }

func (e *unknownScenarioError) Error() string { return e.msg }
func (e *unknownScenarioError) Unwrap() error { return ErrUnknownScenario }

// SelectAgent returns the agent to run: the default agent for "", else the named variant. An
// unknown name is an error wrapping ErrUnknownAgent that lists the variants.
func (s *Scenario) SelectAgent(name string) (AgentSpec, error) {
	if name == "" {
		return s.Agent, nil
	}
	if a, ok := s.Agents[name]; ok {
		return a, nil
	}
	if len(s.Agents) == 0 {
		return AgentSpec{}, fmt.Errorf("%w %q: scenario %s declares no variants (agents:); leave out --agent to run its default agent", ErrUnknownAgent, name, s.Name)
	}
	names := make([]string, 0, len(s.Agents))
	for n := range s.Agents {
		names = append(names, n)
	}
	slices.Sort(names)
	return AgentSpec{}, fmt.Errorf("%w %q in scenario %s; variants: %s (or leave out --agent for the default agent)", ErrUnknownAgent, name, s.Name, strings.Join(names, ", "))
}
