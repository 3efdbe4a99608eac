package docker

import (
	"github.com/overnight-dev/overnight/sandbox"

	"context"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/pkg/stdcopy"
)

// ContainerSpec describes one sandbox container: one attempt of one run.
type ContainerSpec struct {
	// RunID is required; it names the container and labels it (LabelRun).
	RunID string
	// Attempt is the attempt number (LabelAttempt); each attempt is a new container.
	Attempt int
	// Image is required: usually the reference EnsureImage returned.
	Image string
	// Cmd is the agent command, e.g. ["/overnight","agent","deployer"]; the image's init runs
	// it. Empty means the image's default command.
	Cmd []string
	// Entrypoint, when set, replaces the image's ENTRYPOINT: for an agent's own image, the
	// init ([InitPath, "init", "--"]) with InitBinary mounted.
	Entrypoint []string
	// WorkingDir, when set, replaces the image's working directory.
	WorkingDir string
	// InitBinary, when set, is the host path of a static overnight binary bind-mounted
	// read-only at InitPath: how an agent's own image runs under the init without an image
	// built on top of it. (The engine must be local: the gateway's socket is a bind mount too.)
	InitBinary string
	// SeedImage, when set with Workspace, is a sandbox image (see EnsureImage) whose
	// WorkspacePath, owned by the sandbox user, seeds the workspace volume when it is created:
	// an agent image without /workspace would otherwise get a volume only root can write.
	SeedImage string
	// Env is the container's whole environment (besides what the image sets): nothing of the
	// host's environment is passed. The harness sets OVERNIGHT_SOCKET, OVERNIGHT_URL and
	// OVERNIGHT_TOKEN here.
	Env map[string]string
	// SocketDir is the host directory (see NewSocketDir) bind-mounted read-write at GatewayDir.
	// Empty means no gateway.
	SocketDir string
	// Workspace, when set, is a named volume mounted at WorkspacePath, created with this run's
	// labels if missing and kept across attempts. Empty means a tmpfs at WorkspacePath that
	// lives and dies with the container.
	Workspace string
	// Limits are the resource limits; zero fields take the defaults.
	Limits sandbox.Limits
	// User is the numeric user:group the agent runs as. Default DefaultUser ("65534:65534").
	// It can never be root: see the hardening in Create.
	User string
	// Labels are extra labels for the container and its workspace volume. The ownership labels
	// (overnight.*) always take the values Create gives them.
	Labels map[string]string
	// Network, when set, is a network made by EnsureNetwork (internal: no route out) the
	// container joins instead of having none, so that a scenario can give its agent peers and
	// the disconnect fault something to cut. Empty means no network at all (the default).
	Network string
	// NetNS, when set, is a holder from a NetPool whose network namespace (loopback only) the
	// sandbox joins instead of the engine making one for it; Network must then be empty. The
	// holder must serve no other sandbox until this one is removed.
	NetNS string
}

// Container is one sandbox container created by an Engine.
type Container struct {
	ID      string
	Name    string
	RunID   string
	Attempt int
	// State is the engine's word for it when listed ("created", "running", "exited", ...);
	// empty from Create.
	State string
	// Service is a service container's name (LabelService); "" for a sandbox.
	Service string
}

