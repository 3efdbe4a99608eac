package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
)

// Backend is where sandboxes run: one implementation per kind of
// infrastructure (sandbox/docker today). The harness calls only this and
// the optional capabilities below. A Backend serves one state directory
// (Config.StateDir): it labels everything it makes with that state's hash
// and reaps only that state's leftovers (but in ReapAll). It is safe for
// concurrent use.
type Backend interface {
	// Type is the backend's type: its name and the capabilities its
	// sandboxes have.
	Type() Type
	// Prepare readies what agent runs from (an image built around the
	// init binary, or the agent's own image, which nothing pulls) and says
	// how to run it. Preparing the same agent twice is cheap.
	Prepare(ctx context.Context, agent Agent) (Image, error)
	// Start creates and starts a sandbox from spec, with the security
	// defaults: no network but loopback (unless spec.Network), a
	// read-only root with a writable /tmp and /workspace, no capabilities,
	// no new privileges, a non-root user, the limits, no restart. The
	// gateway's socket directory is reachable at GatewayDir inside. Start
	// returns ErrNameInUse when a sandbox of the same run and attempt
	// exists already.
	Start(ctx context.Context, spec Spec) (Sandbox, error)
	// Release removes what a run kept across its attempts (its workspace,
	// its network) once the run is finished. Releasing twice is fine.
	Release(ctx context.Context, runID string) error
	// List lists this state directory's sandboxes, of every run, running
	// or not, ordered by run and attempt.
	List(ctx context.Context) ([]Leftover, error)
	// Attach returns a handle on a listed sandbox (an orphan a dead
	// harness left running, whose logs are kept before it is reaped).
	Attach(ctx context.Context, id string) (Sandbox, error)
	// Reap removes this state directory's sandboxes whose run is not live
	// (live(runID) false; nil: none is), and what their runs kept unless
	// Config.KeepWorkspace keeps it. It returns the ids it removed, and
	// every failure joined.
	Reap(ctx context.Context, live func(runID string) bool) ([]string, error)
	// ReapAll removes everything the backend made, whatever its state
	// directory (`overnight gc --all`).
	ReapAll(ctx context.Context) ([]string, error)
	// Close releases what the backend holds (warm sandboxes, connections).
	// Sandboxes already started are not removed.
	Close(ctx context.Context) error
}

// Sandbox is a handle on one started sandbox: one attempt of one run.
type Sandbox interface {
	// ID is the backend's id for it (a container id, a pod name).
	ID() string
	// Wait blocks until the sandbox's init exits and returns its exit
	// code (137 after SIGKILL), or ctx ends. ErrNotFound if it is gone.
	Wait(ctx context.Context) (int, error)
	// Signal sends sig ("SIGTERM", "SIGKILL", ...) to the sandbox's init,
	// which forwards the catchable ones to the agent. ErrNotRunning if it
	// is not running.
	Signal(ctx context.Context, sig string) error
	// Logs returns what the sandbox wrote so far, stdout and stderr apart,
	// each cut to its last bytes (the backend's limit, 4 MiB by default).
	Logs(ctx context.Context) (stdout, stderr []byte, err error)
	// Remove removes the sandbox, killing it first if needed (not what
	// its run keeps: see Backend.Release). Removing a removed sandbox is
	// fine. It finishes even if ctx is cancelled.
	Remove(ctx context.Context) error
}

// Capability names an optional capability of a backend's sandboxes. A
// Type lists the ones its backend has; a fault kind names the ones it
// needs (chaos.Kind.Needs), and a scenario that schedules one on a
// backend without it is refused when it is checked.
type Capability string

// The optional capabilities.
const (
	// CapFreeze: the sandbox implements Freezer (the pause fault).
	CapFreeze Capability = "freeze"
	// CapLink: the sandbox implements LinkCutter (the disconnect fault).
	// A sandbox has a link to cut only on its run's network
	// (Spec.Network).
	CapLink Capability = "link"
	// CapExec: the sandbox implements Execer.
	CapExec Capability = "exec"
	// CapServices: the backend implements Services (service containers
	// for worlds and MCP servers).
	CapServices Capability = "services"
	// CapCopyOut: the sandbox implements Copier (a scenario's report:
	// file, copied out when the agent reports done).
	CapCopyOut Capability = "copy-out"
	// CapStandby: the backend implements Standbys (sandboxes started
	// ahead, their init waiting for an attempt to take them over).
	CapStandby Capability = "standby"
)

