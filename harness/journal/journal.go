package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// FormatVersion is the journal format this build reads and writes, stored
// under meta/format.
const FormatVersion = "1"

// Reserved key prefixes; Commit refuses keys under them.
var (
	metaPrefix = []byte("meta/")
	blobPrefix = []byte("blob/")
	formatKey  = []byte("meta/format")
)

// badgerDirName is where Badger's files live inside the state dir.
const badgerDirName = "journal"

// Journal is an open state dir. All methods are safe for concurrent use.
type Journal struct {
	readOnly bool
	dir      string
	db       *badger.DB
	syncer   Syncer
	lock     *dirLock
	maxBatch int
	// Badger's limits for one transaction (see txn.checkSize).
	maxTxnSize, maxTxnCount int64

	// writeMu is held by whoever writes to Badger and syncs: the committer
	// for a group, or a lone caller committing inline. One writer at a time,
	// each write synced before the next (see run).
	writeMu sync.Mutex
	// syncErr is sticky after a failed sync (or a failed write of buffered
	// commits); guarded by writeMu.
	syncErr error

	// The CommitBuffered commits not yet written, in commit order, and
	// their Badger cost and entry count; guarded by writeMu. nbuffered counts
	// them for readers, who write them before they read.
	buffered        []*request
	bufferedCost    int64
	bufferedEntries int64
	nbuffered       atomic.Int64
	bufferedDelay   time.Duration
	flushTimer      *time.Timer // writes the buffer bufferedDelay after its first commit

	reqs      chan *request
	closing   chan struct{} // closed by Close: no new commits
	stopped   chan struct{} // closed by the committer when it has drained
	closeOnce sync.Once

	// mu guards closed against db.Close for the read paths.
	mu     sync.RWMutex
	closed bool

	// inflight counts callers inside commit (queued, being written, or just
	// acknowledged and not yet returned), for the straggler wait in run.
	inflight atomic.Int64

	commits, entries, syncs atomic.Uint64
	syncNanos               atomic.Uint64 // time spent in Syncer.Sync
}

// Stats are counts since Open, for tests and benchmarks.
type Stats struct {
	// Commits is the number of Commit requests acknowledged as durable
	// (including the journal's own writes: the format key, blob chunks).
	Commits uint64
	// Entries is the number of entries in those commits.
	Entries uint64
	// Syncs is the number of Syncer.Sync calls that returned nil. Entries/Syncs
	// is the average group size.
	Syncs uint64
	// SyncTime is the time spent in Syncer.Sync, failed calls included.
	SyncTime time.Duration
}

// Open opens (or creates, mode 0700) the state dir dir, takes its owner lock,
// opens the Badger database in dir/journal and checks its format version.
//
// It returns a *LockedError if another process owns dir, a *FormatError if the
// journal was written by another format version, and a wrapped Badger error if
// the database cannot be opened. Open never deletes anything (the one repair
// it makes is renaming aside the empty files a crash inside Badger can leave:
// see setAsideEmptyLogs), and it releases the lock on any failure.
//
// When Badger itself fails to open, it may leave goroutines of the half-open
// database running (it cannot be closed safely), so a process should report
// the error rather than retry Open on the same dir.
func Open(dir string, opts Options) (*Journal, error) {
	if dir == "" {
		return nil, errors.New("open journal: empty state dir path")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	maxBatch := opts.MaxBatch
	if maxBatch <= 0 {
		maxBatch = defaultMaxBatch
	}
	bufferedDelay := opts.BufferedDelay
	if bufferedDelay <= 0 {
		bufferedDelay = defaultBufferedDelay
	}
	badgerDir := filepath.Join(dir, badgerDirName)
	if opts.ReadOnly {
		if _, err := os.Stat(badgerDir); err != nil {
			return nil, fmt.Errorf("open journal in state dir %s read-only: %w", dir, err)
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir %s: %w", dir, err)
	}
	lock, err := acquireDirLock(dir, opts.ReadOnly)
	if err != nil {
		return nil, err
	}
	if err := setAsideEmptyLogs(badgerDir, log); err != nil {
		_ = lock.release()
		return nil, fmt.Errorf("open journal in state dir %s: %w; check the permissions of %s", dir, err, badgerDir)
	}
	db, err := openBadger(badgerDir, log, opts.ReadOnly)
	if err != nil {
		_ = lock.release()
		return nil, fmt.Errorf("open journal in state dir %s: %w; the state dir may be damaged; move it aside or use another --state", dir, err)
	}
	var syncer Syncer
	if opts.NewSyncer != nil {
		syncer = opts.NewSyncer(db)
	}
	if syncer == nil && opts.ReadOnly {
		syncer = db // never called: nothing is written
	}
	if syncer == nil {
		syncer = newWALSyncer(badgerDir, db)
	}
	j := &Journal{
		readOnly:      opts.ReadOnly,
		dir:           dir,
		db:            db,
		syncer:        syncer,
		lock:          lock,
		maxBatch:      maxBatch,
		bufferedDelay: bufferedDelay,
		maxTxnSize:    db.MaxBatchSize(),
		maxTxnCount:   db.MaxBatchCount(),
		reqs:          make(chan *request),
		closing:       make(chan struct{}),
		stopped:       make(chan struct{}),
	}
	go j.run()
	if err := j.checkFormat(); err != nil {
		return nil, errors.Join(err, j.Close())
	}
	return j, nil
}

// openBadger opens the database, turning a panic inside badger.Open (Badger
// asserts on some inconsistencies) into an error. Read-only, a journal
// whose write-ahead logs must be replayed first (its owner died) is opened
// read-write once to recover them, then read-only.
func openBadger(path string, log *slog.Logger, readOnly bool) (db *badger.DB, err error) {
	if !readOnly {
		if err := os.MkdirAll(path, 0o700); err != nil {
			return nil, err
		}
	}
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("badger panicked while opening %s: %v", path, r)
		}
	}()
	recoverLogs := func() (*badger.DB, error) {
		log.Info("journal: recovering the logs a dead owner left before a read-only open", "dir", path)
		db, err := badger.Open(badgerOptions(path, log, false))
		if err != nil {
			return nil, err
		}
		if err := db.Close(); err != nil {
			return nil, err
		}
		return badger.Open(badgerOptions(path, log, true))
	}
	// A clean Close leaves no memtable log behind: one that is there is a
	// dead owner's, which read-only Badger refuses (and a refused Open
	// leaks the half-open database's caches), so recover it first.
	if readOnly && hasMemtableLogs(path) {
		return recoverLogs()
	}
	db, err = badger.Open(badgerOptions(path, log, readOnly))
	if readOnly && errors.Is(err, badger.ErrTruncateNeeded) {
		return recoverLogs()
	}
	return db, err
}

