package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// lockFileName is the owner lock inside a state dir. It is never deleted:
// removing a flock'ed file lets two processes each lock a different inode.
const lockFileName = "overnight.lock"

// lockRecord is what the owner writes into the lock file, for the error a
// second opener prints. The flock itself, not this record, is the lock: it
// dies with the process, so a SIGKILLed owner never blocks the next one.
type lockRecord struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
}

type dirLock struct {
	f *os.File
}

// acquireDirLock takes flock(LOCK_EX|LOCK_NB) on DIR/overnight.lock and records
// this process as the owner. It returns a *LockedError if another open file
// description (another process, or another Open in this one) holds it.
func acquireDirLock(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", path, err)
	}
	if err := flock(f, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			lockErr := readLockOwner(f, dir)
			_ = f.Close()
			return nil, lockErr
		}
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	rec, err := json.Marshal(lockRecord{
		PID:     os.Getpid(),
		Command: strings.Join(os.Args, " "),
		Since:   time.Now().UTC(),
	})
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.WriteAt(append(rec, '\n'), 0)
	}
	if err != nil {
		_ = f.Close() // closing the last descriptor releases the flock
		return nil, fmt.Errorf("record owner in lock file %s: %w", path, err)
	}
	return &dirLock{f: f}, nil
}

// readLockOwner reads the owner's record. The owner writes it just after taking
// the lock, so an empty or half-written record is retried for a short, bounded
// while before giving up and reporting an unknown owner.
func readLockOwner(f *os.File, dir string) *LockedError {
	lockErr := &LockedError{Dir: dir}
	for attempt := 0; attempt < 20; attempt++ {
		buf := make([]byte, 64<<10)
		n, _ := f.ReadAt(buf, 0)
		var rec lockRecord
		if n > 0 && json.Unmarshal(buf[:n], &rec) == nil && rec.PID > 0 {
			lockErr.PID, lockErr.Command, lockErr.Since = rec.PID, rec.Command, rec.Since
			return lockErr
		}
		time.Sleep(5 * time.Millisecond)
	}
	return lockErr
}

// release forgets the owner record and drops the lock. The file stays.
func (l *dirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	truncErr := l.f.Truncate(0)
	unlockErr := flock(l.f, unix.LOCK_UN)
	closeErr := l.f.Close()
	l.f = nil
	if err := errors.Join(truncErr, unlockErr, closeErr); err != nil {
		return fmt.Errorf("release state dir lock: %w", err)
	}
	return nil
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
