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
	// Brief says the owner holds the lock for a moment (a read-only look:
	// Options.ReadOnly): an opener waits for it instead of failing.
	Brief bool `json:"brief,omitempty"`
}

// BriefWait bounds how long Open waits for a state dir held briefly (by a
// ReadOnly journal) before it reports it in use.
const BriefWait = 5 * time.Second

// lockPoll is how often an opener waiting for a brief holder tries again.
const lockPoll = 2 * time.Millisecond

// recordWait bounds how long an opener waits for the owner's record when
// the lock is held and the record is empty: the owner writes it just after
// taking the lock, and truncates it just before releasing it — moments a
// loaded machine can stretch (a brief holder releasing it was seen to take
// over 100 ms under load).
const recordWait = time.Second

type dirLock struct {
	f *os.File
}

// acquireDirLock takes flock(LOCK_EX|LOCK_NB) on DIR/overnight.lock and records
// this process as the owner (brief: for a moment). It returns a *LockedError if
// another open file description (another process, or another Open in this one)
// holds it — at once when the owner recorded itself, after up to BriefWait when
// the owner holds it briefly.
func acquireDirLock(dir string, brief bool) (*dirLock, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", path, err)
	}
	start := time.Now()
	for {
		err := flock(f, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		rec, ok := readLockRecord(f)
		waited := time.Since(start)
		// An empty record is an owner between its flock and its record, or
		// a brief one releasing: try again for a moment either way.
		if (ok && !rec.Brief) || (ok && waited > BriefWait) || (!ok && waited > recordWait) {
			_ = f.Close()
			lockErr := &LockedError{Dir: dir}
			if ok {
				lockErr.PID, lockErr.Command, lockErr.Since = rec.PID, rec.Command, rec.Since
			}
			return nil, lockErr
		}
		time.Sleep(lockPoll)
	}
	rec, err := json.Marshal(lockRecord{
		PID:     os.Getpid(),
		Command: strings.Join(os.Args, " "),
		Since:   time.Now().UTC(),
		Brief:   brief,
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

// readLockRecord reads the owner's record; ok is false when there is none
// (yet, or any more) or it cannot be read.
func readLockRecord(f *os.File) (rec lockRecord, ok bool) {
	buf := make([]byte, 64<<10)
	n, _ := f.ReadAt(buf, 0)
	if n > 0 && json.Unmarshal(buf[:n], &rec) == nil && rec.PID > 0 {
		return rec, true
	}
	return rec, false
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