// Capabilities lists every optional capability, in a stable order.
func Capabilities() []Capability {
	return []Capability{CapFreeze, CapLink, CapExec, CapServices, CapCopyOut, CapStandby}
}

// Freezer freezes every process of a sandbox, and thaws them.
type Freezer interface {
	Freeze(ctx context.Context) error
	// Thaw thaws a frozen sandbox; one that is not frozen (or not
	// running) has nothing to thaw: that is not an error.
	Thaw(ctx context.Context) error
}

// LinkCutter cuts a sandbox's network link to its run's network, and
// restores it.
type LinkCutter interface {
	CutLink(ctx context.Context) error
	RestoreLink(ctx context.Context) error
	// Linked reports whether the link is up now (a cut whose call failed
	// may have landed all the same).
	Linked(ctx context.Context) (bool, error)
}

// Execer runs a command in a running sandbox, as its user.
type Execer interface {
	Exec(ctx context.Context, cmd []string) (ExecResult, error)
}

// Copier copies a file out of a sandbox, running or exited (until it is
// removed).
type Copier interface {
	// CopyOut returns the contents of the regular file at path, an
	// absolute path inside the sandbox (e.g. /workspace/report.md), at
	// most max bytes. It fails with ErrNotFound if there is no such file,
	// ErrTooLarge if it holds more than max bytes, ErrNotRegular if it is
	// a directory, a device, or a symbolic link that leads out of
	// WorkspacePath (a link inside it is followed), and ErrInvalidSpec if
	// path is not absolute and clean.
	CopyOut(ctx context.Context, path string, max int64) ([]byte, error)
}

// ExecResult is what an exec'd command printed and how it exited.
type ExecResult struct {
	Stdout, Stderr []byte
	ExitCode       int
}

// Services starts service containers: a world or an MCP server that runs
// as an image beside the run's sandboxes, reachable by the harness and
// never by an agent's sandbox. A service of the same run and name still
// there (a dead harness's, or one that exited) is removed and replaced.
type Services interface {
	StartService(ctx context.Context, spec ServiceSpec) (Service, error)
}

// ServiceSpec describes a service container of a run.
type ServiceSpec struct {
	// RunID is required: the service is labelled, reaped and released
	// with its run.
	RunID string
	// Name tells the run's services apart (e.g. the world's or the MCP
	// server's name): letters, digits, '-', '_' and '.'.
	Name string
	// Image is required: an image already on the backend (nothing is
	// pulled), run with its own user and command.
	Image string
	// Cmd, when set, replaces the image's command (CMD).
	Cmd []string
	// Env is the service's environment besides the image's.
	Env map[string]string
	// Port is the TCP port the service listens on inside its container.
	Port int
	// User, when set, runs the service as this user ("uid:gid", or a
	// name the image knows) instead of the image's: say, the harness's
	// own, so that what it writes to Binds stays the harness's.
	User string
	// Binds are host directories mounted read-write into the service:
	// the path inside it -> the host directory (both absolute; the host
	// directory must exist). What the service writes there outlives it.
	Binds map[string]string
}

// Service is a started service container.
type Service interface {
	Sandbox
	// Addr is host:port where the harness reaches the service's Port.
	Addr() string
}

// Standbys starts sandboxes ahead of the attempts that will use them: the
// container is made and started, with everything a run's attempts share
// (the socket dir, the workspace, the limits, the user, the network), and
// its init waits; the attempt that takes it over hands it what differs per
// attempt (the token, the attempt number, the environment), and only then
// does the agent's process start. An agent cannot tell a sandbox taken
// over from one started cold: its environment, mounts, limits, user and
// working directory are the same.
type Standbys interface {
	// StartStandby creates and starts the sandbox of spec with its init
	// waiting. spec.SocketDir is required: the handover goes through it.
	// spec.Env is what every attempt shares; TakeOver adds the rest. A
	// standby is labelled, listed and reaped as any sandbox of its run and
	// attempt (ErrNameInUse as Start). Removing one never taken over is
	// how it is given up.
	StartStandby(ctx context.Context, spec Spec) (Standby, error)
}