// Create creates (but does not start) the sandbox for spec, with the hardening defaults: no
// network (NetworkMode none: loopback only), a read-only root filesystem with a tmpfs /tmp, all
// capabilities dropped, no-new-privileges, a non-root user, memory (without swap), pids and CPU
// limits, restart policy "no", bounded json-file logs, and the ownership labels. Its name is
// "overnight-<run>-<attempt>", sanitised for Docker.
func (e *Engine) Create(ctx context.Context, spec ContainerSpec) (*Container, error) {
	name := ContainerName(spec.RunID, spec.Attempt)
	if err := spec.validate(); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", name, err)
	}
	limits := spec.Limits.WithDefaults()
	user := spec.User
	if user == "" {
		user = sandbox.DefaultUser
	}
	labels := e.labels(spec.RunID, spec.Labels)
	labels[sandbox.LabelAttempt] = strconv.Itoa(spec.Attempt)

	tmpfs := map[string]string{"/tmp": tmpfsOptions(limits.TmpBytes, "", 0o1777)}
	var mounts []mount.Mount
	if spec.SocketDir != "" {
		dir, err := filepath.Abs(spec.SocketDir)
		if err != nil {
			return nil, fmt.Errorf("create sandbox %s: socket dir %s: %w", name, spec.SocketDir, err)
		}
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: dir, Target: sandbox.GatewayDir})
	}
	if spec.InitBinary != "" {
		bin, err := filepath.Abs(spec.InitBinary)
		if err != nil {
			return nil, fmt.Errorf("create sandbox %s: init binary %s: %w", name, spec.InitBinary, err)
		}
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: bin, Target: sandbox.InitPath, ReadOnly: true})
	}
	if spec.Workspace != "" {
		if spec.SeedImage != "" {
			if err := e.seedWorkspace(ctx, spec, e.labels(spec.RunID, spec.Labels)); err != nil {
				return nil, fmt.Errorf("create sandbox %s: %w", name, err)
			}
		} else if _, err := e.api.VolumeCreate(ctx, volume.CreateOptions{Name: spec.Workspace, Labels: e.labels(spec.RunID, spec.Labels)}); err != nil {
			// Creating an existing volume returns it unchanged: one call, no inspect.
			return nil, wrap("create sandbox "+name+": create workspace volume", spec.Workspace, err)
		}
		m := mount.Mount{Type: mount.TypeVolume, Source: spec.Workspace, Target: sandbox.WorkspacePath}
		if spec.SeedImage != "" {
			// The agent's image must not copy its own /workspace (or the one Docker makes
			// for a WorkingDir there, owned by root) over the seeded volume's ownership.
			m.VolumeOptions = &mount.VolumeOptions{NoCopy: true}
		}
		mounts = append(mounts, m)
	} else {
		tmpfs[sandbox.WorkspacePath] = tmpfsOptions(limits.TmpBytes, user, 0o755)
	}

	pids := limits.PIDs
	cfg := &container.Config{
		Image:      spec.Image,
		Entrypoint: spec.Entrypoint,
		Cmd:        spec.Cmd,
		WorkingDir: spec.WorkingDir,
		Env:        envList(spec.Env),
		User:       user,
		Labels:     labels,
	}
	netMode := container.NetworkMode("none")
	switch {
	case spec.Network != "":
		netMode = container.NetworkMode(spec.Network)
	case spec.NetNS != "":
		netMode = container.NetworkMode("container:" + spec.NetNS)
	}
	host := hardenedHost(netMode, "8m", 2, container.Resources{
		Memory:     limits.MemoryBytes,
		MemorySwap: limits.MemoryBytes, // equal to Memory: no swap
		PidsLimit:  &pids,
		NanoCPUs:   limits.NanoCPUs,
	})
	host.Tmpfs, host.Mounts = tmpfs, mounts
	resp, err := e.api.ContainerCreate(ctx, cfg, host, nil, nil, name)
	if err != nil {
		if cerrdefs.IsConflict(err) {
			return nil, fmt.Errorf("create sandbox %s: %w: %w; remove the leftover (Reap, or `overnight gc`) and retry", name, sandbox.ErrNameInUse, err)
		}
		return nil, wrap("create sandbox", name+" from image "+spec.Image, err)
	}
	for _, w := range resp.Warnings {
		e.log.Warn("engine warning creating sandbox", "sandbox", name, "warning", w)
	}
	e.log.Debug("created sandbox", "sandbox", name, "id", resp.ID)
	return &Container{ID: resp.ID, Name: name, RunID: spec.RunID, Attempt: spec.Attempt}, nil
}

