package remote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/walsync"
)

// BadgerStore is a durable world.Store in a Badger database of its own:
// what `overnight world serve --data DIR` keeps a world in. Every Commit
// is one transaction, synced before it returns: one fdatasync of the
// memtable's write-ahead log (walsync.Syncer), as every value stays out of
// the value log (values are at most MaxStoreValue). Commits are written and
// synced one at a time. One process opens a directory at a time (Badger
// locks it).
type BadgerStore struct {
	db  *badger.DB
	dir string

	mu sync.Mutex // a commit's write and its sync, in turn
	// wal syncs the memtable logs alone; nil where walsync cannot (another
	// OS), and db.Sync does.
	wal *walsync.Syncer
	// syncErr, once a sync failed, refuses every later commit: the kernel
	// may have dropped the pages it could not write, and a later sync
	// would not say so.
	syncErr error
}

// MaxStoreValue is the largest value a BadgerStore commits, the same bound
// as the harness's journal puts on an in-process world's values.
const MaxStoreValue = 512 << 10

// storeValueThreshold keeps every value in Badger's LSM tree and its
// write-ahead log (Badger's maximum threshold; it must exceed MaxStoreValue).
const storeValueThreshold = 1 << 20

var _ world.Store = (*BadgerStore)(nil)

// OpenBadgerStore opens (creating it if need be) the store in dir. log
// receives Badger's warnings and errors; nil is quiet.
func OpenBadgerStore(dir string, log *slog.Logger) (s *BadgerStore, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("world store %s: %w", dir, err)
	}
	if err := setAsideEmptyLogs(dir, log); err != nil {
		return nil, fmt.Errorf("world store %s: %w", dir, err)
	}
	defer func() { // Badger asserts on some damage by panicking
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("world store %s: badger panicked while opening it: %v", dir, r)
		}
	}()
	opts := badger.DefaultOptions(dir).
		// Commit syncs the log itself (walsync), once per transaction;
		// SyncWrites would also flush the unused value log.
		WithSyncWrites(false).
		WithValueThreshold(storeValueThreshold).
		WithLogger(badgerLogger{log}).
		WithMetricsEnabled(false).
		WithMemTableSize(16 << 20).
		WithBlockCacheSize(16 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(2).
		WithNumGoroutines(2)
	db, err := badger.Open(opts)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("world store %s: another process has it open (one world server per --data dir): %w", dir, err)
		}
		return nil, fmt.Errorf("world store %s: %w", dir, err)
	}
	return &BadgerStore{db: db, dir: dir, wal: walsync.New(dir, db, MaxStoreValue)}, nil
}

// Commit implements world.Store: one transaction, durable when it returns.
// A value larger than MaxStoreValue is refused, and nothing is written.
func (s *BadgerStore) Commit(ctx context.Context, entries ...world.Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, e := range entries {
		if len(e.Value) > MaxStoreValue {
			return fmt.Errorf("world store %s: the value of %q is %d bytes, over the %d a world may write at once; nothing was written",
				s.dir, e.Key, len(e.Value), MaxStoreValue)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.syncErr != nil {
		return s.syncErr
	}
	err := s.db.Update(func(txn *badger.Txn) error {
		for _, e := range entries {
			if err := txn.Set(e.Key, e.Value); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if s.wal != nil {
			s.wal.FailedWrite()
		}
		return fmt.Errorf("world store %s: commit %d entries: %w", s.dir, len(entries), err)
	}
	if s.wal != nil {
		err = s.wal.Sync()
	} else {
		err = s.db.Sync()
	}
	if err != nil {
		s.syncErr = fmt.Errorf("world store %s: sync: %w; restart the world server to continue", s.dir, err)
		return fmt.Errorf("world store %s: sync a commit of %d entries: %w; its outcome is unknown, and the store takes no more commits until it is opened again", s.dir, len(entries), err)
	}
	return nil
}

// Get implements world.Store.
func (s *BadgerStore) Get(key []byte) ([]byte, error) {
	var v []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		v, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %q", world.ErrNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("world store %s: get %q: %w", s.dir, key, err)
	}
	return v, nil
}

// Scan implements world.Store, over one consistent view of the store.
func (s *BadgerStore) Scan(prefix []byte, fn func(key, value []byte) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 64, Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			v, err := item.ValueCopy(nil)
			if err != nil {
				return fmt.Errorf("world store %s: read %q: %w", s.dir, item.Key(), err)
			}
			if err := fn(item.KeyCopy(nil), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// Close closes the database.
func (s *BadgerStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wal != nil {
		_ = s.wal.Close()
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("world store %s: close: %w", s.dir, err)
	}
	return nil
}

// setAsideEmptyLogs renames zero-length value logs and memtable logs out
// of Badger's sight, as the harness's journal does: a SIGKILL between
// Badger creating such a file and extending it leaves one, and every
// later Open fails on it. A zero-length file holds no data.
func setAsideEmptyLogs(dir string, log *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !(strings.HasSuffix(name, ".vlog") || strings.HasSuffix(name, ".mem")) {
			continue
		}
		if info, err := e.Info(); err != nil || info.Size() != 0 {
			continue
		}
		from := filepath.Join(dir, name)
		if err := os.Rename(from, from+".empty-after-crash"); err != nil {
			return fmt.Errorf("set aside the empty Badger log %s: %w", from, err)
		}
		log.Warn("world store: set aside an empty Badger log a crash left", "file", from)
	}
	return nil
}

// badgerLogger passes Badger's warnings and errors to a *slog.Logger; its
// Info and Debug (compactions, flushes) are dropped.
type badgerLogger struct{ log *slog.Logger }

func (l badgerLogger) Errorf(format string, args ...any) {
	l.log.Error(strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "badger")
}

func (l badgerLogger) Warningf(format string, args ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "badger")
}

func (badgerLogger) Infof(string, ...any) {}

func (badgerLogger) Debugf(string, ...any) {}
