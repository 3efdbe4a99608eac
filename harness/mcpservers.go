package harness

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world/mcpworld"
)

// EnvMCPURL is the agent's variable holding the gateway's MCP endpoint,
// http://127.0.0.1:7070/v1/mcp/<token> through the sandbox's relay.
const EnvMCPURL = "OVERNIGHT_MCP_URL"

// EnvMCPData is set, in a stdio MCP server's environment, to its data
// directory: the reaper (gc) knows a server a dead harness left by it.
const EnvMCPData = "OVERNIGHT_MCP_DATA"

// mcpServers are the MCP servers of the runs this harness drives: one
// connection per run and server, made when the run starts and kept for
// its drive. A stdio server is started by its connection, outside the
// sandbox, in <state>/mcp/<server>-<run id>/ (data/, server.log with its
// stderr, server.pid), tied to the harness's life (Pdeathsig), and started
// again on its data when a call finds it dead. An image server is a
// container beside the run's sandboxes (mcpimage.go), with the same
// directory (data/ mounted in it, server.log with its output).
type mcpServers struct {
	h     *Harness
	state string
	log   *slog.Logger

	mu    sync.Mutex
	conns map[string]map[string]*mcpConn // by run id, then server name

	heldMu sync.Mutex
	held   map[string]int // image servers' containers running or starting, by run id
}

type mcpConn struct {
	conn *mcpworld.Conn
	stop func() // ends what the connection started (a container); nil: nothing

	mu  sync.Mutex
	cmd *exec.Cmd     // the stdio server's process as last started (nil: a URL or image server)
	svc *mcpContainer // the image server's container now (nil: none, or not an image server)

	// crash, when set, SIGKILLs the stdio server as its next answer
	// arrives, which is then lost (an mcp-crash fault; see crashingConn).
	crash atomic.Bool
}

func (h *Harness) mcpServers() *mcpServers {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mcp == nil {
		h.mcp = &mcpServers{h: h, state: h.state, log: h.log, conns: map[string]map[string]*mcpConn{}, held: map[string]int{}}
	}
	return h.mcp
}

// mcpDir is the directory of run runID's stdio or image server s.
func mcpDir(state, runID string, s scenarios.MCPServer) string {
	return filepath.Join(state, "mcp", s.Name+"-"+runID)
}

// conn is run runID's connection to server s, made (the server started
// and its tools listed) if there is none yet.
func (p *mcpServers) conn(ctx context.Context, runID string, s scenarios.MCPServer) (*mcpworld.Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.conns[runID][s.Name]; c != nil {
		return c.conn, nil
	}
	mc := &mcpConn{}
	cfg := mcpworld.Config{Server: s}
	switch {
	case s.Image != "":
		// Started before the first initialize, so that an image not on
		// the engine is that error (sandbox.ErrImageNotFound).
		if _, err := p.ensureImage(ctx, runID, s, mc); err != nil {
			mc.mu.Lock()
			p.retireImage(ctx, runID, s, mc, "it did not start")
			mc.mu.Unlock()
			return nil, fmt.Errorf("%w: %s: %w", mcpworld.ErrServer, s.Label(), err)
		}
		cfg.Transport = func(ctx context.Context) (mcp.Transport, error) { return p.imageTransport(ctx, runID, s, mc) }
		cfg.Describe = func() string { return p.describeImage(runID, s, mc) }
		mc.stop = func() { p.stopImage(runID, s, mc) }
	case len(s.Command) > 0:
		dir := mcpDir(p.state, runID, s)
		cfg.Transport = func(context.Context) (mcp.Transport, error) { return p.start(runID, s, dir, mc) }
		cfg.Describe = func() string {
			return "its stderr: " + filepath.Join(dir, "server.log") + tail(filepath.Join(dir, "server.log"))
		}
	}
	c, err := mcpworld.Dial(ctx, cfg)
	if err != nil {
		mc.close()
		return nil, err
	}
	mc.conn = c
	if p.conns[runID] == nil {
		p.conns[runID] = map[string]*mcpConn{}
	}
	p.conns[runID][s.Name] = mc
	return c, nil
}

// start starts stdio server s of run runID in dir, for a connection to it.
func (p *mcpServers) start(runID string, s scenarios.MCPServer, dir string, mc *mcpConn) (mcp.Transport, error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, fmt.Errorf("make its data dir: %w", err)
	}
	logPath := filepath.Join(dir, "server.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open its log: %w", err)
	}
	defer logf.Close() // the process has its own copy once started
	fmt.Fprintf(logf, "--- overnight: starting %q for run %s at %s\n", s.Command, runID, time.Now().UTC().Format(time.RFC3339))
	expand := func(v string) string { return strings.ReplaceAll(v, scenarios.MCPDataDir, data) }
	args := make([]string, len(s.Command))
	for i, a := range s.Command {
		args[i] = expand(a)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = s.Dir
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OVERNIGHT_") {
			env = append(env, kv)
		}
	}
	for k, v := range s.Env {
		env = append(env, k+"="+expand(v))
	}
	cmd.Env = append(env, EnvMCPData+"="+data)
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return &startedTransport{CommandTransport: mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, started: func() {
		mc.mu.Lock()
		mc.cmd = cmd
		mc.mu.Unlock()
		_ = os.WriteFile(filepath.Join(dir, "server.pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	}, mc: mc}, nil
}

// startedTransport is a CommandTransport that says when its process
// started.
type startedTransport struct {
	mcp.CommandTransport
	started func()
	mc      *mcpConn
}

func (t *startedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.CommandTransport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.started()
	return &crashingConn{Connection: c, mc: t.mc}, nil
}

// kill ends the stdio server's process group: SIGTERM, then SIGKILL after
// grace (at once with none).
func (mc *mcpConn) kill(grace time.Duration) {
	mc.mu.Lock()
	cmd := mc.cmd
	mc.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	pid := cmd.Process.Pid
	if grace > 0 {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// pid is the stdio server's process id now (0: none).
func (mc *mcpConn) pid() int {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if mc.cmd == nil || mc.cmd.Process == nil {
		return 0
	}
	return mc.cmd.Process.Pid
}

// close ends the connection and the server's process or container.
func (mc *mcpConn) close() {
	done := make(chan struct{})
	go func() {
		if mc.conn != nil {
			_ = mc.conn.Close()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	mc.kill(0)
	if mc.stop != nil {
		mc.stop()
	}
}

// stop ends run runID's MCP servers' connections and processes.
func (p *mcpServers) stop(runID string) {
	p.mu.Lock()
	conns := p.conns[runID]
	delete(p.conns, runID)
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() { defer wg.Done(); c.close() }()
	}
	wg.Wait()
}

// stopAll ends every run's.
func (p *mcpServers) stopAll() {
	p.mu.Lock()
	runs := make([]string, 0, len(p.conns))
	for id := range p.conns {
		runs = append(runs, id)
	}
	p.mu.Unlock()
	for _, id := range runs {
		p.stop(id)
	}
}

// pids are the processes of the stdio servers this harness runs now.
func (p *mcpServers) pids() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for _, byName := range p.conns {
		for _, c := range byName {
			if pid := c.pid(); pid > 0 {
				out = append(out, pid)
			}
		}
	}
	return out
}
