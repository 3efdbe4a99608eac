package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/overnight-dev/overnight/sandbox"
)

// Type is the Docker backend's type: a local Docker engine named by the
// environment (DOCKER_HOST, ...), connected to when the backend is opened.
// Its sandboxes can be frozen (docker pause), cut from their run's network
// (network disconnect), exec'd into, started ahead as standbys, and it runs
// service containers.
var Type = sandbox.Type{
	Name:         "docker",
	Summary:      "a local Docker engine (API 1.41 or later): containers, named volumes, internal bridge networks",
	Capabilities: []sandbox.Capability{sandbox.CapFreeze, sandbox.CapLink, sandbox.CapExec, sandbox.CapServices, sandbox.CapCopyOut, sandbox.CapStandby},
	Open:         Open,
}

// Open connects to the engine the environment names and opens a backend
// for cfg.StateDir.
func Open(ctx context.Context, cfg sandbox.Config) (sandbox.Backend, error) {
	cli, err := Connect(ctx)
	if err != nil {
		return nil, err
	}
	return NewBackend(cli, cfg), nil
}

// Using is the Docker backend type over api, a client (or a test's
// wrapper of one) the caller holds: opening it connects to nothing.
func Using(api API) sandbox.Type {
	t := Type
	t.Open = func(_ context.Context, cfg sandbox.Config) (sandbox.Backend, error) { return NewBackend(api, cfg), nil }
	return t
}

// Backend is the Docker backend: sandbox.Backend over an Engine, with a
// pool of warm network namespaces (NetPool) and the images it made in this
// process remembered.
type Backend struct {
	eng *Engine
	cfg sandbox.Config

	mu     sync.Mutex
	images map[imageKey]string // sandbox images made by this process (see image)
	pool   *NetPool            // network-namespace holders; nil until Warm
}

var (
	_ sandbox.Backend     = (*Backend)(nil)
	_ sandbox.Warmer      = (*Backend)(nil)
	_ sandbox.ImageReaper = (*Backend)(nil)
	_ sandbox.Services    = (*Backend)(nil)
)

