package journal

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrNotFound is returned by Get, Last and Blob when no such key (or blob) exists.
	ErrNotFound = errors.New("journal: not found")
	// ErrClosed is returned by every method called after Close, and by commits
	// that were still queued when Close ran.
	ErrClosed = errors.New("journal: closed")
	// ErrLocked is matched (errors.Is) by a *LockedError: the state dir is owned
	// by another live process.
	ErrLocked = errors.New("journal: state dir is in use")
	// ErrFormat is matched (errors.Is) by a *FormatError: the journal was
	// written by another format version.
	ErrFormat = errors.New("journal: unsupported format version")
	// ErrInvalidKey is returned by Commit for an empty key, a key longer than
	// MaxKeySize, or a key under a prefix reserved for this package (meta/,
	// blob/) or for Badger (!badger!). Nothing of that commit is written.
	ErrInvalidKey = errors.New("journal: invalid key")
	// ErrTooLarge is returned for a value larger than MaxValueSize, a commit too
	// large for one atomic write, or a blob larger than MaxBlobSize. Nothing of
	// that commit is written.
	ErrTooLarge = errors.New("journal: too large")
	// ErrBlobCorrupt is returned by Blob when the stored bytes do not hash to
	// the requested digest.
	ErrBlobCorrupt = errors.New("journal: blob content does not match its hash")
	// ErrSyncFailed is returned by every commit of the group whose Sync failed,
	// and by every later commit: after a failed fsync the kernel may have
	// dropped the dirty pages, so a later successful fsync proves nothing about
	// them. The journal stays readable, but reads may show entries of the
	// failed group that are not durable; close and reopen it to write again
	// (reopening reads back only what reached the disk).
	ErrSyncFailed = errors.New("journal: sync failed; the journal refuses writes until it is reopened")
)

// LockedError reports that the state dir is owned by another live process.
// errors.Is(err, ErrLocked) is true for it. PID, Command and Since describe the
// owner as it recorded itself in DIR/overnight.lock; PID is 0 if that record
// could not be read.
type LockedError struct {
	Dir     string
	PID     int
	Command string
	Since   time.Time
}

// Error names the owner and says what to do.
func (e *LockedError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("state dir %s is in use by another process (owner unknown); wait for it or use another --state", e.Dir)
	}
	return fmt.Sprintf("state dir %s is in use by pid %d (command %q) since %s; wait for it or use another --state",
		e.Dir, e.PID, e.Command, e.Since.Format(time.RFC3339))
}

// Unwrap makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Unwrap() error { return ErrLocked }

// FormatError reports that the journal in Dir was written in format Found,
// while this build reads format Want. Found is empty when the journal holds
// data but no format key at all. errors.Is(err, ErrFormat) is true for it.
type FormatError struct {
	Dir   string
	Found string
	Want  string
}

// Error names both versions and says what to do.
func (e *FormatError) Error() string {
	found := e.Found
	if found == "" {
		found = "(none)"
	}
	return fmt.Sprintf("state dir %s holds journal format %s; this build reads format %s: use a matching overnight build or another --state dir",
		e.Dir, found, e.Want)
}

// Unwrap makes errors.Is(err, ErrFormat) true.
func (e *FormatError) Unwrap() error { return ErrFormat }
