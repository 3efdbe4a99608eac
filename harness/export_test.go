package harness

import (
	"context"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/scenarios"
)

// pool is the Docker backend's pool of network-namespace holders (nil:
// none yet, or another backend).
func pool(h *Harness) *docker.NetPool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if b, ok := h.sandbox.(*docker.Backend); ok {
		return b.Pool()
	}
	return nil
}

// NetNSStats is how often this process's sandboxes found a warm network
// namespace ready (tests only).
func NetNSStats(h *Harness) (hits, misses int) { return pool(h).Stats() }

// NetHolders are the holders this process's pool owns.
func NetHolders(h *Harness) []string { return pool(h).Holders() }

// LiveMCP is a run of the counters MCP server (testdata/mcpcounters, a real
// process) served by the real gateway without a container, for specs
// outside the package that plug in an Extension (tests only).
type LiveMCP struct{ lr *liveRun }

// StartLiveMCP starts one on a harness of opts, with mcp.keys and extra
// scenario text (gate:, reflect:).
func StartLiveMCP(keys, extra string, opts Options) *LiveMCP {
	return &LiveMCP{liveMCPRun(countersScenario(countersBinary(), keys, extra), opts)}
}

// Harness is the run's harness.
func (l *LiveMCP) Harness() *Harness { return l.lr.h }

// RunID is the run's id.
func (l *LiveMCP) RunID() string { return l.lr.r.rec.ID }

// Attempt begins the next attempt and returns its token.
func (l *LiveMCP) Attempt() string { return l.lr.attempt() }

// Session connects the SDK's client to the gateway's MCP endpoint.
func (l *LiveMCP) Session(ctx context.Context, token string) *mcp.ClientSession {
	return l.lr.mcpSession(ctx, token)
}

// Counters is the server's own state: its counters.
func (l *LiveMCP) Counters() map[string]int {
	c, _ := l.lr.countersState()
	return c
}

// StartLiveMCPOf starts a LiveMCP of scen (its MCP servers whatever it
// declares: an image server's container, say) on a harness of opts.
func StartLiveMCPOf(scen *scenarios.Scenario, opts Options) *LiveMCP {
	return &LiveMCP{liveMCPRun(scen, opts)}
}

// DataDir is the data dir of the run's MCP server name under the state dir.
func (l *LiveMCP) DataDir(name string) string {
	s, _ := l.lr.r.scen.MCPServer(name)
	return filepath.Join(mcpDir(l.lr.h.state, l.lr.r.rec.ID, s), "data")
}

// Stop ends the run's gateway and closes its harness, as the end of a
// drive does: the run's MCP servers are stopped. The spec's cleanup then
// does nothing more.
func (l *LiveMCP) Stop() {
	l.lr.stop()
	l.lr.stop = func() {}
}

// WithStandbysAhead is opts with runs keeping k standbys ahead, whatever
// their schedule (k 0: as the schedule says).
func WithStandbysAhead(opts Options, k int) Options {
	opts.standbyAhead = k
	return opts
}
