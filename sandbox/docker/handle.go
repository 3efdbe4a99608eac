package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/overnight-dev/overnight/sandbox"
)

// box is a started sandbox: sandbox.Sandbox, with every optional
// capability the Docker backend has.
type box struct {
	b       *Backend
	id      string
	holder  string // the NetPool holder whose namespace it joined ("" : none)
	network string // the run's network it is on ("" : none)

	removed   sync.Once
	removeErr error
}

var (
	_ sandbox.Sandbox    = (*box)(nil)
	_ sandbox.Freezer    = (*box)(nil)
	_ sandbox.LinkCutter = (*box)(nil)
	_ sandbox.Execer     = (*box)(nil)
)

func (c *box) ID() string { return c.id }

func (c *box) Wait(ctx context.Context) (int, error) { return c.b.eng.Wait(ctx, c.id) }

func (c *box) Signal(ctx context.Context, sig string) error { return c.b.eng.Kill(ctx, c.id, sig) }

func (c *box) Logs(ctx context.Context) ([]byte, []byte, error) { return c.b.eng.Logs(ctx, c.id) }

// Remove removes the container; a holder it joined goes back to the pool
// once it is gone (or is given up, when the removal failed: it may still be
// joined).
func (c *box) Remove(ctx context.Context) error {
	c.removed.Do(func() {
		c.removeErr = c.b.eng.Remove(ctx, c.id)
		pool := c.b.currentPool()
		if c.removeErr != nil {
			pool.Discard(c.holder)
			return
		}
		pool.Return(c.holder)
	})
	return c.removeErr
}

// CopyOut reads a regular file out of the container, running or exited.
func (c *box) CopyOut(ctx context.Context, path string, max int64) ([]byte, error) {
	rc, stat, err := c.b.eng.api.CopyFromContainer(ctx, c.id, path)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("copy %s out of sandbox %.12s: %w: %w", path, c.id, sandbox.ErrNotFound, err)
		}
		return nil, wrap("copy "+path+" out of sandbox", c.id, err)
	}
	defer rc.Close()
	if !stat.Mode.IsRegular() {
		return nil, fmt.Errorf("copy %s out of sandbox %.12s: %w: it is not a regular file (%s)", path, c.id, sandbox.ErrNotFound, stat.Mode)
	}
	if stat.Size > max {
		return nil, fmt.Errorf("copy %s out of sandbox %.12s: %w: %d bytes, at most %d", path, c.id, sandbox.ErrTooLarge, stat.Size, max)
	}
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		return nil, fmt.Errorf("copy %s out of sandbox %.12s: read the archive: %w", path, c.id, err)
	}
	data, err := io.ReadAll(io.LimitReader(tr, max+1))
	if err != nil {
		return nil, fmt.Errorf("copy %s out of sandbox %.12s: %w", path, c.id, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("copy %s out of sandbox %.12s: %w: more than %d bytes", path, c.id, sandbox.ErrTooLarge, max)
	}
	return data, nil
}

// Freeze implements sandbox.Freezer (docker pause).
func (c *box) Freeze(ctx context.Context) error { return c.b.eng.Pause(ctx, c.id) }

// Thaw implements sandbox.Freezer (docker unpause).
func (c *box) Thaw(ctx context.Context) error { return c.b.eng.Unpause(ctx, c.id) }

// errNoNetwork is a link fault asked of a sandbox on no network.
func (c *box) errNoNetwork() error {
	return fmt.Errorf("sandbox %.12s is on no network (its scenario's sandbox.network is not internal): %w", c.id, sandbox.ErrUnsupported)
}

// CutLink implements sandbox.LinkCutter: the container is disconnected
// from its run's network.
func (c *box) CutLink(ctx context.Context) error {
	if c.network == "" {
		return c.errNoNetwork()
	}
	return c.b.eng.Disconnect(ctx, c.network, c.id)
}

// RestoreLink implements sandbox.LinkCutter.
func (c *box) RestoreLink(ctx context.Context) error {
	if c.network == "" {
		return c.errNoNetwork()
	}
	return c.b.eng.Connect(ctx, c.network, c.id)
}

// Linked implements sandbox.LinkCutter.
func (c *box) Linked(ctx context.Context) (bool, error) {
	if c.network == "" {
		return false, c.errNoNetwork()
	}
	return c.b.eng.Attached(ctx, c.network, c.id)
}

// Exec implements sandbox.Execer: cmd runs in the container as its user,
// with its environment.
func (c *box) Exec(ctx context.Context, cmd []string) (sandbox.ExecResult, error) {
	api := c.b.eng.api
	ex, err := api.ContainerExecCreate(ctx, c.id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		if cerrdefs.IsConflict(err) {
			return sandbox.ExecResult{}, fmt.Errorf("exec in sandbox %.12s: %w: %w", c.id, sandbox.ErrNotRunning, err)
		}
		return sandbox.ExecResult{}, wrap("exec in sandbox", c.id, err)
	}
	att, err := api.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return sandbox.ExecResult{}, wrap("attach to exec in sandbox", c.id, err)
	}
	defer att.Close()
	var out, errOut bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errOut, att.Reader); err != nil && !errors.Is(err, io.EOF) {
		return sandbox.ExecResult{}, fmt.Errorf("exec in sandbox %.12s: read its output: %w", c.id, err)
	}
	info, err := api.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		return sandbox.ExecResult{}, wrap("inspect exec in sandbox", c.id, err)
	}
	return sandbox.ExecResult{Stdout: out.Bytes(), Stderr: errOut.Bytes(), ExitCode: info.ExitCode}, nil
}
