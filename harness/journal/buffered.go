package journal

import (
	"context"
	"fmt"
	"time"
)

// Bounds on the buffer of CommitBuffered: it is written as one Badger
// transaction of modest size (far below Badger's own limit, ~15% of a
// memtable), so writing it never holds writeMu for long.
const (
	maxBufferedBytes   = 256 << 10
	maxBufferedEntries = 512
)

// CommitUnsynced writes all entries atomically, in order with every other
// commit, but does not wait for a sync: they become durable with the next
// sync anyone makes, and are lost if the machine dies first (a SIGKILL of
// the process loses nothing: the write is in the operating system's
// hands). It is for writes that may be lost in a crash — an isolated re-run
// that the reflection redoes from its own durable record. Readers see the
// entries as soon as it returns. The buffered commits (CommitBuffered) are
// written first, so it also writes every commit made before it.
func (j *Journal) CommitUnsynced(ctx context.Context, entries ...Entry) error {
	return j.commitUnsynced(ctx, entries, false)
}

// CommitBuffered commits entries atomically, in order with every other
// commit, without writing them yet: they wait in memory, with the commits
// buffered around them, and are written to Badger as one transaction — by
// the next read (which writes the buffer before it reads), the next Commit
// (in the same transaction as its own entries when Badger's bound on one
// holds both, else before them) or CommitUnsynced (before its own write),
// Close, a full buffer, or Options.BufferedDelay after the first of them,
// whichever comes first.
//
// Readers see the entries as soon as it returns, exactly as with
// CommitUnsynced. What differs is a crash: a SIGKILL of the process loses
// the buffered commits, the newest ones; what survives is then everything
// committed up to some point at most BufferedDelay before the kill, in
// order, as if the process had died that much earlier. It is for high-rate
// records that may be lost in a crash: the trajectory of an isolated
// re-run, which the reflection redoes from its own durable record. Sparing
// a Badger write per commit (each a hand-off to Badger's writer goroutine)
// is what it is for.
//
// The buffered commits' callers have returned by the time they are
// written, so a failure to write them cannot be returned to them: it is
// sticky, and every later commit fails with it.
func (j *Journal) CommitBuffered(ctx context.Context, entries ...Entry) error {
	return j.commitUnsynced(ctx, entries, true)
}

// commitUnsynced is CommitUnsynced, or CommitBuffered when buffer is set:
// a commit that no sync follows, made in the caller's goroutine under
// writeMu, so it stays in order with the committer's writes.
func (j *Journal) commitUnsynced(ctx context.Context, entries []Entry, buffer bool) error {
	r, err := j.newRequest(ctx, false, entries)
	if err != nil || r == nil {
		return err
	}
	j.writeMu.Lock()
	defer j.writeMu.Unlock()
	if j.isClosing() {
		return ErrClosed
	}
	if buffer {
		return j.bufferLocked(r)
	}
	if err := j.flushBufferedLocked(); err != nil { // also the sticky error
		return err
	}
	return j.writeUnsyncedLocked([]*request{r}, fmt.Sprintf("commit of %d entries", len(r.entries)))
}

// bufferLocked adds r to the buffer, writing the buffer first when r would
// overflow it; the caller holds writeMu.
func (j *Journal) bufferLocked(r *request) error {
	if j.syncErr != nil {
		return j.syncErr
	}
	n := int64(len(r.entries))
	if len(j.buffered) > 0 && (j.bufferedCost+r.cost >= min(j.maxTxnSize, maxBufferedBytes) || j.bufferedEntries+n >= min(j.maxTxnCount, maxBufferedEntries)) {
		if err := j.flushBufferedLocked(); err != nil {
			return err
		}
	}
	if len(j.buffered) == 0 {
		// The first commit of a new buffer starts the clock on it.
		if j.flushTimer == nil {
			j.flushTimer = time.AfterFunc(j.bufferedDelay, j.flushBuffered)
		} else {
			j.flushTimer.Reset(j.bufferedDelay)
		}
	}
	j.buffered = append(j.buffered, r)
	j.bufferedCost += r.cost
	j.bufferedEntries += n
	j.nbuffered.Add(1)
	return nil
}

// flushBuffered writes the buffer when it has waited BufferedDelay.
func (j *Journal) flushBuffered() {
	j.writeMu.Lock()
	defer j.writeMu.Unlock()
	if j.isClosing() {
		return // Close writes it
	}
	_ = j.flushBufferedLocked()
}

// flushForRead writes the buffer, if any, before a read: a read sees every
// commit that returned before it started.
func (j *Journal) flushForRead() error {
	if j.nbuffered.Load() == 0 {
		return nil
	}
	j.writeMu.Lock()
	defer j.writeMu.Unlock()
	return j.flushBufferedLocked()
}

// flushBufferedLocked writes the buffered commits to Badger in one
// transaction; the caller holds writeMu. It returns the journal's sticky
// error, which a failure here sets: the callers of those commits have
// returned already.
func (j *Journal) flushBufferedLocked() error {
	if len(j.buffered) == 0 {
		return j.syncErr
	}
	batch := j.buffered
	j.buffered, j.bufferedCost, j.bufferedEntries = nil, 0, 0
	defer j.nbuffered.Add(-int64(len(batch)))
	if j.syncErr != nil {
		return j.syncErr
	}
	if err := j.writeUnsyncedLocked(batch, fmt.Sprintf("%d buffered commits", len(batch))); err != nil {
		j.syncErr = fmt.Errorf("%w; reopen the journal to continue", err)
		return j.syncErr
	}
	return nil
}

// writeUnsyncedLocked writes batch in one Badger transaction that no sync
// follows, tells the WAL syncer so, and counts the commits; the caller
// holds writeMu. what names batch in an error.
func (j *Journal) writeUnsyncedLocked(batch []*request, what string) error {
	txn := j.db.NewTransaction(true)
	defer txn.Discard()
	var entries uint64
	for _, r := range batch {
		if err := setAll(txn, r); err != nil {
			// Not expected: newRequest checked keys and sizes with Badger's
			// own rules, and the buffer is kept far below Badger's limits.
			return fmt.Errorf("stage %s in journal %s: %w; nothing of it was written", what, j.dir, err)
		}
		entries += uint64(len(r.entries))
	}
	if err := txn.Commit(); err != nil {
		if ws := j.walSyncer(); ws != nil {
			ws.FailedWrite()
		}
		return fmt.Errorf("write %s to journal %s: %w; their outcome is unknown", what, j.dir, err)
	}
	if ws := j.walSyncer(); ws != nil {
		ws.UnsyncedWrite()
	}
	j.commits.Add(uint64(len(batch)))
	j.entries.Add(entries)
	return nil
}
