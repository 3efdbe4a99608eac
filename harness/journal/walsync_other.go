//go:build !linux

package journal

import badger "github.com/dgraph-io/badger/v4"

// walSyncer syncs only Badger's memtable logs on Linux (see
// walsync_linux.go); elsewhere the journal uses (*badger.DB).Sync.
type walSyncer struct{}

func newWALSyncer(_ string, db *badger.DB) Syncer { return db }

func (*walSyncer) close() error { return nil }

// Sync implements Syncer; it is never called.
func (*walSyncer) Sync() error { return nil }

func (*walSyncer) failedWrite()   {}
func (*walSyncer) unsyncedWrite() {}
