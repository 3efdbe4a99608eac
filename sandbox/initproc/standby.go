package initproc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/overnight-dev/overnight/sandbox"
)

// standbyPoll is how often a standby looks for its handover when the
// directory cannot be watched (inotify refused): a fallback, the watch is
// what makes a takeover quick.
const standbyPoll = 10 * time.Millisecond

// awaitHandover is a standby's wait (sandbox.Standbys): it blocks until
// the handover appears in dir, watching the directory with inotify, and
// returns it. A signal in sigs (but SIGCHLD) ends the wait: it returns
// that signal and no handover.
func awaitHandover(dir string, sigs <-chan os.Signal) (sandbox.Handover, os.Signal, error) {
	changed := make(chan struct{}, 1)
	poll := standbyPoll
	if stop, err := watchDir(dir, changed); err == nil {
		defer stop()
		poll = time.Second // a safety net only
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		// Looked for after the watch is in place: a handover written
		// before it is found here, one written after wakes the watch.
		h, err := sandbox.ReadHandover(dir)
		if err == nil {
			return h, nil, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return sandbox.Handover{}, nil, err
		}
		select {
		case <-changed:
		case <-tick.C:
		case sig := <-sigs:
			if sig != syscall.SIGCHLD {
				return sandbox.Handover{}, sig, nil
			}
		}
	}
}

// watchDir sends on changed (without blocking) whenever a file is created,
// written or moved into dir, until stop.
func watchDir(dir string, changed chan<- struct{}) (stop func(), err error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	// Non-blocking, so reads go through the runtime's poller and Close
	// wakes the reader.
	f := os.NewFile(uintptr(fd), "inotify")
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := f.Read(buf); err != nil {
				return
			}
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}()
	return func() { f.Close() }, nil
}

// takeOver applies a handover to the init's own environment, which the
// relay and the agent then start from: the standby's directory is
// forgotten, the attempt's variables set.
func takeOver(h sandbox.Handover) error {
	if err := os.Unsetenv(sandbox.EnvStandby); err != nil {
		return err
	}
	for k, v := range h.Env {
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("set %s: %w", k, err)
		}
	}
	return nil
}
