package harness

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/overnight-dev/overnight/scenarios"
)

// mcpShadowable says why a shadow of scen's MCP servers cannot be built
// (nil: it can, or there are none). A shadow of an MCP server is a fresh
// instance of it — its command started anew on a data dir of its own —
// restored by replaying the real run's mutating calls (mcpworld.Redo):
// which only a stdio server declared replayable: true allows. A server
// reached at a URL cannot be started anew, and the real one is never
// touched, so a reflection on a run of it cannot verify anything.
func mcpShadowable(scen *scenarios.Scenario) error {
	if scen.ReplaysMCP() {
		return fmt.Errorf("%w: the run's MCP servers are answered from run %s's recording, which cannot answer the new calls of a verification: reflection cannot verify", ErrNoShadow, scen.MCP.Replay)
	}
	for _, s := range scen.MCPServers() {
		switch {
		case s.URL != "":
			return fmt.Errorf("%w: MCP server %s is reached at %s, and the harness cannot start a fresh instance of it to verify on (the real one is never touched): reflection cannot verify", ErrNoShadow, s.Name, s.URL)
		case !s.Replayable:
			return fmt.Errorf("%w: MCP server %s is not declared replayable: true (a fresh instance of it, restored by replaying the run's calls, to verify on), and the real one is never touched: reflection cannot verify", ErrNoShadow, s.Name)
		}
	}
	return nil
}

// stopMCPShadows stops isolated run runID's fresh instances of MCP
// servers and removes their data dirs.
func (h *Harness) stopMCPShadows(runID string) {
	h.mu.Lock()
	p := h.mcp
	h.mu.Unlock()
	if p == nil {
		return
	}
	p.stop(runID)
	// Run ids are unique, and a server's dir ends with its run's id.
	dirs, _ := filepath.Glob(filepath.Join(h.state, "mcp", "*-"+runID))
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			h.log.Warn("remove the data of a shadow MCP server", "dir", d, "err", err)
		}
	}
}