// hasMemtableLogs reports whether Badger's directory holds a non-empty
// memtable write-ahead log.
func hasMemtableLogs(badgerDir string) bool {
	entries, _ := os.ReadDir(badgerDir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".mem") && info.Mode().IsRegular() && info.Size() > 0 {
			return true
		}
	}
	return false
}

// emptyLogSuffix is appended to a zero-length Badger log file set aside by
// setAsideEmptyLogs.
const emptyLogSuffix = ".empty-after-crash"

// setAsideEmptyLogs renames zero-length value log (*.vlog) and memtable WAL
// (*.mem) files out of Badger's sight.
//
// Badger creates these files with open(O_CREAT) and then extends them; a
// SIGKILL between the two leaves a zero-length file, and every later
// badger.Open fails on it ("Open existing file ... Create a new file", or
// "while opening fid") — while leaking the half-opened database's goroutines,
// so retrying in-process is not safe. The crash tests hit this when the
// harness is killed while opening the journal or rotating a memtable. A
// zero-length file holds no data by definition, so nothing is lost; the file
// is renamed, not deleted, and the rename is logged.
func setAsideEmptyLogs(badgerDir string, log *slog.Logger) error {
	entries, err := os.ReadDir(badgerDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !(strings.HasSuffix(name, ".vlog") || strings.HasSuffix(name, ".mem")) {
			continue
		}
		info, err := e.Info()
		if err != nil || info.Size() != 0 {
			continue
		}
		from := filepath.Join(badgerDir, name)
		to := from + emptyLogSuffix
		if err := os.Rename(from, to); err != nil {
			return fmt.Errorf("set aside empty Badger log %s: %w", from, err)
		}
		log.Warn("journal: set aside an empty Badger log file left by a crash", "file", from, "now", to)
	}
	return nil
}

// checkFormat accepts a journal of FormatVersion, stamps a brand-new (empty)
// one, and refuses anything else without writing to it.
func (j *Journal) checkFormat() error {
	found, err := j.Get(formatKey)
	switch {
	case err == nil:
		if string(found) != FormatVersion {
			return &FormatError{Dir: j.dir, Found: string(found), Want: FormatVersion}
		}
		return nil
	case !errors.Is(err, ErrNotFound):
		return fmt.Errorf("read format of journal in %s: %w", j.dir, err)
	}
	empty := true
	if err := j.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		it.Rewind()
		empty = !it.Valid()
		return nil
	}); err != nil {
		return fmt.Errorf("inspect journal in %s: %w", j.dir, err)
	}
	if !empty || j.readOnly {
		return &FormatError{Dir: j.dir, Want: FormatVersion}
	}
	if err := j.commit(context.Background(), true, []Entry{{Key: formatKey, Value: []byte(FormatVersion)}}); err != nil {
		return fmt.Errorf("stamp new journal in %s with format %s: %w", j.dir, FormatVersion, err)
	}
	return nil
}

