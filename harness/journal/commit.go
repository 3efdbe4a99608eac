package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Entry is one key/value write inside an atomic commit.
type Entry struct{ Key, Value []byte }

// request is one Commit call on its way through the committer.
type request struct {
	ctx     context.Context
	entries []Entry
	cost    int64      // Badger's transaction-size estimate for entries
	done    chan error // buffered: the committer never blocks on a caller that left
}

// entryCost mirrors Badger's txn.checkSize for a value kept in the LSM tree
// (every value here is below valueThreshold): key + value + 2 meta bytes + 10
// bytes of version.
func entryCost(e Entry) int64 { return int64(len(e.Key)) + int64(len(e.Value)) + 12 }

// Commit writes all entries atomically and returns nil only after they are
// durable: written to Badger and covered by a Syncer.Sync that started after
// the write and returned nil. Concurrent callers share writes and syncs through
// one committer goroutine (group commit); a caller alone writes and syncs in
// its own goroutine.
//
// Commit copies entries, so the caller may reuse them as soon as it returns.
// With no entries it returns nil at once.
//
// An error means the outcome is unknown unless it says otherwise: if ctx ends
// while Commit waits, it returns ctx.Err() and the entries may or may not
// become durable (they may already be in a group being written). Errors
// matching ErrInvalidKey or ErrTooLarge are found before anything is queued:
// nothing was written; so is ErrClosed (the journal was closing before the
// committer took the request). After a failed sync, Commit returns an error
// matching ErrSyncFailed (see there).
func (j *Journal) Commit(ctx context.Context, entries ...Entry) error {
	return j.commit(ctx, false, entries)
}