// Standby is a sandbox started ahead, its agent not yet started.
type Standby interface {
	Sandbox
	// TakeOver hands the waiting init what attempt h.Attempt adds, and it
	// starts the agent; it returns once the handover is delivered, not
	// when the agent runs. ErrInvalidSpec when h is for another attempt
	// than the standby's spec, or a second handover.
	TakeOver(ctx context.Context, h Handover) error
}

// Warmer keeps sandboxes' costly parts ready ahead (Docker: network
// namespaces), for a caller about to start many: a suite.
type Warmer interface {
	// Warm keeps n ready in the background; it returns at once.
	Warm(n int)
	// Warmed is how many are ready now.
	Warmed() int
}

// ImageReaper removes the images a backend made that nothing uses any more
// (`overnight gc --images`).
type ImageReaper interface {
	// ReapImages removes this state directory's unused images (with all,
	// every unused image the backend made, whatever its state directory),
	// but the current init binary's. It returns the references removed.
	ReapImages(ctx context.Context, all bool) ([]string, error)
}

// Type is a kind of backend: what it is called, the capabilities its
// sandboxes have — known without opening it, so that a scenario can be
// checked with no engine — and how to open one for a state directory.
type Type struct {
	// Name is what --backend and the scenario call it ("docker").
	Name string `json:"name"`
	// Summary is one line for a person.
	Summary string `json:"summary"`
	// Capabilities its sandboxes (and it) have, beyond the contract.
	Capabilities []Capability `json:"capabilities"`
	// Open opens a backend for cfg.StateDir. It may connect to its
	// engine: a caller that needs none (a command that only reads runs)
	// does not open one.
	Open func(ctx context.Context, cfg Config) (Backend, error) `json:"-"`
}

// Has reports whether the type has capability c.
func (t Type) Has(c Capability) bool { return slices.Contains(t.Capabilities, c) }

// Config is what a backend is opened with.
type Config struct {
	// StateDir is the state directory it serves (absolute). Its hash
	// (StateHash) labels everything the backend makes.
	StateDir string
	// InitBinary is the static linux/amd64 overnight binary every sandbox
	// runs as its init (and that built-in agents run from).
	InitBinary string
	// Logger receives diagnostics. Default: discard.
	Logger *slog.Logger
	// KeepWorkspace, if set, says which dead runs' workspaces Reap must
	// keep: runs that are not live but can still be resumed. Default:
	// none are kept.
	KeepWorkspace func(runID string) bool
}

// ErrUnknownBackend: no backend type of that name is registered.
var ErrUnknownBackend = errors.New("unknown sandbox backend")

// Registry is the set of backend types a program knows, by name.
// Registration is explicit (no init side effects).
type Registry struct {
	types map[string]Type
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{types: map[string]Type{}} }

// Register adds a type; a type without a name or Open, or a name
// registered twice, panics (a programming error).
func (r *Registry) Register(t Type) {
	if t.Name == "" || t.Open == nil {
		panic("sandbox: a backend type needs a Name and Open")
	}
	if _, dup := r.types[t.Name]; dup {
		panic("sandbox: backend type " + t.Name + " registered twice")
	}
	r.types[t.Name] = t
}

// Lookup returns the type called name, or ErrUnknownBackend naming the
// ones there are.
func (r *Registry) Lookup(name string) (Type, error) {
	if t, ok := r.types[name]; ok {
		return t, nil
	}
	return Type{}, fmt.Errorf("%w %q (backends: %s)", ErrUnknownBackend, name, strings.Join(r.Names(), ", "))
}

// Names lists the registered types' names, sorted.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.types))
	for n := range r.types {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Types lists the registered types, sorted by name.
func (r *Registry) Types() []Type {
	out := make([]Type, 0, len(r.types))
	for _, n := range r.Names() {
		out = append(out, r.types[n])
	}
	return out
}
