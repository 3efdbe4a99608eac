//go:build !linux

package walsync

import badger "github.com/dgraph-io/badger/v4"

// Syncer syncs only Badger's memtable logs on Linux (see
// walsync_linux.go); elsewhere New returns nil and callers use
// (*badger.DB).Sync.
type Syncer struct{}

// New returns nil outside Linux: sync with (*badger.DB).Sync.
func New(string, *badger.DB, int) *Syncer { return nil }

// Log is never called: New returns no Syncer.
func (*Syncer) Log() string { return "" }

// Sync is never called: New returns no Syncer.
func (*Syncer) Sync() error { return nil }

// FailedWrite is never called: New returns no Syncer.
func (*Syncer) FailedWrite() {}

// UnsyncedWrite is never called: New returns no Syncer.
func (*Syncer) UnsyncedWrite() {}

// Close is never called: New returns no Syncer.
func (*Syncer) Close() error { return nil }
