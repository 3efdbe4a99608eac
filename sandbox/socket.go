package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"
)

// maxSocketPath is the longest unix socket path Linux accepts (sun_path is 108 bytes, one of
// them the terminating NUL).
const maxSocketPath = 107

// ErrSocketInUse: ListenSocket found a live listener on the path.
var ErrSocketInUse = errors.New("gateway socket in use")

// NewSocketDir makes a short, fresh directory for a run's gateway socket, like /tmp/ovn-1234,
// mode 0711: the sandbox's non-root user may search it to reach the socket through the bind
// mount (the socket itself is 0666, guarded by the per-attempt token), but no other user can
// list it, unlink the socket or plant one of their own. It falls back to /tmp when
// os.TempDir() is too long for a socket path. cleanup removes the directory and its contents.
func NewSocketDir() (dir string, cleanup func() error, err error) {
	base := os.TempDir()
	if len(filepath.Join(base, "ovn-0123456789", SocketName)) > maxSocketPath {
		base = "/tmp"
	}
	dir, err = os.MkdirTemp(base, "ovn-")
	if err != nil {
		return "", nil, fmt.Errorf("create gateway socket dir under %s: %w", base, err)
	}
	cleanup = func() error { return os.RemoveAll(dir) }
	// MkdirTemp applies the umask; the bind-mounted directory must be searchable by the
	// sandbox user whatever it is.
	if err := os.Chmod(dir, 0o711); err != nil {
		return "", nil, errors.Join(fmt.Errorf("make gateway socket dir %s accessible: %w", dir, err), cleanup())
	}
	if err := removeStaleSocket(filepath.Join(dir, SocketName)); err != nil {
		return "", nil, errors.Join(err, cleanup())
	}
	return dir, cleanup, nil
}

// ListenSocket listens on the unix socket at path with mode 0666, first unlinking a stale
// socket that a killed harness left behind. It refuses a path that is too long, a path held by
// something other than a socket, and a socket someone still listens on (ErrSocketInUse).
func ListenSocket(path string) (net.Listener, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("listen on gateway socket %s: the path is %d bytes, unix sockets allow %d; use a shorter directory (NewSocketDir)", path, len(path), maxSocketPath)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on gateway socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		return nil, errors.Join(fmt.Errorf("make gateway socket %s accessible: %w", path, err), ln.Close())
	}
	return ln, nil
}

// removeStaleSocket unlinks path if it is a socket nobody listens on.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check gateway socket %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("gateway socket %s: the path exists and is not a socket (%s); refusing to remove it", path, fi.Mode())
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("gateway socket %s: %w: another harness is listening there", path, ErrSocketInUse)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale gateway socket %s: %w", path, err)
	}
	return nil
}