// Dir returns the state dir passed to Open.
func (j *Journal) Dir() string { return j.dir }

// Stats returns counts since Open.
func (j *Journal) Stats() Stats {
	return Stats{Commits: j.commits.Load(), Entries: j.entries.Load(), Syncs: j.syncs.Load(), SyncTime: time.Duration(j.syncNanos.Load())}
}

// view runs fn in a read-only Badger transaction unless the journal is
// closed, after writing the buffered commits (see CommitBuffered), so that fn
// sees every commit that returned before view was called.
func (j *Journal) view(fn func(txn *badger.Txn) error) error {
	if err := j.flushForRead(); err != nil {
		return err
	}
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed {
		return ErrClosed
	}
	return j.db.View(fn)
}

// Get returns a copy of key's value, or an error matching ErrNotFound.
func (j *Journal) Get(key []byte) ([]byte, error) {
	var value []byte
	err := j.view(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		value, err = item.ValueCopy(nil)
		return err
	})
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return nil, fmt.Errorf("get %q: %w", key, ErrNotFound)
	case errors.Is(err, ErrClosed):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("get %q from journal %s: %w", key, j.dir, err)
	}
	return value, nil
}

// Scan calls fn for every key with prefix, in ascending key order, with copies
// of the key and value. An error from fn stops the scan and is returned as is.
// fn sees one consistent snapshot; it may call Commit, but not Close.
func (j *Journal) Scan(prefix []byte, fn func(key, value []byte) error) error {
	var fnErr error
	err := j.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 64, Prefix: prefix})
		defer it.Close()
		for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
			item := it.Item()
			value, err := item.ValueCopy(nil)
			if err != nil {
				return fmt.Errorf("read value of %q: %w", item.Key(), err)
			}
			if fnErr = fn(item.KeyCopy(nil), value); fnErr != nil {
				return fnErr
			}
		}
		return nil
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("scan prefix %q of journal %s: %w", prefix, j.dir, err)
	}
	return err
}

// Last returns the greatest key with prefix and its value, or an error
// matching ErrNotFound.
func (j *Journal) Last(prefix []byte) (key, value []byte, err error) {
	err = j.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Reverse: true})
		defer it.Close()
		if upper := prefixEnd(prefix); upper == nil {
			it.Rewind() // prefix is empty or all 0xff: start from the very last key
		} else {
			// In reverse, Seek lands on the greatest key <= upper. upper itself
			// sorts after every key with prefix, so skip it if it exists.
			it.Seek(upper)
			if it.Valid() && bytes.Equal(it.Item().Key(), upper) {
				it.Next()
			}
		}
		if !it.ValidForPrefix(prefix) {
			return badger.ErrKeyNotFound
		}
		item := it.Item()
		key = item.KeyCopy(nil)
		value, err = item.ValueCopy(nil)
		return err
	})
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return nil, nil, fmt.Errorf("last key with prefix %q: %w", prefix, ErrNotFound)
	case errors.Is(err, ErrClosed):
		return nil, nil, err
	case err != nil:
		return nil, nil, fmt.Errorf("last key with prefix %q in journal %s: %w", prefix, j.dir, err)
	}
	return key, value, nil
}

// prefixEnd returns the smallest key greater than every key with prefix, or
// nil if there is none (empty prefix, or all bytes 0xff).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Close stops accepting commits, lets the committer finish every commit it
// already took (each completes, or fails with ErrClosed if it never reached
// the committer), closes Badger and releases the state dir lock. A second Close
// returns nil.
func (j *Journal) Close() error {
	var err error
	j.closeOnce.Do(func() {
		close(j.closing)
		<-j.stopped
		j.writeMu.Lock() // a lone caller may be writing inline
		defer j.writeMu.Unlock()
		if j.flushTimer != nil {
			j.flushTimer.Stop()
		}
		var flushErr error
		if len(j.buffered) > 0 {
			flushErr = j.flushBufferedLocked() // the buffered commits, which nothing has written yet
		}
		j.mu.Lock()
		j.closed = true
		dbErr := j.db.Close()
		j.mu.Unlock()
		if w := j.walSyncer(); w != nil {
			_ = w.Close()
		}
		if dbErr != nil {
			dbErr = fmt.Errorf("close journal in %s: %w", j.dir, dbErr)
		}
		err = errors.Join(flushErr, dbErr, j.lock.release())
	})
	return err
}
