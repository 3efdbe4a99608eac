// Package walsync makes writes to a Badger database durable with one
// fdatasync of the write-ahead log of its active memtable, where
// (*badger.DB).Sync, and Badger's SyncWrites, also flush the value log.
//
// A database that keeps every value in its LSM tree (a value threshold above
// every value it is given, no VLogPercentile) never writes to the value log,
// yet on ext4 syncing that untouched file still costs a device cache flush:
// with SyncWrites, two flushes per write where one makes it durable. The
// harness's journal (harness/journal) and the served world's store
// (scenarios/world/remote's BadgerStore, `overnight world serve --data`)
// both sync through a Syncer. See BENCHMARKS.md ("What the figures say",
// and "A served world's effect round trip").
//
// It owns what is synced and when the directory must be synced too; the
// caller owns the order: every write is followed by a Sync (or declared with
// UnsyncedWrite or FailedWrite) before the next, from one goroutine at a time,
// and a write is acknowledged only after a Sync that started after it
// returned nil.
package walsync
