package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Labels everything a backend makes carries (containers, pods, volumes,
// networks), and paths inside a sandbox.
const (
	LabelManaged = "overnight.managed" // "true"
	LabelRun     = "overnight.run"     // run id
	LabelState   = "overnight.state"   // StateHash(state dir)
	LabelAttempt = "overnight.attempt" // attempt number (sandboxes only)

	// GatewayDir is where the gateway's socket directory is mounted inside a sandbox.
	GatewayDir = "/run/overnight"
	// SocketName is the gateway socket's conventional file name inside SocketDir.
	SocketName = "gateway.sock"
	// GatewaySocket is the gateway socket's path inside a sandbox (OVERNIGHT_SOCKET).
	GatewaySocket = GatewayDir + "/" + SocketName
	// InitPath is where the harness's own binary sits in every sandbox; it runs as PID 1.
	InitPath = "/overnight"
	// AgentPath is where an agent binary (Agent.Binary) is put.
	AgentPath = "/agent"
	// WorkspacePath is the agent's writable workspace (kept across a run's attempts with
	// Spec.Workspace, else scratch).
	WorkspacePath = "/workspace"
	// RelayURL is where initproc serves the gateway on the sandbox's loopback (OVERNIGHT_URL).
	RelayURL = "http://127.0.0.1:7070"
	// DefaultUser is the numeric user and group agents run as (nobody:nogroup).
	DefaultUser = "65534:65534"
	// DefaultStateDir is the state directory a backend serves when Config.StateDir is empty.
	DefaultStateDir = ".overnight"
)

// The errors callers branch on; every backend wraps them.
var (
	// ErrUnavailable: the backend's engine could not be reached (opening it, or any call that
	// lost the connection).
	ErrUnavailable = errors.New("cannot reach the sandbox backend")
	// ErrNotFound: the sandbox, image, file or volume is gone.
	ErrNotFound = errors.New("not found")
	// ErrNotRunning: the operation needs a running sandbox (signal, freeze).
	ErrNotRunning = errors.New("sandbox is not running")
	// ErrNameInUse: a sandbox of the same run and attempt exists already (a leftover of an
	// earlier harness; Reap or Remove it first).
	ErrNameInUse = errors.New("sandbox name already in use")
	// ErrInvalidSpec: an Agent, Spec or ServiceSpec is incomplete or inconsistent, or the agent
	// cannot run as given; nothing was created.
	ErrInvalidSpec = errors.New("invalid sandbox spec")
	// ErrImageNotFound: an agent's own image is not there, and nothing is pulled. It is also
	// ErrNotFound.
	ErrImageNotFound = fmt.Errorf("agent image %w", ErrNotFound)
	// ErrTooLarge: a file CopyOut was asked for is larger than the caller's limit.
	ErrTooLarge = errors.New("file too large")
	// ErrNotRegular: a file CopyOut was asked for is not a regular file: a directory, a
	// device, or a symbolic link that leads out of WorkspacePath.
	ErrNotRegular = errors.New("not a regular file")
	// ErrUnsupported: the backend lacks an optional capability asked of it.
	ErrUnsupported = errors.New("not supported by this sandbox backend")
)

// StateHash identifies a state directory in labels: the hex SHA-256 of its absolute, cleaned
// path, first 16 characters.
func StateHash(stateDir string) string {
	p := filepath.Clean(stateDir)
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	sum := sha256.Sum256([]byte(p))
	return hex.EncodeToString(sum[:])[:16]
}

// Agent is what runs in a sandbox, as a scenario names it: exactly one of
// Builtin, Binary and Image.
type Agent struct {
	// Builtin is a built-in agent of the init binary (`overnight agent NAME`).
	Builtin string
	// Binary is the host path of a static linux/amd64 agent binary.
	Binary string
	// Image is an agent's own image, already on the backend; it runs as it is, under the
	// init the backend injects.
	Image string
	// Command and Args, as Kubernetes and Compose mean them (see AgentCommand).
	Command, Args []string
}

// Image is an agent prepared to run: what Backend.Prepare returns and a
// Spec starts.
type Image struct {
	// Ref is the backend's reference of what runs (an image id, a tag).
	Ref string
	// Own marks an agent's own image: the backend injects the init into it.
	Own bool
	// Cmd is the agent's command line, which the init runs.
	Cmd []string
	// WorkingDir is where it runs ("" : WorkspacePath).
	WorkingDir string
	// Env holds defaults the scenario's environment may override (HOME is WorkspacePath
	// unless the agent's own image sets it).
	Env map[string]string
	// Warning, when set, is something a person should know about how it runs (how
	// agent.args are read for this image).
	Warning string
}

// Limits are a sandbox's resource limits. Zero fields take the defaults.
type Limits struct {
	// MemoryBytes caps memory, tmpfs contents included; swap is disabled. Default 256 MiB.
	MemoryBytes int64
	// PIDs caps the number of processes and threads. Default 256.
	PIDs int64
	// NanoCPUs caps CPU time, in billionths of a CPU. Default 1e9 (one CPU).
	NanoCPUs int64
	// TmpBytes caps the tmpfs at /tmp (and at /workspace without Spec.Workspace).
	// Default 64 MiB.
	TmpBytes int64
}

// Default limits.
const (
	DefaultMemoryBytes = 256 << 20
	DefaultPIDs        = 256
	DefaultNanoCPUs    = 1_000_000_000
	DefaultTmpBytes    = 64 << 20
)

// WithDefaults returns l with its zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.PIDs <= 0 {
		l.PIDs = DefaultPIDs
	}
	if l.NanoCPUs <= 0 {
		l.NanoCPUs = DefaultNanoCPUs
	}
	if l.TmpBytes <= 0 {
		l.TmpBytes = DefaultTmpBytes
	}
	return l
}

