package overnighttest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/suite"
	"github.com/overnight-dev/overnight/reflect"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/scenarios/agents"
)

// releaseTimeout bounds the cleanup after a run, which runs even when the
// caller's context is cancelled.
const releaseTimeout = time.Minute

// withHarness opens a harness as the overnight CLI does (the reflection
// extension, the built-in agents) on the configured state dir or a
// temporary one, calls fn with it and the command that starts overnight
// on that state dir, then closes it and removes what it leaves: with a
// temporary state dir, every container, volume and network labelled with
// it, and the dir.
func (c *config) withHarness(ctx context.Context, fn func(h *harness.Harness, command string) error) (err error) {
	bin, err := c.initBinaryPath()
	if err != nil {
		return err
	}
	dir, temp := c.stateDir, c.stateDir == ""
	if temp {
		if dir, err = os.MkdirTemp("", "overnighttest-"); err != nil {
			return fmt.Errorf("make a state dir: %w", err)
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	ext, err := reflect.New(reflect.Options{Logger: c.logger})
	if err != nil {
		return errors.Join(err, removeTemp(dir, temp))
	}
	opts := harness.Options{StateDir: dir, InitBinary: bin, Sandbox: c.backend, Logger: c.logger, Extension: ext,
		BuiltinAgents: agents.Names()}
	if c.progress != nil {
		opts.Progress = c.progress
	}
	h, err := harness.Open(ctx, opts)
	if err != nil {
		return errors.Join(err, removeTemp(dir, temp))
	}
	defer func() { err = errors.Join(err, release(ctx, h, temp)) }()
	command := suite.Command(dir)
	if temp {
		command = suite.Command("") // the dir is gone after the run: a reproduction starts afresh
	}
	return fn(h, command)
}

// release closes h and removes what its runs left behind: the dead runs'
// containers of a kept state dir (as `overnight gc` does); everything
// labelled with a temporary one, and the dir.
func release(ctx context.Context, h *harness.Harness, temp bool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	dir := h.StateDir()
	var errs []error
	if !temp {
		if _, err := h.GC(ctx, false, false); err != nil {
			errs = append(errs, fmt.Errorf("remove the leftover containers of state dir %s: %w", dir, err))
		}
	}
	if err := h.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close state dir %s: %w", dir, err))
	}
	if temp {
		// Nothing of the dir is live now: the backend removes all it holds.
		if b, err := h.Backend().Open(ctx, sandbox.Config{StateDir: dir}); err != nil {
			errs = append(errs, err)
		} else {
			if _, err := b.Reap(ctx, nil); err != nil {
				errs = append(errs, fmt.Errorf("remove the sandboxes, volumes and networks of state dir %s: %w", dir, err))
			}
			errs = append(errs, b.Close(ctx))
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove state dir: %w", err))
		}
	}
	return errors.Join(errs...)
}

// removeTemp removes a temporary state dir that no harness opened.
func removeTemp(dir string, temp bool) error {
	if !temp {
		return nil
	}
	return os.RemoveAll(dir)
}
