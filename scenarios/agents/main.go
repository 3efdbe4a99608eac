package agents

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/overnight-dev/overnight/sandbox/agent"
)

// Exit codes of a built-in agent.
const (
	exitOK     = 0 // the agent finished its work (whatever outcome it reported)
	exitFailed = 1 // the agent failed: its error is on stderr
	exitUsage  = 2 // bad arguments, or no harness to talk to (not in a sandbox)
	exitFenced = 3 // a newer attempt owns the run: this one stopped
)

// runMain is the part every built-in agent's Main shares: it parses args
// into fs (the agent's own flags; fs's name prefixes its messages on
// stderr), connects to the harness from the environment the sandbox
// provides (agent.FromEnv), runs body and turns its error into the exit
// code. Signals are the caller's: ctx ends on SIGTERM (see cmd/overnight).
func runMain(ctx context.Context, fs *flag.FlagSet, args []string, stderr io.Writer, body func(context.Context, *agent.Client) error) int {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	c, err := agent.FromEnv()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return exitUsage
	}
	if err := body(ctx, c); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		if errors.Is(err, agent.ErrFenced) {
			return exitFenced
		}
		return exitFailed
	}
	return exitOK
}