// Spec describes one sandbox: one attempt of one run.
type Spec struct {
	// RunID is required; it names the sandbox and labels it (LabelRun).
	RunID string
	// Attempt is the attempt number (LabelAttempt); each attempt is a new sandbox.
	Attempt int
	// Image is required: what Prepare returned.
	Image Image
	// Env is the sandbox's whole environment besides what the image sets: nothing of the
	// host's environment is passed. The harness sets OVERNIGHT_SOCKET, OVERNIGHT_URL and
	// OVERNIGHT_TOKEN here.
	Env map[string]string
	// SocketDir is the host directory of the gateway's socket (see NewSocketDir), mounted
	// read-write at GatewayDir. Empty means no gateway.
	SocketDir string
	// Workspace keeps WorkspacePath across the run's attempts, until Release; false gives
	// each sandbox a scratch one that dies with it.
	Workspace bool
	// Limits are the resource limits; zero fields take the defaults.
	Limits Limits
	// User is the numeric user:group the agent runs as. Default DefaultUser. Never root.
	User string
	// Labels are extra labels; the ownership labels (overnight.*) always take the values the
	// backend gives them.
	Labels map[string]string
	// Network puts the sandbox on its run's network (no route out: the run's sandboxes and
	// services reach each other, nothing beyond), made on first use and removed by Release,
	// instead of no network at all (the default): a scenario's `sandbox: {network:
	// internal}`, which the disconnect fault cuts.
	Network bool
}

// Validate checks what every backend requires of a spec.
func (s Spec) Validate() error {
	switch {
	case s.RunID == "":
		return fmt.Errorf("%w: RunID is required", ErrInvalidSpec)
	case s.Image.Ref == "":
		return fmt.Errorf("%w: Image is required (see Backend.Prepare)", ErrInvalidSpec)
	case s.Attempt < 0:
		return fmt.Errorf("%w: Attempt %d is negative", ErrInvalidSpec, s.Attempt)
	}
	if s.User != "" {
		if _, _, ok := NumericUser(s.User); !ok {
			return fmt.Errorf("%w: User %q must be a numeric non-root uid:gid, e.g. %q", ErrInvalidSpec, s.User, DefaultUser)
		}
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("%w: environment variable name %q", ErrInvalidSpec, k)
		}
	}
	return nil
}

// NumericUser parses "uid:gid"; uid 0 is refused.
func NumericUser(user string) (uid, gid int, ok bool) {
	u, g, found := strings.Cut(user, ":")
	if !found {
		return 0, 0, false
	}
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	return uid, gid, err1 == nil && err2 == nil && uid > 0 && gid >= 0
}