// NewBackend returns the Docker backend over api for cfg.StateDir.
func NewBackend(api API, cfg sandbox.Config) *Backend {
	if cfg.StateDir == "" {
		cfg.StateDir = sandbox.DefaultStateDir
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	eng := New(api, Options{StateHash: sandbox.StateHash(cfg.StateDir), Logger: cfg.Logger, KeepVolume: cfg.KeepWorkspace})
	return &Backend{eng: eng, cfg: cfg, images: map[imageKey]string{}}
}

// Engine is the engine the backend drives, for what the contract does not
// cover (its tests, image removal).
func (b *Backend) Engine() *Engine { return b.eng }

// Type implements sandbox.Backend.
func (b *Backend) Type() sandbox.Type { return Type }

// imageKey is what the sandbox image of a spec depends on, as far as this
// process can see without reading the binaries again: their size and
// modification time.
type imageKey struct {
	spec  ImageSpec
	stats string
}

// image is the sandbox image for spec, made once per process for each
// distinct input (the reflection loop starts many isolated runs of one
// agent: hashing its binaries again for each would cost ~100 ms).
func (b *Backend) image(ctx context.Context, spec ImageSpec) (string, error) {
	var stats []string
	for _, f := range []string{spec.InitBinary, spec.AgentBinary} {
		if f == "" {
			continue
		}
		fi, err := os.Stat(f)
		if err != nil {
			stats = nil
			break
		}
		stats = append(stats, fmt.Sprintf("%s:%d:%d", f, fi.Size(), fi.ModTime().UnixNano()))
	}
	key := imageKey{spec, fmt.Sprint(stats)}
	b.mu.Lock()
	img, ok := b.images[key]
	b.mu.Unlock()
	if ok && stats != nil {
		return img, nil
	}
	img, err := b.eng.EnsureImage(ctx, spec)
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	b.images[key] = img
	b.mu.Unlock()
	return img, nil
}

// initImage is the sandbox image of the init binary alone: what built-in
// agents run from, what seeds an agent image's workspace, and what the
// network-namespace holders run.
func (b *Backend) initImage(ctx context.Context) (string, error) {
	if b.cfg.InitBinary == "" {
		return "", fmt.Errorf("%w: the backend was opened without an init binary (sandbox.Config.InitBinary)", sandbox.ErrInvalidSpec)
	}
	return b.image(ctx, ImageSpec{InitBinary: b.cfg.InitBinary})
}

// Prepare implements sandbox.Backend: a built-in agent runs from the init's
// sandbox image, an agent binary from an image built around both (once
// per distinct content), an agent's own image as it is, under the init
// bind-mounted at InitPath.
func (b *Backend) Prepare(ctx context.Context, agent sandbox.Agent) (sandbox.Image, error) {
	if agent.Image != "" {
		if agent.Builtin != "" || agent.Binary != "" {
			return sandbox.Image{}, fmt.Errorf("%w: an agent is exactly one of builtin, binary and image", sandbox.ErrInvalidSpec)
		}
		cfg, err := b.eng.InspectAgentImage(ctx, agent.Image)
		if err != nil {
			return sandbox.Image{}, err
		}
		return sandbox.PlanImage(agent, cfg)
	}
	img, err := sandbox.BuiltCommand(agent)
	if err != nil {
		return sandbox.Image{}, err
	}
	if b.cfg.InitBinary == "" {
		return sandbox.Image{}, fmt.Errorf("%w: the backend was opened without an init binary (sandbox.Config.InitBinary)", sandbox.ErrInvalidSpec)
	}
	if img.Ref, err = b.image(ctx, ImageSpec{InitBinary: b.cfg.InitBinary, AgentBinary: agent.Binary}); err != nil {
		return sandbox.Image{}, err
	}
	return img, nil
}

// WorkspaceName is the workspace volume of a run.
func WorkspaceName(runID string) string { return "overnight-ws-" + runID }

// Start implements sandbox.Backend. A sandbox without a network joins a
// warm network namespace when the pool has one ready (see NetPool), and
// gets one of its own when that holder turns out dead.
func (b *Backend) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("start sandbox of run %s, attempt %d: %w", spec.RunID, spec.Attempt, err)
	}
	cs := ContainerSpec{
		RunID: spec.RunID, Attempt: spec.Attempt, Image: spec.Image.Ref, Cmd: spec.Image.Cmd, Env: spec.Env,
		SocketDir: spec.SocketDir, Limits: spec.Limits, User: spec.User, Labels: spec.Labels,
	}
	if spec.Image.Own {
		seed, err := b.initImage(ctx)
		if err != nil {
			return nil, err
		}
		cs.Entrypoint = []string{sandbox.InitPath, "init", "--"}
		cs.InitBinary, cs.SeedImage, cs.WorkingDir = b.cfg.InitBinary, seed, spec.Image.WorkingDir
	}
	if spec.Workspace {
		cs.Workspace = WorkspaceName(spec.RunID)
	}
	if spec.Network {
		name, err := b.eng.EnsureNetwork(ctx, spec.RunID)
		if err != nil {
			return nil, err
		}
		cs.Network = name
	}
	pool := b.currentPool()
	if cs.Network == "" {
		cs.NetNS = pool.Take()
	}
	for {
		c, err := b.eng.Create(ctx, cs)
		if err != nil {
			pool.Return(cs.NetNS)
			return nil, err
		}
		box := &box{b: b, id: c.ID, holder: cs.NetNS, network: cs.Network}
		err = b.eng.Start(ctx, c.ID)
		if err == nil {
			return box, nil
		}
		if cs.NetNS == "" || pool.Alive(ctx, cs.NetNS) {
			// It failed for its own sake: it is not started, and goes.
			return nil, errors.Join(err, box.Remove(ctx))
		}
		// The holder did not serve (it died): this sandbox gets a namespace
		// of its own instead.
		b.cfg.Logger.Warn("start sandbox in a warm network namespace", "holder", cs.NetNS, "err", err)
		if rerr := b.eng.Remove(ctx, c.ID); rerr != nil {
			return nil, errors.Join(err, rerr)
		}
		pool.Discard(cs.NetNS)
		cs.NetNS = ""
	}
}

