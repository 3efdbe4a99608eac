//go:build linux

package walsync

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"
)

// Syncer makes the writes made so far to one Badger database durable by
// fdatasync-ing the write-ahead logs of its memtables (the NNNNN.mem files)
// that can hold them, and nothing else.
//
// (*badger.DB).Sync does the same for the active memtable's log, then also
// syncs the current value log file. A database whose values all stay in the
// LSM tree never writes to the value log, so that second sync has nothing to
// write, yet on ext4 it still costs a device cache flush. Syncer drops it and
// keeps everything else:
//
//   - the active log is the one with the highest fid (Badger numbers them
//     from one counter, in creation order) and is synced on every call;
//   - the caller syncs after every transaction (Badger bounds one to 15% of
//     a memtable), so between two calls at most one rotation happens and the
//     log after the active one cannot have come and gone: when it exists,
//     every log from the active one on is synced, then the directory (so the
//     new file's name is durable too), and the newest is followed. The first
//     call syncs every log it finds, the ones Badger replayed at Open
//     included. A log that is gone was flushed to a table, which Badger syncs
//     before it deletes it. Writes no sync follows (UnsyncedWrite) and writes
//     that failed (FailedWrite) make the next call list the directory again;
//   - a log is synced through its own file descriptor: for a shared mapping,
//     fdatasync writes the pages dirtied through the mapping exactly as
//     msync(MS_SYNC), which is what Badger calls.
//
// It relies on two facts of Badger v4 checked by New (a fixed value threshold
// above every value the caller writes, and the .mem logs in the directory).
// A Syncer is not safe for concurrent use: the caller writes and syncs
// strictly in turn, from one goroutine at a time.
type Syncer struct {
	dir string
	// d is the Badger directory, kept open for listing and syncing.
	d *os.File
	// cur is the newest log seen, open in f.
	cur int
	f   *os.File
	// rescan makes the next call list the directory (see FailedWrite).
	rescan bool
	// unsynced makes the next call list the directory, and sync the
	// directory only if a log was added (see UnsyncedWrite).
	unsynced bool
}

const memFileExt = ".mem"

// New returns the Syncer for db, whose directory is dir, when db can never
// write to its value log: values of at most maxValue bytes stay in the LSM
// tree under db's options (a value threshold above maxValue, no
// VLogPercentile), SyncWrites is off (else every write is synced already)
// and the directory holds memtable logs. Otherwise it returns nil, and the
// caller syncs with (*badger.DB).Sync. The caller must refuse values larger
// than maxValue.
func New(dir string, db *badger.DB, maxValue int) *Syncer {
	o := db.Opts()
	if o.ValueThreshold <= int64(maxValue) || o.VLogPercentile != 0 || o.SyncWrites || o.InMemory || o.ReadOnly {
		return nil // values could reach the value log: sync it too
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	s := &Syncer{dir: dir, d: d, cur: -1}
	if fids, err := s.logs(); err != nil || len(fids) == 0 {
		_ = d.Close()
		return nil
	}
	return s
}

// logs lists the fids of the memtable logs in the directory.
func (s *Syncer) logs() ([]int, error) {
	if _, err := s.d.Seek(0, 0); err != nil {
		return nil, err
	}
	names, err := s.d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var fids []int
	for _, n := range names {
		if !strings.HasSuffix(n, memFileExt) {
			continue
		}
		fid, err := strconv.Atoi(strings.TrimSuffix(n, memFileExt))
		if err != nil {
			return nil, fmt.Errorf("memtable log %s: unexpected name", n)
		}
		fids = append(fids, fid)
	}
	return fids, nil
}

func (s *Syncer) path(fid int) string {
	return filepath.Join(s.dir, fmt.Sprintf("%05d%s", fid, memFileExt))
}

// Log is the path of the memtable log the Syncer follows (the newest it has
// seen), or "" before its first Sync.
func (s *Syncer) Log() string {
	if s.f == nil {
		return ""
	}
	return s.f.Name()
}

// Sync makes every write made before it durable.
func (s *Syncer) Sync() error {
	if s.cur >= 0 {
		_, err := os.Lstat(s.path(s.cur + 1))
		if os.IsNotExist(err) && !s.rescan && !s.unsynced {
			return s.fdatasync(s.f) // no rotation: the usual case
		}
		if err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("look for the next memtable log: %w", err)
		}
	}
	// The first call, or memtables rotated (or may have, more than once):
	// sync every log from the active one on (the first call: all of them,
	// the ones Badger replayed at Open included), then follow the newest.
	fids, err := s.logs()
	if err != nil {
		return fmt.Errorf("list memtable logs: %w", err)
	}
	if len(fids) == 0 {
		return fmt.Errorf("no memtable log in %s", s.dir)
	}
	newest := slices.Max(fids)
	if newest == s.cur && s.f != nil && !s.rescan {
		// Only unsynced writes since the last call, and no rotation: the
		// followed log holds everything, and its name is durable already.
		s.unsynced = false
		return s.fdatasync(s.f)
	}
	for _, fid := range fids {
		if fid >= s.cur && fid != newest {
			if err := s.syncPath(s.path(fid)); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	f, err := os.OpenFile(s.path(newest), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open memtable log: %w", err)
	}
	return s.follow(f, newest)
}

// FailedWrite notes that a write failed after Badger may have taken it, so
// no sync followed it: memtables may have rotated more than once since the
// last call (the log after the followed one may have come and gone), so the
// next call lists the directory instead of trusting the next name's absence.
func (s *Syncer) FailedWrite() { s.rescan = true }

// UnsyncedWrite notes a write that no sync follows: any number of them may
// come before the next call, and rotate memtables more than once — the log
// after the followed one may have come and gone, the next write landing in
// the one after it — so the next call lists the directory too.
func (s *Syncer) UnsyncedWrite() { s.unsynced = true }

// follow syncs f, the new active log, and the directory that names it, and
// makes it the log synced from now on.
func (s *Syncer) follow(f *os.File, fid int) error {
	if err := s.fdatasync(f); err != nil {
		_ = f.Close()
		return err
	}
	if syncHook != nil {
		syncHook(s.dir)
	}
	if err := unix.Fsync(int(s.d.Fd())); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync directory %s: %w", s.dir, err)
	}
	if s.f != nil {
		_ = s.f.Close()
	}
	s.f, s.cur, s.rescan, s.unsynced = f, fid, false, false
	return nil
}

// syncHook, when set (by tests), is told of every sync a Syncer makes: the
// path of a log, or of the directory.
var syncHook func(path string)

func (s *Syncer) fdatasync(f *os.File) error {
	if syncHook != nil {
		syncHook(f.Name())
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("sync memtable log %s: %w", f.Name(), err)
	}
	return nil
}

func (s *Syncer) syncPath(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return s.fdatasync(f)
}

// Close releases the Syncer's files. Close the database after it, or
// before: the Syncer holds no lock of Badger's.
func (s *Syncer) Close() error {
	var err error
	if s.f != nil {
		err = s.f.Close()
	}
	if cerr := s.d.Close(); err == nil {
		err = cerr
	}
	return err
}
