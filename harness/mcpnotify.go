package harness

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/harness/history"
)

var _ gateway.MCPWatcher = (*run)(nil)

// WatchMCP implements gateway.MCPWatcher: l hears, from now until stop,
// when the tools the agent sees change and when an attempt ends.
func (r *run) WatchMCP(l gateway.MCPListener) (stop func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mcpListeners = append(r.mcpListeners, l)
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.mcpListeners = slices.DeleteFunc(r.mcpListeners, func(x gateway.MCPListener) bool { return x == l })
	}
}

// mcpToolsChangedLocked tells the gateway, under mu, that the tools the
// agent sees changed: it lists them again before it answers anything
// else, and notifies the attempt's MCP sessions.
func (r *run) mcpToolsChangedLocked() {
	for _, l := range r.mcpListeners {
		l.MCPToolsChanged()
	}
}

// mcpAttemptEndedLocked tells the gateway, under mu, that attempt n and
// those before it are over: their MCP sessions close.
func (r *run) mcpAttemptEndedLocked(n int) {
	for _, l := range r.mcpListeners {
		l.MCPAttemptEnded(n)
	}
}

// MCPNotified implements gateway.MCPWatcher: a list_changed notification
// delivered to an agent's MCP client is journaled (EventMCPListChanged),
// with the tools changed as it was sent.
func (r *run) MCPNotified(ctx context.Context, c gateway.Caller, n gateway.MCPNotice) {
	r.mu.Lock()
	defer r.unlock()
	if r.ended {
		return
	}
	lc := history.MCPListChange{Attempt: c.Attempt, Session: n.Session, Stream: n.Stream, Changed: []string{}}
	for _, tool := range slices.Sorted(maps.Keys(r.mcpChanged)) {
		lc.Changed = append(lc.Changed, describeChange(tool, r.mcpChanged[tool]))
	}
	msg := fmt.Sprintf("%s sent to attempt %d's MCP client (%s)", n.Method, c.Attempt, n.Stream)
	if len(lc.Changed) == 0 {
		msg += ": the tools are as the servers list them again"
	} else {
		msg += ": " + strings.Join(lc.Changed, "; ")
	}
	r.event(ctx, history.EventMCPListChanged, msg, lc)
}

// describeChange says how tool is changed, and by which fault.
func describeChange(tool string, ch mcpChange) string {
	var what string
	if ch.Gone {
		what = "gone"
	} else {
		var parts []string
		for _, rn := range ch.Renames {
			parts = append(parts, fmt.Sprintf("%q renamed %q", rn.Old, rn.New))
		}
		for _, name := range ch.Require {
			parts = append(parts, fmt.Sprintf("%q required", name))
		}
		what = "input schema changed: " + strings.Join(parts, ", ")
	}
	if ch.by != "" {
		what += " (" + ch.by + ")"
	}
	return tool + " " + what
}