// Release implements sandbox.Backend: the run's service containers, its
// workspace volume and its network.
func (b *Backend) Release(ctx context.Context, runID string) error {
	left, err := b.eng.List(ctx, runID)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range left {
		errs = append(errs, b.eng.Remove(ctx, c.ID))
	}
	errs = append(errs, b.eng.RemoveVolume(ctx, WorkspaceName(runID)), b.eng.RemoveNetwork(ctx, NetworkName(runID)))
	return errors.Join(errs...)
}

// List implements sandbox.Backend.
func (b *Backend) List(ctx context.Context) ([]sandbox.Leftover, error) {
	cs, err := b.eng.List(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.Leftover, 0, len(cs))
	for _, c := range cs {
		out = append(out, sandbox.Leftover{ID: c.ID, RunID: c.RunID, Attempt: c.Attempt, State: c.State, Service: c.Service})
	}
	return out, nil
}

// Attach implements sandbox.Backend.
func (b *Backend) Attach(ctx context.Context, id string) (sandbox.Sandbox, error) {
	info, err := b.eng.api.ContainerInspect(ctx, id)
	if err != nil {
		return nil, wrap("attach to sandbox", id, err)
	}
	box := &box{b: b, id: info.ID}
	if info.NetworkSettings != nil {
		if run := info.Config.Labels[sandbox.LabelRun]; run != "" {
			if _, ok := info.NetworkSettings.Networks[NetworkName(run)]; ok {
				box.network = NetworkName(run)
			}
		}
	}
	return box, nil
}

// Reap implements sandbox.Backend: network-namespace holders a dead
// process left (this one's pool's are spared), then the dead runs'
// sandboxes, volumes and networks.
func (b *Backend) Reap(ctx context.Context, live func(runID string) bool) ([]string, error) {
	_, herr := b.eng.ReapNetHolders(ctx, b.currentPool().ID())
	removed, err := b.eng.Reap(ctx, live)
	return removed, errors.Join(herr, err)
}

// ReapAll implements sandbox.Backend.
func (b *Backend) ReapAll(ctx context.Context) ([]string, error) { return b.eng.ReapAll(ctx) }

// ReapImages implements sandbox.ImageReaper: the init binary's own image
// is kept.
func (b *Backend) ReapImages(ctx context.Context, all bool) ([]string, error) {
	var keep []string
	if b.cfg.InitBinary != "" {
		if ref, err := b.eng.ImageRef(ctx, ImageSpec{InitBinary: b.cfg.InitBinary}); err == nil {
			keep = append(keep, ref)
		}
	}
	return b.eng.ReapImages(ctx, all, keep...)
}

// Close implements sandbox.Backend: the pool's holders go.
func (b *Backend) Close(ctx context.Context) error {
	return b.currentPool().Close(ctx)
}

// Warm implements sandbox.Warmer: n network namespaces kept ready.
func (b *Backend) Warm(n int) {
	if p := b.netPool(context.Background()); p != nil {
		p.Warm(n)
	}
}

// Warmed implements sandbox.Warmer.
func (b *Backend) Warmed() int { return b.currentPool().Idle() }

// netPool is the pool of network-namespace holders, made on first use
// from the init's sandbox image. Nil when it cannot be made: sandboxes
// then get namespaces of their own.
func (b *Backend) netPool(ctx context.Context) *NetPool {
	if p := b.currentPool(); p != nil {
		return p
	}
	img, err := b.initImage(ctx)
	if err != nil {
		b.cfg.Logger.Warn("no network namespace holders: the init's image", "err", err)
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pool == nil {
		b.pool = b.eng.NewNetPool(img)
	}
	return b.pool
}

// currentPool is the pool if one was made (nil: none; a nil pool hands out
// no holder).
func (b *Backend) currentPool() *NetPool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pool
}

// Pool is the backend's pool of network-namespace holders (nil before
// Warm), for its tests.
func (b *Backend) Pool() *NetPool { return b.currentPool() }
