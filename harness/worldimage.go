package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// worldDataPath is where an image world's data dir is mounted inside its
// container (OVERNIGHT_WORLD_DATA).
const worldDataPath = "/data"

// worldServicePrefix starts the service name of an image world
// ("world.cloud"), which tells the janitor whose log a leftover's output
// goes to.
const worldServicePrefix = "world."

// imageWorlds are the image worlds this harness started: one service
// container per run (sandbox.Services: on Docker, the default bridge with
// the port published on the host's loopback, which no agent's sandbox
// reaches), its data dir <state>/worlds/<name>-<run id>/data mounted at
// /data, its output appended to world.log beside it when it stops, started
// again on its data when it is found dead.
type imageWorlds struct {
	h *Harness

	mu   sync.Mutex
	runs map[string]*imageWorld // by run id; never removed (a world stopped may be started again)
}

// imageWorld is one run's image world.
type imageWorld struct {
	mu  sync.Mutex // one start, stop or kill at a time
	w   scenarios.World
	cur *worldContainer // nil: not running
}

// worldContainer is one container of an image world.
type worldContainer struct {
	svc  sandbox.Service
	base string
	done chan struct{} // closed once it exited (or is gone)
	code int           // its exit code, once done
}

// exited says how it ended, once done.
func (c *worldContainer) exited() string {
	return fmt.Sprintf("its container exited (code %d)", c.code)
}

func (h *Harness) imageWorlds() *imageWorlds {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.images == nil {
		h.images = &imageWorlds{h: h, runs: map[string]*imageWorld{}}
	}
	return h.images
}

func (iw *imageWorlds) entry(runID string, w scenarios.World) *imageWorld {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	e := iw.runs[runID]
	if e == nil {
		e = &imageWorld{w: w}
		iw.runs[runID] = e
	}
	return e
}

// holds reports whether this harness runs run runID's image world now:
// the janitor leaves it alone even before (and after) the run's drive.
func (iw *imageWorlds) holds(runID string) bool {
	iw.mu.Lock()
	e := iw.runs[runID]
	iw.mu.Unlock()
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cur != nil
}

// worldService is the service name of an image world.
func worldService(w scenarios.World) string {
	name := w.Name
	if name == "" {
		name = "world"
	}
	return worldServicePrefix + name
}

// ensure returns the base URL of run runID's image world, starting its
// container (again) if it is not running, and waiting until it answers
// describe.
func (iw *imageWorlds) ensure(ctx context.Context, runID string, w scenarios.World) (string, error) {
	e := iw.entry(runID, w)
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.cur; c != nil {
		select {
		case <-c.done:
			iw.h.log.Warn("the run's image world died: starting it again on its data", "run", runID, "image", w.Image, "exit", c.code)
			iw.retire(ctx, runID, e, c.exited())
		default:
			return c.base, nil
		}
	}
	return iw.start(ctx, runID, e)
}

// start starts e's container for run runID and waits for describe.
// e.mu is held.
func (iw *imageWorlds) start(ctx context.Context, runID string, e *imageWorld) (string, error) {
	h, w := iw.h, e.w
	b, err := h.backend(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: world %s: %w", ErrWorldUnreachable, w.Label(), err)
	}
	services, ok := b.(sandbox.Services)
	if !ok {
		return "", fmt.Errorf("%w: world %s: the %s sandbox backend runs no service containers (it lacks the %s capability), and an image world is one",
			ErrWorldUnreachable, w.Label(), b.Type().Name, sandbox.CapServices)
	}
	dir := worldDir(h.state, runID, w)
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return "", fmt.Errorf("world %s: make its data dir: %w", w.Label(), err)
	}
	port := w.Port
	if port == 0 {
		port = scenarios.DefaultWorldPort
	}
	env := map[string]string{}
	for k, v := range w.Env {
		env[k] = v
	}
	env[EnvWorldAddr] = "0.0.0.0:" + strconv.Itoa(port)
	env[EnvWorldData] = worldDataPath
	logPath := filepath.Join(dir, "world.log")
	appendLog(logPath, fmt.Sprintf("--- overnight: starting image %s for run %s at %s (port %d)\n", w.Image, runID, time.Now().UTC().Format(time.RFC3339), port))
	svc, err := services.StartService(ctx, sandbox.ServiceSpec{
		RunID: runID, Name: worldService(w), Image: w.Image, Env: env, Port: port,
		// As the harness's own user, so that the data dir stays the
		// harness's to read, move and remove.
		User:  fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()),
		Binds: map[string]string{worldDataPath: data},
	})
	if err != nil {
		if errors.Is(err, sandbox.ErrImageNotFound) {
			return "", fmt.Errorf("world %s: %w", w.Label(), err)
		}
		return "", fmt.Errorf("%w: world %s: start its container: %w", ErrWorldUnreachable, w.Label(), err)
	}
	c := &worldContainer{svc: svc, base: "http://" + svc.Addr(), done: make(chan struct{})}
	e.cur = c
	go func() {
		c.code, _ = svc.Wait(context.Background()) // until it exits, or is removed
		close(c.done)
	}()
	if err := remote.WaitDescribe(ctx, c.base, worldStartTimeout, c.done, c.exited); err != nil {
		iw.retire(ctx, runID, e, "it did not answer describe")
		return "", fmt.Errorf("%w: world %s did not answer describe at %s within %s: %w (its log: %s%s)",
			ErrWorldUnreachable, w.Label(), c.base, worldStartTimeout, err, logPath, tail(logPath))
	}
	return c.base, nil
}

