package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// EnvMCPAddr is set, in an image MCP server's container, to the address it
// should listen on: 0.0.0.0:<its port>.
const EnvMCPAddr = "OVERNIGHT_MCP_ADDR"

// mcpServicePrefix starts the service name of an image MCP server
// ("mcp.pay"), which tells the janitor whose log a leftover's output goes
// to.
const mcpServicePrefix = "mcp."

// mcpStartTimeout bounds how long an image server's container may take to
// answer HTTP on its port once started.
const mcpStartTimeout = 30 * time.Second

// mcpContainer is one container of an image MCP server.
type mcpContainer struct {
	svc  sandbox.Service
	url  string        // its streamable HTTP endpoint, as the harness reaches it
	done chan struct{} // closed once it exited (or is gone)
	code int           // its exit code, once done
}

func (c *mcpContainer) exited() string {
	return fmt.Sprintf("its container exited (code %d)", c.code)
}

// imageTransport is the transport to image server s of run runID, its
// container started (again) first if it is not running: a service
// container beside the run's sandboxes (sandbox.Services: on Docker, the
// default bridge with its port published on the host's loopback, which no
// sandbox reaches — a sandbox has no network), its data dir mounted at
// scenarios.MCPImageDataDir, run as the harness's user, its output kept in
// server.log when it is removed.
func (p *mcpServers) imageTransport(ctx context.Context, runID string, s scenarios.MCPServer, mc *mcpConn) (mcp.Transport, error) {
	url, err := p.ensureImage(ctx, runID, s, mc)
	if err != nil {
		return nil, err
	}
	return &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, DisableStandaloneSSE: true}, nil
}

// ensureImage returns the endpoint of image server s of run runID,
// starting its container if none runs, or again if it died.
func (p *mcpServers) ensureImage(ctx context.Context, runID string, s scenarios.MCPServer, mc *mcpConn) (string, error) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if c := mc.svc; c != nil {
		// A connection is made again after the last one broke: the
		// container may be dying (its published port still accepts, and
		// resets), so it answers HTTP first, or is seen dead.
		err := remote.WaitHTTP(ctx, "GET", c.url, mcpStartTimeout, c.done, c.exited, func(int) error { return nil })
		select {
		case <-c.done:
			p.log.Warn("the run's image MCP server died: starting it again on its data", "run", runID, "server", s.Name, "exit", c.code)
			p.retireImage(ctx, runID, s, mc, c.exited())
		default:
			if err != nil {
				return "", fmt.Errorf("its container %.12s does not answer HTTP at %s: %w", c.svc.ID(), c.url, err)
			}
			return c.url, nil
		}
	}
	return p.startImage(ctx, runID, s, mc)
}

// startImage starts image server s's container and waits until it answers
// HTTP at its path. mc.mu is held.
func (p *mcpServers) startImage(ctx context.Context, runID string, s scenarios.MCPServer, mc *mcpConn) (string, error) {
	b, err := p.h.backend(ctx)
	if err != nil {
		return "", err
	}
	services, ok := b.(sandbox.Services)
	if !ok {
		return "", fmt.Errorf("the %s sandbox backend runs no service containers (it lacks the %s capability), and an image MCP server is one", b.Type().Name, sandbox.CapServices)
	}
	dir := mcpDir(p.state, runID, s)
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return "", fmt.Errorf("make its data dir: %w", err)
	}
	env := map[string]string{}
	for k, v := range s.Env {
		env[k] = strings.ReplaceAll(v, scenarios.MCPDataDir, scenarios.MCPImageDataDir)
	}
	env[EnvMCPAddr] = "0.0.0.0:" + strconv.Itoa(s.Port)
	env[EnvMCPData] = scenarios.MCPImageDataDir
	logPath := filepath.Join(dir, "server.log")
	appendLog(logPath, fmt.Sprintf("--- overnight: starting image %s for run %s at %s (port %d, path %s)\n", s.Image, runID, time.Now().UTC().Format(time.RFC3339), s.Port, s.Path))
	p.hold(runID, +1)
	svc, err := services.StartService(ctx, sandbox.ServiceSpec{
		RunID: runID, Name: mcpServicePrefix + s.Name, Image: s.Image, Env: env, Port: s.Port,
		// As the harness's own user, so that the data dir stays the
		// harness's to read, move and remove.
		User:  fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()),
		Binds: map[string]string{scenarios.MCPImageDataDir: data},
	})
	if err != nil {
		p.hold(runID, -1)
		if errors.Is(err, sandbox.ErrImageNotFound) {
			return "", err
		}
		return "", fmt.Errorf("start its container: %w", err)
	}
	c := &mcpContainer{svc: svc, url: "http://" + svc.Addr() + s.Path, done: make(chan struct{})}
	mc.svc = c
	go func() {
		c.code, _ = svc.Wait(context.Background()) // until it exits, or is removed
		close(c.done)
	}()
	// Any HTTP answer at its path says it listens; whether it speaks MCP
	// is for initialize to find out.
	if err := remote.WaitHTTP(ctx, "GET", c.url, mcpStartTimeout, c.done, c.exited, func(int) error { return nil }); err != nil {
		tailText := p.imageTail(ctx, mc)
		p.retireImage(ctx, runID, s, mc, "it did not answer HTTP")
		return "", fmt.Errorf("it did not answer HTTP at %s within %s: %w%s", c.url, mcpStartTimeout, err, tailText)
	}
	return c.url, nil
}

