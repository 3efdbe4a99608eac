package journal

import (
	badger "github.com/dgraph-io/badger/v4"

	"github.com/overnight-dev/overnight/scenarios/world/walsync"
)

// newWALSyncer returns the default Syncer for db in dir: a walsync.Syncer,
// which fdatasyncs the memtables' write-ahead logs alone, as every value the
// journal writes stays in the LSM tree (valueThreshold is above MaxValueSize
// and above every blob chunk); or db itself, whose Sync also flushes the
// value log, where the layout does not allow it (other options, another OS).
func newWALSyncer(dir string, db *badger.DB) Syncer {
	if s := walsync.New(dir, db, max(MaxValueSize, blobChunkSize)); s != nil {
		return s
	}
	return db
}

// walSyncer is the journal's syncer when it is the default one, else nil.
func (j *Journal) walSyncer() *walsync.Syncer {
	s, _ := j.syncer.(*walsync.Syncer)
	return s
}