func (j *Journal) commit(ctx context.Context, internal bool, entries []Entry) error {
	r, err := j.newRequest(ctx, internal, entries)
	if err != nil || r == nil {
		return err
	}
	// A lone writer — nobody queued or being written — writes and syncs in
	// its own goroutine, which saves the hand-offs to the committer and back
	// (each can cost a thread wake-up). Only a caller that cannot be
	// cancelled: a stalled Badger write would hold one that can past its
	// deadline.
	if ctx.Done() == nil && j.inflight.Load() == 0 && j.writeMu.TryLock() {
		return j.commitAlone(r)
	}
	j.inflight.Add(1)
	defer j.inflight.Add(-1)
	if err := j.enqueue(r); err != nil {
		return err
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// commitAlone writes and syncs r in the caller's goroutine; the caller
// holds writeMu, which is released even if Badger panics.
func (j *Journal) commitAlone(r *request) error {
	defer j.writeMu.Unlock()
	if j.isClosing() {
		return ErrClosed
	}
	j.writeAndSync([]*request{r})
	return <-r.done
}

// newRequest validates entries and copies them into one buffer owned by the
// request. It returns nil, nil for an empty commit.
func (j *Journal) newRequest(ctx context.Context, internal bool, entries []Entry) (*request, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if j.isClosing() {
		return nil, ErrClosed
	}
	if j.readOnly {
		// Refused now — for a buffered commit, not at the next read that
		// would write the buffer.
		return nil, fmt.Errorf("commit to the journal in %s: it is open read-only (Options.ReadOnly)", j.dir)
	}
	if len(entries) == 0 {
		return nil, nil
	}
	var cost, size int64
	for _, e := range entries {
		if err := j.validate(e, internal); err != nil {
			return nil, err
		}
		cost += entryCost(e)
		size += int64(len(e.Key) + len(e.Value))
	}
	if cost >= j.maxTxnSize || int64(len(entries)) >= j.maxTxnCount {
		return nil, fmt.Errorf("commit of %d entries (%d bytes) exceeds one atomic write (%d bytes, %d entries): %w; split it into smaller commits or store large values with PutBlob",
			len(entries), size, j.maxTxnSize, j.maxTxnCount, ErrTooLarge)
	}
	buf := make([]byte, 0, size)
	owned := make([]Entry, len(entries))
	for i, e := range entries {
		buf = append(buf, e.Key...)
		k := buf[len(buf)-len(e.Key):]
		buf = append(buf, e.Value...)
		owned[i] = Entry{Key: k, Value: buf[len(buf)-len(e.Value):]}
	}
	return &request{ctx: ctx, entries: owned, cost: cost, done: make(chan error, 1)}, nil
}

func (j *Journal) validate(e Entry, internal bool) error {
	switch {
	case len(e.Key) == 0:
		return fmt.Errorf("commit: empty key: %w", ErrInvalidKey)
	case len(e.Key) > MaxKeySize:
		return fmt.Errorf("commit key %.40q...: %d bytes, limit %d: %w", e.Key, len(e.Key), MaxKeySize, ErrInvalidKey)
	case bytes.HasPrefix(e.Key, []byte("!badger!")):
		return fmt.Errorf("commit key %q: prefix !badger! belongs to Badger: %w", e.Key, ErrInvalidKey)
	case !internal && (bytes.HasPrefix(e.Key, metaPrefix) || bytes.HasPrefix(e.Key, blobPrefix)):
		return fmt.Errorf("commit key %q: prefixes %q and %q are reserved for the journal itself; use another prefix (blobs go through PutBlob): %w",
			e.Key, metaPrefix, blobPrefix, ErrInvalidKey)
	case len(e.Value) > MaxValueSize:
		// Also for the journal's own writes: every value must stay below
		// Badger's value threshold (see badgerOptions).
		return fmt.Errorf("commit key %q: value of %d bytes exceeds %d: %w; store it with PutBlob and commit its hash",
			e.Key, len(e.Value), MaxValueSize, ErrTooLarge)
	}
	return nil
}

func (j *Journal) isClosing() bool {
	select {
	case <-j.closing:
		return true
	default:
		return false
	}
}

// enqueue hands r to the committer, or gives up when the journal closes or
// r.ctx ends; then the committer never saw r and nothing of it is written.
func (j *Journal) enqueue(r *request) error {
	select {
	case j.reqs <- r:
		return nil
	case <-j.closing:
		return ErrClosed
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
}

// run is the committer: the goroutine that writes to Badger for queued
// callers (a lone caller writes itself; writeMu keeps them in turn). It takes the
// first waiting request, then every other request already waiting, up to
// maxBatch entries, writes them in one transaction, syncs once and only then
// acknowledges them.
//
// Collecting the group does not block, with one bounded exception: when more
// callers are inside Commit than are queued, it waits at most stragglerWait in
// total for them. Without it, writers released by one sync re-queue a few
// microseconds too late for the next group, and 32 writers settle into two
// alternating groups of ~16, halving throughput. A lone writer never waits.
//
// It does not pipeline (write group N+1 while group N syncs). Both syncers
// rely on that: (*badger.DB).Sync syncs the memtable that is current when it
// runs, and the write of group N+1 may rotate the memtable that holds group N
// before that sync starts, leaving group N unsynced; walsync.Syncer assumes at most
// one rotation between two of its calls. Writing and syncing strictly in turn
// (under writeMu) means the memtable holding the latest write is always the
// one synced (Badger rotates only at the start of a write).
func (j *Journal) run() {
	defer close(j.stopped)
	straggle := time.NewTimer(time.Hour)
	straggle.Stop()
	var carry *request
	for {
		first := carry
		carry = nil
		if first == nil {
			select {
			case first = <-j.reqs:
			case <-j.closing:
				j.drain()
				return
			}
		}
		group := []*request{first}
		n := len(first.entries)
		waiting := false // the straggler timer is running
	fill:
		for n < j.maxBatch {
			var r *request
			select {
			case r = <-j.reqs:
			default:
				// Nobody else is queued. If more callers are inside Commit
				// than the group holds, they are on their way (typically the
				// writers the previous sync just released): give them, all
				// together, at most stragglerWait to join.
				if int64(len(group)) >= j.inflight.Load() {
					break fill
				}
				if !waiting {
					straggle.Reset(stragglerWait)
					waiting = true
				}
				select {
				case r = <-j.reqs:
				case <-straggle.C:
					waiting = false
					break fill
				}
			}
			if n+len(r.entries) > j.maxBatch {
				carry = r
				break fill
			}
			group = append(group, r)
			n += len(r.entries)
		}
		if waiting {
			straggle.Stop()
		}
		j.commitGroup(group)
	}
}

// drain completes the requests that reach the committer after Close began;
// callers not yet taken see the closed channel and get ErrClosed.
func (j *Journal) drain() {
	for {
		var group []*request
		n := 0
	fill:
		for n < j.maxBatch {
			select {
			case r := <-j.reqs:
				group = append(group, r)
				n += len(r.entries)
			default:
				break fill
			}
		}
		if len(group) == 0 {
			return
		}
		j.commitGroup(group)
	}
}

// commitGroup writes a group as few transactions as Badger's size limit
// allows, never splitting a request. Each transaction is synced before the
// next is written (see run), and its requests are acknowledged after its sync.
func (j *Journal) commitGroup(group []*request) {
	var batch []*request
	var cost, count int64
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			// Its caller has already returned ctx.Err(); writing it now would
			// only make an abandoned commit durable.
			r.done <- err
			continue
		}
		n := int64(len(r.entries))
		if len(batch) > 0 && (cost+r.cost >= j.maxTxnSize || count+n >= j.maxTxnCount) {
			j.writeAndSyncLocked(batch)
			batch, cost, count = nil, 0, 0
		}
		batch = append(batch, r)
		cost += r.cost
		count += n
	}
	if len(batch) > 0 {
		j.writeAndSyncLocked(batch)
	}
}

// writeAndSyncLocked is writeAndSync under writeMu.
func (j *Journal) writeAndSyncLocked(batch []*request) {
	j.writeMu.Lock()
	defer j.writeMu.Unlock()
	j.writeAndSync(batch)
}

// writeAndSync writes batch in one Badger transaction, calls Syncer.Sync once
// and acknowledges every request with the outcome. The caller holds writeMu.
// The buffered commits (CommitBuffered) were committed before batch, and the
// sync covers them: they are staged first in the same transaction when it
// holds them all (one Badger write instead of two), else written first in
// their own.
func (j *Journal) writeAndSync(batch []*request) {
	buffered := j.takeBufferedFor(batch)
	if len(buffered) > 0 {
		// Counted as buffered until written: a reader that sees none
		// waiting reads without writeMu.
		defer j.nbuffered.Add(-int64(len(buffered)))
	} else if err := j.flushBufferedLocked(); err != nil { // also the sticky error
		ack(batch, err)
		return
	}
	txn := j.db.NewTransaction(true)
	defer func() { txn.Discard() }() // txn may be replaced below
	for _, r := range buffered {
		if err := setAll(txn, r); err != nil {
			// Not expected (see below); their callers have returned, so the
			// failure is sticky, as a failed flush of the buffer is.
			j.syncErr = fmt.Errorf("stage %d buffered commits in journal %s: %w; nothing of them was written; reopen the journal to continue", len(buffered), j.dir, err)
			ack(batch, j.syncErr)
			return
		}
	}
	var accepted []*request
	for i, r := range batch {
		if err := setAll(txn, r); err != nil {
			// Not expected: newRequest checked keys and sizes with Badger's own
			// rules. Reject this request alone and rebuild the transaction from
			// the ones accepted so far, so it holds no part of r.
			r.done <- fmt.Errorf("stage commit of %d entries in journal %s: %w", len(r.entries), j.dir, err)
			txn.Discard()
			txn = j.db.NewTransaction(true)
			for _, a := range append(slices.Clip(buffered), accepted...) {
				if err := setAll(txn, a); err != nil {
					// Nothing is written: the buffered commits, whose callers
					// have returned, are lost, so the failure is sticky, as
					// it is below; every request not answered yet gets it.
					err = fmt.Errorf("re-stage commit group in journal %s: %w", j.dir, err)
					if len(buffered) > 0 {
						err = fmt.Errorf("%w; nothing of %d buffered commits was written; reopen the journal to continue", err, len(buffered))
						j.syncErr = err
					}
					ack(accepted, err)
					ack(batch[i+1:], err)
					return
				}
			}
			continue
		}
		accepted = append(accepted, r)
	}
	if len(accepted) == 0 && len(buffered) == 0 {
		return
	}
	if err := txn.Commit(); err != nil {
		if ws := j.walSyncer(); ws != nil {
			ws.FailedWrite()
		}
		err = fmt.Errorf("write %d commits to journal %s: %w; their outcome is unknown", len(accepted)+len(buffered), j.dir, err)
		if len(buffered) > 0 {
			j.syncErr = fmt.Errorf("%w; reopen the journal to continue", err)
		}
		ack(accepted, err)
		return
	}
	syncStart := time.Now()
	err := j.syncer.Sync()
	j.syncNanos.Add(uint64(time.Since(syncStart)))
	if err != nil {
		j.syncErr = fmt.Errorf("sync journal %s: %w: %w; reopen the journal to continue", j.dir, ErrSyncFailed, err)
		ack(accepted, j.syncErr)
		return
	}
	var entries uint64
	for _, r := range append(buffered, accepted...) {
		entries += uint64(len(r.entries))
	}
	j.syncs.Add(1)
	j.commits.Add(uint64(len(accepted) + len(buffered)))
	j.entries.Add(entries)
	ack(accepted, nil)
}

// takeBufferedFor takes the buffered commits out of the buffer when one
// Badger transaction holds them and batch together (see writeAndSync);
// else nil, and they stay to be written on their own. The caller holds
// writeMu, and lowers nbuffered by as many once they are written.
func (j *Journal) takeBufferedFor(batch []*request) []*request {
	if len(j.buffered) == 0 || j.syncErr != nil {
		return nil
	}
	cost, count := j.bufferedCost, j.bufferedEntries
	for _, r := range batch {
		cost += r.cost
		count += int64(len(r.entries))
	}
	if cost >= j.maxTxnSize || count >= j.maxTxnCount {
		return nil
	}
	taken := j.buffered
	j.buffered, j.bufferedCost, j.bufferedEntries = nil, 0, 0
	if j.flushTimer != nil {
		j.flushTimer.Stop()
	}
	return taken
}

func setAll(txn *badger.Txn, r *request) error {
	for _, e := range r.entries {
		if err := txn.Set(e.Key, e.Value); err != nil {
			if errors.Is(err, badger.ErrTxnTooBig) {
				return fmt.Errorf("%w: %w", ErrTooLarge, err)
			}
			return err
		}
	}
	return nil
}

func ack(batch []*request, err error) {
	for _, r := range batch {
		r.done <- err
	}
}

// stragglerWait bounds how long the committer waits for callers that are
// inside Commit but not yet queued. It is paid only when such callers exist;
// a lone writer never waits.
const stragglerWait = 50 * time.Microsecond
