package journal

import (
	"log/slog"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Syncer makes everything written so far durable (fsync). The default syncs
// the write-ahead logs of Badger's memtables that can hold the commit group
// (see package walsync); (*badger.DB).Sync, which also syncs the unused value log,
// is a correct but slower Syncer.
type Syncer interface{ Sync() error }

// Options configure Open. The zero value is ready to use.
type Options struct {
	// Logger receives Badger's warnings and errors (Info and Debug are
	// dropped). Default: discard.
	Logger *slog.Logger
	// MaxBatch is the most entries packed into one group commit (one write
	// plus one sync). A single commit larger than MaxBatch still goes through,
	// alone. Default: 1024.
	MaxBatch int
	// BufferedDelay bounds how long a CommitBuffered commit waits in memory
	// before it is written (reads, other commits and Close write it sooner).
	// Default: 2ms.
	BufferedDelay time.Duration
	// NewSyncer builds the Syncer called once per group commit. Default:
	// sync the memtables' write-ahead logs. Tests wrap db.Sync to observe or
	// break durability.
	NewSyncer func(db *badger.DB) Syncer
	// ReadOnly opens the journal for a moment's look, such as a viewer's
	// (overnight serve) between two requests: Badger is opened read-only,
	// every write fails, the state dir must exist and hold a journal, and
	// the owner lock is taken as brief — an Open meanwhile waits for it (up
	// to BriefWait) instead of failing, so a run that starts while the look
	// lasts is not refused. Close it as soon as the look is over. A journal
	// a crashed owner left needs its logs replayed, which read-only Badger
	// cannot do: Open recovers it read-write first, as any Open would.
	// Default false.
	ReadOnly bool
}

const (
	defaultMaxBatch      = 1024
	defaultBufferedDelay = 2 * time.Millisecond
)

const (
	// MaxKeySize is the longest key Commit accepts (Badger's own limit).
	MaxKeySize = 65000
	// MaxValueSize is the largest value Commit accepts. Larger payloads belong
	// in a blob (PutBlob), referenced by hash.
	MaxValueSize = 512 << 10
	// MaxBlobSize is the largest blob PutBlob accepts.
	MaxBlobSize = 64 << 20
)

// Badger sizing. overnight is a CLI that keeps a journal of events, checkpoints
// and a few blobs, not a database server, so the memory footprint is cut well
// below Badger's defaults (64 MiB memtables x5, 256 MiB block cache):
//   - memTableSize 16 MiB: also bounds one atomic write to 15% of it (~2.4 MiB),
//     comfortably above MaxValueSize;
//   - numMemtables 3: at most ~3 x 21 MiB of arenas while flushes catch up;
//   - blockCacheSize 16 MiB: reads are mostly recent keys still in memtables;
//   - valueThreshold 1 MiB (Badger's maximum): every value Commit accepts and
//     every blob chunk stays in the LSM tree and its write-ahead log, never in
//     the value log. This matters for durability: with SyncWrites off, Badger
//     rotates a full value log file without syncing it and db.Sync syncs only
//     the newest one, so a value-log entry could be acknowledged unsynced;
//   - valueLogFileSize 64 MiB: the (unused) value log is mapped at 2x this.
const (
	memTableSize     = 16 << 20
	numMemtables     = 3
	blockCacheSize   = 16 << 20
	valueThreshold   = 1 << 20
	valueLogFileSize = 64 << 20
	blobChunkSize    = 512 << 10
)

func badgerOptions(path string, log *slog.Logger, readOnly bool) badger.Options {
	return badger.DefaultOptions(path).
		WithReadOnly(readOnly).
		WithLogger(badgerLogger{log: log}).
		// The committer syncs once per group (Syncer); SyncWrites would add an
		// fsync to every Badger write request.
		WithSyncWrites(false).
		// One goroutine writes; there is nothing to detect.
		WithDetectConflicts(false).
		WithMetricsEnabled(false).
		WithMemTableSize(memTableSize).
		WithNumMemtables(numMemtables).
		WithBlockCacheSize(blockCacheSize).
		WithValueThreshold(valueThreshold).
		WithValueLogFileSize(valueLogFileSize).
		WithNumCompactors(2).
		WithNumGoroutines(2)
}