func (s ContainerSpec) validate() error {
	switch {
	case s.RunID == "":
		return fmt.Errorf("%w: RunID is required", sandbox.ErrInvalidSpec)
	case s.Image == "":
		return fmt.Errorf("%w: Image is required (see EnsureImage)", sandbox.ErrInvalidSpec)
	case s.Attempt < 0:
		return fmt.Errorf("%w: Attempt %d is negative", sandbox.ErrInvalidSpec, s.Attempt)
	case s.Network != "" && s.NetNS != "":
		return fmt.Errorf("%w: Network and NetNS are both set: a sandbox joins a network or a holder's namespace, not both", sandbox.ErrInvalidSpec)
	}
	if s.User != "" {
		if _, _, ok := sandbox.NumericUser(s.User); !ok {
			return fmt.Errorf("%w: User %q must be a numeric non-root uid:gid, e.g. %q", sandbox.ErrInvalidSpec, s.User, sandbox.DefaultUser)
		}
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("%w: environment variable name %q", sandbox.ErrInvalidSpec, k)
		}
	}
	return nil
}

func tmpfsOptions(size int64, owner string, mode uint32) string {
	opts := fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=%o", size, mode)
	if uid, gid, ok := sandbox.NumericUser(owner); ok {
		opts += fmt.Sprintf(",uid=%d,gid=%d", uid, gid)
	}
	return opts
}

// labels returns the ownership labels for runID on top of extra.
func (e *Engine) labels(runID string, extra map[string]string) map[string]string {
	l := make(map[string]string, len(extra)+4)
	for k, v := range extra {
		l[k] = v
	}
	l[sandbox.LabelManaged] = "true"
	l[sandbox.LabelRun] = runID
	l[sandbox.LabelState] = e.state
	return l
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// ContainerName is the container name of a run's attempt: "overnight-<run>-<attempt>", with
// anything Docker does not accept in a name replaced by "-".
func ContainerName(runID string, attempt int) string {
	run := nameUnsafe.ReplaceAllString(runID, "-")
	if len(run) > 100 {
		run = run[:100]
	}
	return fmt.Sprintf("overnight-%s-%d", run, attempt)
}

// hardenedHost is the HostConfig every container the engine makes shares —
// a sandbox and a network-namespace holder alike: a read-only root, no
// capabilities, no new privileges, no restart, a private IPC namespace,
// json-file logs of at most logFiles files of logSize — with its network
// mode and resources.
func hardenedHost(netMode container.NetworkMode, logSize string, logFiles int, res container.Resources) *container.HostConfig {
	return &container.HostConfig{
		NetworkMode:    netMode,
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		Privileged:     false,
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
		AutoRemove:     false,
		IpcMode:        container.IPCModePrivate,
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{
			"max-size": logSize, "max-file": strconv.Itoa(logFiles),
		}},
		Resources: res,
	}
}

// Start starts a created sandbox.
func (e *Engine) Start(ctx context.Context, id string) error {
	return wrap("start sandbox", id, e.api.ContainerStart(ctx, id, container.StartOptions{}))
}

// Wait blocks until the sandbox is not running and returns its exit code (137 after SIGKILL).
// It returns ErrNotFound if the sandbox is gone, and at once for a created, never-started one.
func (e *Engine) Wait(ctx context.Context, id string) (int, error) {
	respC, errC := e.api.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case resp := <-respC:
		if resp.Error != nil && resp.Error.Message != "" {
			return int(resp.StatusCode), fmt.Errorf("wait for sandbox %s: %s", id, resp.Error.Message)
		}
		return int(resp.StatusCode), nil
	case err := <-errC:
		return 0, wrap("wait for sandbox", id, err)
	case <-ctx.Done():
		return 0, fmt.Errorf("wait for sandbox %s: %w", id, ctx.Err())
	}
}

// Kill sends signal (e.g. "SIGTERM"; "" means SIGKILL) to the sandbox's init, which forwards
// the catchable ones to the agent. ErrNotRunning if it is not running.
func (e *Engine) Kill(ctx context.Context, id, signal string) error {
	if signal == "" {
		signal = "SIGKILL"
	}
	err := e.api.ContainerKill(ctx, id, signal)
	if cerrdefs.IsConflict(err) {
		return fmt.Errorf("kill sandbox %s with %s: %w: %w", id, signal, sandbox.ErrNotRunning, err)
	}
	return wrap("kill sandbox "+id+" with", signal, err)
}

