// Package agents holds the example agents of the built-in scenarios. They
// are compiled into the overnight binary and run inside the sandbox as
// `/overnight agent NAME ARGS`, so a user needs no Go toolchain to run the
// built-in scenarios. Each talks to the harness only through the agent SDK
// (sandbox/agent), exactly as a user's agent would.
package agents

import (
	"context"
	"io"
	"sort"
)

// Main is an example agent's entry point; it returns the process exit code.
type Main func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// Builtins maps the names usable as `agent: {builtin: NAME}` to their mains.
var builtins = map[string]Main{
	"deployer":   Deployer,
	"maintainer": Maintainer,
	"loadgen":    Loadgen,
	"optimizer":  Optimizer,
}

// Lookup returns the built-in agent called name.
func Lookup(name string) (Main, bool) {
	m, ok := builtins[name]
	return m, ok
}

// Names lists the built-in agents, sorted.
func Names() []string {
	out := make([]string, 0, len(builtins))
	for n := range builtins {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