// retire removes e's container, its output appended to the world's log
// first. e.mu is held.
func (iw *imageWorlds) retire(ctx context.Context, runID string, e *imageWorld, why string) {
	c := e.cur
	if c == nil {
		return
	}
	e.cur = nil
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	keepServiceLog(ctx, iw.h.log, filepath.Join(worldDir(iw.h.state, runID, e.w), "world.log"), c.svc, why)
	if err := c.svc.Remove(ctx); err != nil {
		iw.h.log.Warn("remove the run's image world", "run", runID, "container", c.svc.ID(), "err", err)
	}
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
	}
}

// keepServiceLog appends what a service container (an image world, an
// image MCP server) wrote to the log at path, with a line saying why it
// stopped.
func keepServiceLog(ctx context.Context, log *slog.Logger, path string, sb sandbox.Sandbox, why string) {
	stdout, stderr, err := sb.Logs(ctx)
	if err != nil {
		log.Warn("read the output of a service container", "container", sb.ID(), "err", err)
	}
	var b strings.Builder
	b.Write(stdout)
	if len(stderr) > 0 {
		b.WriteString("--- stderr:\n")
		b.Write(stderr)
	}
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "--- overnight: container %.12s removed at %s: %s\n", sb.ID(), time.Now().UTC().Format(time.RFC3339), why)
	appendLog(path, b.String())
}

// appendLog appends text to the log at path, best effort.
func appendLog(path, text string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(text)
}

// stop ends run runID's image world, if this harness runs one: SIGTERM,
// then removal (SIGKILL) after a grace of 5 s. Its data stays.
func (iw *imageWorlds) stop(ctx context.Context, runID string) {
	iw.mu.Lock()
	e := iw.runs[runID]
	iw.mu.Unlock()
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.cur
	if c == nil {
		return
	}
	iw.retire(ctx, runID, e, terminate(ctx, c.svc, c.done, c.exited))
}

// terminate asks a service container to stop (SIGTERM) and waits for it
// (closed done) 5 s at most; it says why it stopped, for its log.
func terminate(ctx context.Context, svc sandbox.Service, done <-chan struct{}, exited func() string) string {
	select {
	case <-done:
		return exited()
	default:
	}
	_ = svc.Signal(ctx, "SIGTERM")
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	case <-ctx.Done():
	}
	return "stopped by the harness"
}

// stopAll ends every image world this harness runs.
func (iw *imageWorlds) stopAll() {
	iw.mu.Lock()
	ids := make([]string, 0, len(iw.runs))
	for id := range iw.runs {
		ids = append(ids, id)
	}
	iw.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() { defer wg.Done(); iw.stop(ctx, id) }()
	}
	wg.Wait()
}

// killWorld SIGKILLs run runID's image world at once (the world-crash
// fault) and waits until its container is seen dead; it is started again
// when next reached.
func (iw *imageWorlds) killWorld(ctx context.Context, runID string) error {
	iw.mu.Lock()
	e := iw.runs[runID]
	iw.mu.Unlock()
	if e == nil {
		return errors.New("no image world is running for the run")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.cur
	if c == nil {
		return errors.New("no image world is running for the run")
	}
	if err := c.svc.Signal(ctx, "SIGKILL"); err != nil {
		return fmt.Errorf("kill the run's image world: %w", err)
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kill the run's image world: not seen dead: %w", ctx.Err())
	}
}