// graceSeconds converts a grace period to the engine's whole seconds, rounding up.
func graceSeconds(grace time.Duration) *int {
	s := 0
	if grace > 0 {
		s = int(math.Ceil(grace.Seconds()))
	}
	return &s
}

// Stop sends SIGTERM (which init forwards to the agent) and SIGKILL after grace, rounded up to
// whole seconds; 0 kills at once. Stopping a stopped sandbox is not an error.
func (e *Engine) Stop(ctx context.Context, id string, grace time.Duration) error {
	return wrap("stop sandbox", id, e.api.ContainerStop(ctx, id, container.StopOptions{Timeout: graceSeconds(grace)}))
}

// Restart stops the sandbox as Stop does and starts the same container again. (A new attempt
// is a new container; this is for faults that restart in place.)
func (e *Engine) Restart(ctx context.Context, id string, grace time.Duration) error {
	return wrap("restart sandbox", id, e.api.ContainerRestart(ctx, id, container.StopOptions{Timeout: graceSeconds(grace)}))
}

// Pause freezes every process of the sandbox.
func (e *Engine) Pause(ctx context.Context, id string) error {
	err := e.api.ContainerPause(ctx, id)
	if cerrdefs.IsConflict(err) {
		return fmt.Errorf("pause sandbox %s: %w: %w", id, sandbox.ErrNotRunning, err)
	}
	return wrap("pause sandbox", id, err)
}

// Unpause thaws a paused sandbox. A sandbox that is not paused (or not
// running) has nothing to thaw: that is not an error.
func (e *Engine) Unpause(ctx context.Context, id string) error {
	err := e.api.ContainerUnpause(ctx, id)
	if err != nil && !cerrdefs.IsNotFound(err) {
		// Engines answer this with different statuses (a 500 on API
		// 1.41): ask the container itself.
		if info, ierr := e.api.ContainerInspect(ctx, id); ierr == nil && (info.State == nil || !info.State.Paused) {
			return nil
		}
	}
	return wrap("unpause sandbox", id, err)
}

// Logs returns what the sandbox wrote so far, stdout and stderr apart, each cut to the last
// Options.LogLimit bytes.
func (e *Engine) Logs(ctx context.Context, id string) (stdout, stderr []byte, err error) {
	rc, err := e.api.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return nil, nil, wrap("read logs of sandbox", id, err)
	}
	defer rc.Close()
	out, errOut := &tailBuffer{max: e.logLimit}, &tailBuffer{max: e.logLimit}
	if _, err := stdcopy.StdCopy(out, errOut, rc); err != nil {
		return out.Bytes(), errOut.Bytes(), fmt.Errorf("read logs of sandbox %s: %w", id, err)
	}
	return out.Bytes(), errOut.Bytes(), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return n, nil
}

// Bytes returns the last max bytes written.
func (t *tailBuffer) Bytes() []byte {
	if len(t.buf) > t.max {
		return t.buf[len(t.buf)-t.max:]
	}
	return t.buf
}

// Remove removes the sandbox, killing it first if needed, with its anonymous volumes (not its
// workspace volume). A missing sandbox is not an error. It finishes even if ctx is cancelled.
func (e *Engine) Remove(ctx context.Context, id string) error {
	ctx, cancel := detached(ctx)
	defer cancel()
	err := e.api.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	switch {
	case err == nil, cerrdefs.IsNotFound(err):
		return nil
	case cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress"):
		return nil // someone else (a concurrent reaper) is removing it
	}
	return wrap("remove sandbox", id, err)
}

// RemoveVolume removes a workspace volume. A missing volume is not an error; one still in use
// is. It finishes even if ctx is cancelled.
func (e *Engine) RemoveVolume(ctx context.Context, name string) error {
	ctx, cancel := detached(ctx)
	defer cancel()
	err := e.api.VolumeRemove(ctx, name, false)
	if err != nil && !cerrdefs.IsNotFound(err) {
		return wrap("remove volume", name, err)
	}
	return nil
}