// Leftover is a sandbox a backend lists: of a run, live or dead.
type Leftover struct {
	ID      string
	RunID   string
	Attempt int
	// State is the backend's word for it ("created", "running", "exited", ...).
	State string
	// Service is the name of a service container (ServiceSpec.Name); ""
	// for an attempt's sandbox.
	Service string
}

// ImageConfig is what an agent's own image says it runs.
type ImageConfig struct {
	// ID is the image's content id (sha256:...): a sandbox runs exactly the image that was
	// inspected, even if its tag moves.
	ID         string
	Entrypoint []string // ENTRYPOINT
	Cmd        []string // CMD
	WorkingDir string   // WORKDIR ("" when unset)
	Env        []string // ENV, KEY=VALUE
}

// HasEnv reports whether the image's ENV sets key.
func (c ImageConfig) HasEnv(key string) bool {
	for _, kv := range c.Env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			return true
		}
	}
	return false
}

// AgentCommand is the command a sandbox of img runs, with command and
// args as Kubernetes and Compose mean them: command replaces the image's
// ENTRYPOINT, args its CMD, and a command without args drops the CMD. So
// an image with no ENTRYPOINT runs args as its whole command, as Docker
// does. note, when not empty, says how the meaning args had in earlier
// versions (the whole command, in place of the entrypoint) differs for
// this image, and how to get it. An empty command is an error: the
// image has nothing to run.
func AgentCommand(ref string, command, args []string, img ImageConfig) (cmd []string, note string, err error) {
	switch {
	case command != nil:
		cmd = append(append(cmd, command...), args...)
	case args != nil:
		cmd = append(append(cmd, img.Entrypoint...), args...)
		if len(img.Entrypoint) > 0 {
			note = fmt.Sprintf("agent.args follow the ENTRYPOINT %q of image %s, as in Kubernetes and Compose: the agent runs %q. (Earlier versions of overnight ran the args alone, in place of the entrypoint: to do that, set them as agent.command. To keep this meaning without this warning, give the entrypoint as agent.command.)", img.Entrypoint, ref, cmd)
		}
	default:
		cmd = append(append(cmd, img.Entrypoint...), img.Cmd...)
	}
	if len(cmd) == 0 {
		return nil, "", fmt.Errorf("%w: image %s has no ENTRYPOINT or CMD, and the scenario gives no agent.command: nothing to run; set agent.command (and args) to the agent's command line", ErrInvalidSpec, ref)
	}
	return cmd, note, nil
}

// PlanImage is how an agent's own image runs, for any backend: its
// command (AgentCommand), its working directory (the image's, else
// WorkspacePath) and HOME (WorkspacePath unless the image sets it).
func PlanImage(agent Agent, cfg ImageConfig) (Image, error) {
	cmd, note, err := AgentCommand(agent.Image, agent.Command, agent.Args, cfg)
	if err != nil {
		return Image{}, err
	}
	img := Image{Ref: cfg.ID, Own: true, Cmd: cmd, WorkingDir: cfg.WorkingDir, Env: map[string]string{}, Warning: note}
	if img.WorkingDir == "" {
		img.WorkingDir = WorkspacePath
	}
	if !cfg.HasEnv("HOME") {
		img.Env["HOME"] = WorkspacePath
	}
	return img, nil
}

// BuiltCommand is the command of an agent that runs from an image built
// around the init binary: a built-in agent (`/overnight agent NAME ARGS`)
// or an agent binary (`/agent ARGS`), with HOME WorkspacePath.
func BuiltCommand(agent Agent) (Image, error) {
	img := Image{Env: map[string]string{"HOME": WorkspacePath}}
	switch {
	case agent.Builtin != "" && agent.Binary == "" && agent.Image == "":
		img.Cmd = append([]string{InitPath, "agent", agent.Builtin}, agent.Args...)
	case agent.Binary != "" && agent.Builtin == "" && agent.Image == "":
		img.Cmd = append([]string{AgentPath}, agent.Args...)
	default:
		return Image{}, fmt.Errorf("%w: an agent is exactly one of builtin, binary and image", ErrInvalidSpec)
	}
	return img, nil
}