// imageTail is the end of the output of mc's container now, for an error
// ("" when there is none).
func (p *mcpServers) imageTail(ctx context.Context, mc *mcpConn) string {
	c := mc.svc
	if c == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	stdout, stderr, err := c.svc.Logs(ctx)
	if err != nil {
		return ""
	}
	out := strings.TrimSpace(string(stdout) + "\n" + string(stderr))
	if out == "" {
		return ""
	}
	if len(out) > 800 {
		out = out[len(out)-800:]
	}
	return "; its output ends: " + out
}

// describeImage says more about image server s of run runID that failed,
// for errors: the end of its container's output, or of its server.log
// once the container is gone.
func (p *mcpServers) describeImage(runID string, s scenarios.MCPServer, mc *mcpConn) string {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if t := p.imageTail(context.Background(), mc); t != "" {
		return "its container " + mc.svc.svc.ID()[:12] + strings.TrimPrefix(t, ";")
	}
	path := filepath.Join(mcpDir(p.state, runID, s), "server.log")
	return "its log: " + path + tail(path)
}

// retireImage removes mc's container, its output appended to server.log
// first. mc.mu is held.
func (p *mcpServers) retireImage(ctx context.Context, runID string, s scenarios.MCPServer, mc *mcpConn, why string) {
	c := mc.svc
	if c == nil {
		return
	}
	mc.svc = nil
	defer p.hold(runID, -1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	keepServiceLog(ctx, p.log, filepath.Join(mcpDir(p.state, runID, s), "server.log"), c.svc, why)
	if err := c.svc.Remove(ctx); err != nil {
		p.log.Warn("remove the run's image MCP server", "run", runID, "server", s.Name, "container", c.svc.ID(), "err", err)
	}
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
	}
}

// stopImage ends mc's container, if one runs: SIGTERM, then removal
// (SIGKILL) after a grace of 5 s. Its data stays.
func (p *mcpServers) stopImage(runID string, s scenarios.MCPServer, mc *mcpConn) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	c := mc.svc
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p.retireImage(ctx, runID, s, mc, terminate(ctx, c.svc, c.done, c.exited))
}

// hold counts run runID's image servers' containers this harness runs (or
// is starting): the janitor leaves their run alone.
func (p *mcpServers) hold(runID string, n int) {
	p.heldMu.Lock()
	defer p.heldMu.Unlock()
	p.held[runID] += n
	if p.held[runID] <= 0 {
		delete(p.held, runID)
	}
}

// holdsImage reports whether this harness runs (or is starting) a
// container of an image server of run runID.
func (p *mcpServers) holdsImage(runID string) bool {
	p.heldMu.Lock()
	defer p.heldMu.Unlock()
	return p.held[runID] > 0
}
