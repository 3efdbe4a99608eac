package agents

import (
	"context"
	"encoding/json"
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

// resumeInto reads the run's last checkpoint into st, whose shape what
// names in an error, and returns its step (0, st untouched: none yet).
func resumeInto(ctx context.Context, c *agent.Client, what string, st any) (int, error) {
	cp, err := c.Resume(ctx)
	if err != nil {
		return 0, fmt.Errorf("resume: %w", err)
	}
	if cp.Seq == 0 {
		return 0, nil
	}
	if err := json.Unmarshal(cp.State, st); err != nil {
		return 0, fmt.Errorf("checkpoint %d holds no %s state: %w", cp.Seq, what, err)
	}
	return cp.Step, nil
}

// checkpointAt writes st as the checkpoint of step; a naive agent, which
// never read its checkpoint back, ignores the conflict of writing behind
// a newer one.
func checkpointAt(ctx context.Context, c *agent.Client, naive bool, step int, st any) error {
	if _, err := c.Checkpoint(ctx, step, st); err != nil && !(naive && errors.Is(err, agent.ErrConflict)) {
		return fmt.Errorf("checkpoint step %d: %w", step, err)
	}
	return nil
}
