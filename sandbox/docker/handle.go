package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
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
	_ sandbox.Copier     = (*box)(nil)
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

// maxLinkHops bounds how many symbolic links CopyOut follows.
const maxLinkHops = 8

// CopyOut implements sandbox.Copier: it reads a regular file out of the
// container, running or exited, through the engine's archive API (a tar
// stream of the one file). A symbolic link is followed while its target —
// resolved by the engine inside the container — stays in the workspace.
func (c *box) CopyOut(ctx context.Context, file string, max int64) ([]byte, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("copy %s out of sandbox %.12s: "+format, append([]any{file, c.id}, args...)...)
	}
	if !path.IsAbs(file) || path.Clean(file) != file {
		return nil, fail("%w: the path must be absolute and clean", sandbox.ErrInvalidSpec)
	}
	at := file
	for hops := 0; ; hops++ {
		rc, stat, err := c.b.eng.api.CopyFromContainer(ctx, c.id, at)
		if err != nil {
			if cerrdefs.IsNotFound(err) {
				return nil, fail("%w: %w", sandbox.ErrNotFound, err)
			}
			return nil, wrap("copy "+file+" out of sandbox", c.id, err)
		}
		if stat.Mode&os.ModeSymlink != 0 {
			rc.Close()
			target := stat.LinkTarget
			if !inWorkspace(target) {
				return nil, fail("%w: %s is a symbolic link to %s, outside %s", sandbox.ErrNotRegular, at, target, sandbox.WorkspacePath)
			}
			if hops == maxLinkHops {
				return nil, fail("%w: more than %d symbolic links", sandbox.ErrNotRegular, maxLinkHops)
			}
			at = target
			continue
		}
		defer rc.Close()
		return readOne(rc, stat, max, fail)
	}
}

// inWorkspace reports whether p, an absolute path, is in the workspace.
func inWorkspace(p string) bool {
	p = path.Clean(p)
	return p == sandbox.WorkspacePath || strings.HasPrefix(p, sandbox.WorkspacePath+"/")
}

// readOne reads the one regular file of a tar stream the engine sent for
// stat, at most max bytes.
func readOne(rc io.Reader, stat container.PathStat, max int64, fail func(string, ...any) error) ([]byte, error) {
	if stat.Mode.IsDir() {
		return nil, fail("%w: it is a directory", sandbox.ErrNotRegular)
	}
	if !stat.Mode.IsRegular() {
		return nil, fail("%w: its mode is %s", sandbox.ErrNotRegular, stat.Mode)
	}
	if stat.Size > max {
		return nil, fail("%w: %d bytes, at most %d", sandbox.ErrTooLarge, stat.Size, max)
	}
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		return nil, fail("read the archive: %w", err)
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil, fail("%w: the archive holds %s (type %q)", sandbox.ErrNotRegular, hdr.Name, hdr.Typeflag)
	}
	data, err := io.ReadAll(io.LimitReader(tr, max+1))
	if err != nil {
		return nil, fail("read the archive: %w", err)
	}
	if int64(len(data)) > max {
		return nil, fail("%w: more than %d bytes", sandbox.ErrTooLarge, max)
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
