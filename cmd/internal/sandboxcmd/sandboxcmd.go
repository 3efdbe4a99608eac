// Package sandboxcmd is the sandbox side of the overnight binaries: the
// subcommands that run inside a sandbox — `init` (PID 1), `pause` (PID 1 of
// a network-namespace holder), `probe` (what the sandbox conformance kit
// runs) and `agent NAME` (the built-in agents). Both mains dispatch them
// through Run: the full `overnight` CLI, so a user with only that binary
// can still inject it, and the slim `overnight-sandbox`, which links
// nothing else so that it starts in a fraction of the time.
//
// It must stay light: whatever it imports runs its package init() in every
// sandbox start (no harness, no cobra, no scenario schema).
package sandboxcmd

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/overnight-dev/overnight/sandbox/initproc"
	"github.com/overnight-dev/overnight/sandbox/sandboxtest/probe"
	"github.com/overnight-dev/overnight/scenarios/agents"
)

// ExitError is the exit code of a command line it cannot run (the CLI's
// exit code 3).
const ExitError = 3

// Commands are the sandbox-side subcommands Run dispatches.
var Commands = []string{"init", "pause", "probe", "agent"}

// Run runs args when args[0] is a sandbox-side subcommand, with its argv
// untouched (no flag parsing here), and returns its exit code and true;
// otherwise it returns 0, false and the caller parses args itself.
func Run(args []string, stdout, stderr io.Writer) (code int, ok bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case "init":
		rest := args[1:]
		if len(rest) > 0 && rest[0] == "--" {
			rest = rest[1:]
		}
		return initproc.Main(rest), true
	case "pause":
		return initproc.Pause(), true
	case "probe":
		return probe.Main(args[1:]), true
	case "agent":
		return agent(args[1:], stdout, stderr), true
	}
	return 0, false
}

// agent runs the built-in agent args[0] with the rest of args.
func agent(args []string, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		fmt.Fprintf(stderr, "overnight agent: name a built-in agent (%s)\n", strings.Join(agents.Names(), ", "))
		return ExitError
	}
	main, ok := agents.Lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "overnight agent: no built-in agent %q (built-in agents: %s)\n", args[0], strings.Join(agents.Names(), ", "))
		return ExitError
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return main(ctx, args[1:], stdout, stderr)
}
