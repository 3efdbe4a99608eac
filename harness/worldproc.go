package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// The environment a command world is started with (docs/world-protocol.md).
const (
	// EnvWorldAddr is the HOST:PORT the world must listen on.
	EnvWorldAddr = "OVERNIGHT_WORLD_ADDR"
	// EnvWorldData is a directory for the world's durable state, kept
	// across the world's restarts and the run's resumes.
	EnvWorldData = "OVERNIGHT_WORLD_DATA"
)

// worldStartTimeout bounds how long a command world may take to answer
// describe after it starts.
const worldStartTimeout = 30 * time.Second

// worldProcs are the command worlds this harness started: one process per
// run, in <state>/worlds/<name>-<run id>/ (data/, world.log, world.pid),
// tied to the harness's life (it dies with the harness: Pdeathsig), and
// restarted on its data dir when it is found dead.
type worldProcs struct {
	state string
	log   *slog.Logger

	mu    sync.Mutex
	procs map[string]*worldProc // by run id
}

type worldProc struct {
	cmd  *exec.Cmd
	base string
	done chan struct{} // closed when the process has exited
}

func (h *Harness) worldProcs() *worldProcs {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.procs == nil {
		h.procs = &worldProcs{state: h.state, log: h.log, procs: map[string]*worldProc{}}
	}
	return h.procs
}

// worldDir is the directory of run runID's command world.
func worldDir(state, runID string, w scenarios.World) string {
	name := w.Name
	if name == "" {
		name = "world"
	}
	return filepath.Join(state, "worlds", name+"-"+runID)
}

// ensure returns the base URL of run runID's command world, starting it
// (again) if it is not running, and waiting until it answers describe.
func (p *worldProcs) ensure(ctx context.Context, runID string, w scenarios.World) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if wp := p.procs[runID]; wp != nil {
		select {
		case <-wp.done:
			p.log.Warn("the run's command world died: starting it again on its data", "run", runID)
		default:
			return wp.base, nil
		}
	}
	dir := worldDir(p.state, runID, w)
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return "", fmt.Errorf("world %s: make its data dir: %w", w.Label(), err)
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return "", fmt.Errorf("world %s: %w", w.Label(), err)
	}
	expand := func(s string) string {
		return os.Expand(s, func(v string) string {
			switch v {
			case EnvWorldAddr:
				return addr
			case EnvWorldData:
				return data
			}
			return "$" + v
		})
	}
	args := make([]string, len(w.Command))
	for i, a := range w.Command {
		args[i] = expand(a)
	}
	logPath := filepath.Join(dir, "world.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", fmt.Errorf("world %s: open its log: %w", w.Label(), err)
	}
	fmt.Fprintf(logf, "--- overnight: starting %q for run %s at %s on %s\n", w.Command, runID, time.Now().UTC().Format(time.RFC3339), addr)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = w.Dir
	cmd.Env = worldEnv(w.Env, addr, data)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return "", fmt.Errorf("%w: world %s: start: %w", ErrWorldUnreachable, w.Label(), err)
	}
	wp := &worldProc{cmd: cmd, base: "http://" + addr, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(wp.done)
	}()
	_ = os.WriteFile(filepath.Join(dir, "world.pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	if err := remote.WaitDescribe(ctx, wp.base, worldStartTimeout, wp.done, func() string { return fmt.Sprintf("the process exited (%v)", wp.cmd.ProcessState) }); err != nil {
		killGroup(wp, 0)
		return "", fmt.Errorf("%w: world %s did not answer describe at %s within %s: %w (its log: %s%s)",
			ErrWorldUnreachable, w.Label(), wp.base, worldStartTimeout, err, logPath, tail(logPath))
	}
	p.procs[runID] = wp
	return wp.base, nil
}

// worldEnv is a command world's environment: the harness's own, without
// its OVERNIGHT_ variables, then the scenario's, then the world's address
// and data dir.
func worldEnv(extra map[string]string, addr, data string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OVERNIGHT_") {
			env = append(env, kv)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return append(env, EnvWorldAddr+"="+addr, EnvWorldData+"="+data)
}

// stop ends run runID's command world, if this harness started one:
// SIGTERM to its process group, SIGKILL after grace.
func (p *worldProcs) stop(runID string) {
	p.mu.Lock()
	wp := p.procs[runID]
	delete(p.procs, runID)
	p.mu.Unlock()
	if wp != nil {
		killGroup(wp, 5*time.Second)
	}
}

// stopAll ends every command world this harness started.
func (p *worldProcs) stopAll() {
	p.mu.Lock()
	procs := p.procs
	p.procs = map[string]*worldProc{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, wp := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); killGroup(wp, 5*time.Second) }()
	}
	wg.Wait()
}

// killGroup ends wp's process group: SIGTERM, then SIGKILL after grace (at
// once with no grace), and waits for the process to be reaped.
func killGroup(wp *worldProc, grace time.Duration) {
	pid := wp.cmd.Process.Pid
	if grace > 0 {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-wp.done:
			return
		case <-time.After(grace):
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	select {
	case <-wp.done:
	case <-time.After(10 * time.Second):
	}
}

// killWorld kills run runID's command world at once (the world-crash
// fault); it is started again when next reached.
func (p *worldProcs) killWorld(runID string) error {
	p.mu.Lock()
	wp := p.procs[runID]
	p.mu.Unlock()
	if wp == nil {
		return errors.New("no command world is running for the run")
	}
	killGroup(wp, 0)
	return nil
}

// freeLoopbackAddr is a loopback address with a port free now.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// tail is the end of a log file, for an error: "; ends: ...".
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 800 {
		b = b[len(b)-800:]
	}
	return "; it ends: " + string(bytes.TrimSpace(b))
}

// reapStaleWorlds kills the command worlds and stdio MCP servers a dead
// harness left running in the state dir — a world.pid (server.pid) whose
// process still has that world's (server's) data dir in its environment —
// but those this harness runs. It returns how
// many it killed.
func (h *Harness) reapStaleWorlds() (int, error) {
	mine := map[int]bool{}
	h.mu.Lock()
	if h.procs != nil {
		h.procs.mu.Lock()
		for _, wp := range h.procs.procs {
			mine[wp.cmd.Process.Pid] = true
		}
		h.procs.mu.Unlock()
	}
	mcp := h.mcp
	h.mu.Unlock()
	if mcp != nil {
		for _, pid := range mcp.pids() {
			mine[pid] = true
		}
	}
	dirs, err := filepath.Glob(filepath.Join(h.state, "worlds", "*", "world.pid"))
	if err != nil {
		return 0, err
	}
	servers, err := filepath.Glob(filepath.Join(h.state, "mcp", "*", "server.pid"))
	if err != nil {
		return 0, err
	}
	dirs = append(dirs, servers...)
	n := 0
	for _, pidFile := range dirs {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 1 || mine[pid] {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue // gone
		}
		want := EnvWorldData + "=" + filepath.Join(filepath.Dir(pidFile), "data")
		if filepath.Base(pidFile) == "server.pid" {
			want = EnvMCPData + "=" + filepath.Join(filepath.Dir(pidFile), "data") // a stdio MCP server
		}
		if !bytes.Contains(env, append([]byte(want), 0)) {
			continue // the pid is another process's now
		}
		if syscall.Kill(-pid, syscall.SIGKILL) == nil || syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n, nil
}
