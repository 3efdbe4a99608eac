// Package journal is overnight's durable store: one Badger database per state
// directory, written by one writer at a time: a group-committing committer
// goroutine, or a caller that is alone.
//
// It owns:
//   - the state directory's layout (Badger files in DIR/journal, the owner lock in
//     DIR/overnight.lock) and the rule that one process owns a state dir at a time;
//   - the journal's format version (key meta/format);
//   - durability: Commit returns nil only after its entries are written and a
//     Syncer.Sync that started after that write has returned nil. Concurrent
//     commits share one sync (group commit), so many writers cost few fsyncs.
//     The sync is an fdatasync of the memtables' write-ahead logs
//     (scenarios/world/walsync).
//     Writes that may be lost in a crash skip it: CommitUnsynced writes without
//     a sync, CommitBuffered holds a moment's commits in memory and writes them
//     as one (every read, and every other commit, writes them first — a synced
//     commit in its own transaction when one holds both);
//   - content-addressed blobs (PutBlob, Blob) for payloads too large for a
//     journal entry, under the reserved prefix blob/.
//
// It must not interpret keys or values: other packages choose their own byte
// prefixes (run/, ev/<run>/, ...). The prefixes meta/ and blob/ are reserved for
// this package and Commit refuses them. It must not delete or repair anything
// in a state dir it cannot open (a damaged or foreign journal is reported, not
// fixed), and it never retries a failed fsync: after one, the journal refuses
// further writes until it is reopened (see ErrSyncFailed).
//
// Layout and sizing choices are documented next to badgerOptions; the group
// commit protocol next to (*Journal).run; what is synced in package walsync.
package journal
