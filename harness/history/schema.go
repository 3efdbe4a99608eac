// Package history owns the journal's schema for runs: the key spaces, the
// typed records stored under them, a Writer that puts them, and a Reader
// that offers a typed, read-only view of a run — its record, attempts,
// checkpoints, effects, faults (with the evidence judged from), LLM
// exchanges, events, the world's ledger and each attempt's logs.
//
// Nothing outside this package knows a key or scans a prefix: the harness
// writes through Writer, and everything that reads a run (the CLI, the
// judge, shrink, reflection, reports) reads through Reader.
package history

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// Key spaces of a run in the journal. Every key of a run starts with one of
// these prefixes followed by the run id and a slash.
const (
	prefixRun        = "run/"   // run/<id> -> RunRecord
	prefixAttempt    = "att/"   // att/<id>/<n> -> AttemptRecord
	prefixEvent      = "ev/"    // ev/<id>/<seq> -> EventRecord (append-only)
	prefixCheckpoint = "cp/"    // cp/<id>/<seq> -> CheckpointRecord
	prefixEffect     = "fx/"    // fx/<id>/<effect id> -> EffectRecord (intent, then result)
	prefixFault      = "fault/" // fault/<id>/<index> -> FaultRecord
	prefixClock      = "clock/" // clock/<id> -> ClockRecord
	prefixDone       = "done/"  // done/<id> -> DoneRecord
	prefixLLM        = "llm/"   // llm/<id>/<seq> -> LLMRecord
	prefixWorld      = "world/" // world/<id>/... -> the world's own key space
)

func seqKey(prefix, runID string, n int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	return []byte(prefix + runID + "/" + hex.EncodeToString(b[:]))
}

func runKey(id string) []byte   { return []byte(prefixRun + id) }
func clockKey(id string) []byte { return []byte(prefixClock + id) }
func doneKey(id string) []byte  { return []byte(prefixDone + id) }
func runPrefix(prefix, id string) []byte {
	return []byte(prefix + id + "/")
}

// Effect identities: agent keys and unkeyed effects live in separate spaces.

// KeyedID is the identity of an effect the agent sent with key.
func KeyedID(key string) string { return "k/" + key }

// UnkeyedID is the identity of the n-th effect sent without a key.
func UnkeyedID(n int) string { return fmt.Sprintf("u/%d", n) }

// EffectLabel is an effect identity as a person reads it and types it
// (overnight approve takes it): "u/<n>" for the n-th unkeyed effect, the
// key for a keyed one — or its id, "k/<key>", when the key itself reads
// as an id ("u/3", "k/x"), so that no two effects show the same label.
func EffectLabel(id string) string {
	key, keyed := strings.CutPrefix(id, "k/")
	if !keyed || strings.HasPrefix(key, "u/") || strings.HasPrefix(key, "k/") {
		return id
	}
	return key
}

// Entry is one record and the key it lives under, for Writer.Put.
type Entry struct {
	key []byte
	v   any
}

// RunEntry is a run's header.
func RunEntry(rec RunRecord) Entry { return Entry{runKey(rec.ID), rec} }

// AttemptEntry is attempt a of run id.
func AttemptEntry(id string, a AttemptRecord) Entry {
	return Entry{seqKey(prefixAttempt, id, int64(a.N)), a}
}

// EventEntry is one event of run id's trajectory.
func EventEntry(id string, ev EventRecord) Entry { return Entry{seqKey(prefixEvent, id, ev.Seq), ev} }

// CheckpointEntry is one checkpoint of run id.
func CheckpointEntry(id string, cp CheckpointRecord) Entry {
	return Entry{seqKey(prefixCheckpoint, id, cp.Seq), cp}
}

// EffectEntry is one effect of run id, stamped with the wall time of the
// write.
func EffectEntry(id string, e *EffectRecord) Entry {
	e.Wall = time.Now().UTC()
	return Entry{[]byte(prefixEffect + id + "/" + e.ID), e}
}

// FaultEntry is one fault of run id's schedule.
func FaultEntry(id string, f FaultRecord) Entry {
	return Entry{seqKey(prefixFault, id, int64(f.Index)), f}
}

// ClockEntry is run id's virtual clock.
func ClockEntry(id string, c ClockRecord) Entry { return Entry{clockKey(id), c} }

// DoneEntry is the agent's claim in run id.
func DoneEntry(id string, d DoneRecord) Entry { return Entry{doneKey(id), d} }

// LLMEntry is one LLM exchange of run id.
func LLMEntry(id string, rec LLMRecord) Entry { return Entry{seqKey(prefixLLM, id, rec.Seq), rec} }

func (e Entry) encode() (journal.Entry, error) {
	b, err := json.Marshal(e.v)
	if err != nil {
		return journal.Entry{}, fmt.Errorf("encode %s: %w", e.key, err)
	}
	return journal.Entry{Key: e.key, Value: b}, nil
}

// Writer puts records into the journal: each Put is one durable commit.
type Writer struct {
	j       *journal.Journal
	scratch bool      // commits are not synced (see Scratch)
	index   *RunIndex // told of the run records written (see Track)
}

// NewWriter writes through j.
func NewWriter(j *journal.Journal) *Writer { return &Writer{j: j} }

// Scratch is a writer to the same journal whose commits are not synced:
// for a run whose records may be lost in a crash — an isolated re-run that
// the reflection redoes from its own durable record. What it writes is
// visible at once, and durable with the next synced commit of anyone.
//
// Its trajectory records — events, checkpoints, effects, LLM exchanges, the
// clock, and its world's commits — are buffered in memory a moment
// (journal.CommitBuffered), as they come at the agent's rate; a crash may
// lose the newest of them, as if it had struck a moment earlier. Every
// other record (the run's own, its attempts, faults, the agent's done) is
// written at once (journal.CommitUnsynced), with the buffer before it, so
// that what names things outside the journal — a container, a socket dir —
// is in the operating system's hands before anything uses it.
func (w *Writer) Scratch() *Writer { return &Writer{j: w.j, scratch: true, index: w.index} }

// Put writes entries in one durable commit: all of them or none.
func (w *Writer) Put(ctx context.Context, entries ...Entry) error {
	return w.put(ctx, false, entries)
}

// PutRecorded writes the records of an effect a recording answers (an MCP
// server or HTTP API a run replays), which nothing outside the journal
// acted on: in one commit, all of them or none, in order with every other,
// held in memory a moment (journal.CommitBuffered) and written with the
// commits around them. They are durable with the next synced commit of
// anyone (a checkpoint, a live effect, the run's end), which writes them
// first. A crash before it — a machine's, or a SIGKILL of the harness
// within journal.Options.BufferedDelay — loses the newest of them, as if
// it had struck a moment earlier: the agent's retry under the same key
// meets the same recorded answer. A scratch writer's is Put.
func (w *Writer) PutRecorded(ctx context.Context, entries ...Entry) error {
	return w.put(ctx, true, entries)
}

func (w *Writer) put(ctx context.Context, recorded bool, entries []Entry) error {
	es := make([]journal.Entry, 0, len(entries))
	trajectory := true
	for _, e := range entries {
		je, err := e.encode()
		if err != nil {
			return err
		}
		es = append(es, je)
		trajectory = trajectory && isTrajectory(e.key)
	}
	var err error
	switch {
	case !w.scratch && recorded:
		err = w.j.CommitBuffered(ctx, es...)
	case !w.scratch:
		err = w.j.Commit(ctx, es...)
	case trajectory:
		err = w.j.CommitBuffered(ctx, es...)
	default:
		err = w.j.CommitUnsynced(ctx, es...)
	}
	if w.index != nil {
		w.index.touched(runIDs(entries))
	}
	return err
}

// isTrajectory says whether key is one of the records a run writes at its
// agent's rate (see Scratch).
func isTrajectory(key []byte) bool {
	for _, p := range [...]string{prefixEvent, prefixCheckpoint, prefixEffect, prefixLLM, prefixClock} {
		if bytes.HasPrefix(key, []byte(p)) {
			return true
		}
	}
	return false
}

// PutBlob stores a large payload (a scenario, a state, logs) and returns
// its hash, by which records refer to it.
func (w *Writer) PutBlob(ctx context.Context, data []byte) (string, error) {
	return w.j.PutBlob(ctx, data)
}

// WorldStore is the durable key space of run id's world: every world
// commit is one durable journal commit. An isolated run's world lives in
// the isolated run's own key space, never its parent's.
func (w *Writer) WorldStore(id string) (world.Store, []byte) {
	return worldStore{j: w.j, scratch: w.scratch}, []byte(prefixWorld + id + "/")
}

// AnswersStore is run id's world key space (WorldStore's) for a journal
// of the answers of a world whose upstream stays authoritative — an HTTP
// API's, an MCP server's: its commits are written at once without waiting
// for a sync (a SIGKILL loses none), and made durable by the next synced
// commit.
//
// Two kinds of commit are buffered instead (journal.CommitBuffered): held
// in memory and written in the transaction of the next synced commit.
// Those made under a context marked by ResultFollows — the answer to an
// effect, which the effect's durable result follows before the agent
// hears anything: one Badger write and one sync for both. And those under
// one of the recorded prefixes — the journal of answers of a world a
// recording answers (a replayed MCP server or HTTP API), as the effect's
// records are (PutRecorded).
func (w *Writer) AnswersStore(id string, recorded ...[]byte) (world.Store, []byte) {
	s, prefix := w.WorldStore(id)
	ws := s.(worldStore).Unsynced().(worldStore)
	ws.recorded = recorded
	return ws, prefix
}

// worldStore is the journal as a world's store.
type worldStore struct {
	j        *journal.Journal
	scratch  bool
	unsynced bool     // commits wait for the next sync (see Unsynced)
	buffered bool     // commits wait in memory for the next synced commit (see Buffered)
	recorded [][]byte // commits under these are buffered (see AnswersStore)
}

func (s worldStore) Commit(ctx context.Context, entries ...world.Entry) error {
	es := make([]journal.Entry, len(entries))
	recorded := false
	for i, e := range entries {
		es[i] = journal.Entry{Key: e.Key, Value: e.Value}
		for _, p := range s.recorded {
			recorded = recorded || bytes.HasPrefix(e.Key, p)
		}
	}
	switch {
	case s.scratch, s.buffered:
		// A shadow world's commits come with its effects (see Scratch); a
		// buffered store's with the effect's result (see Buffered).
		return s.j.CommitBuffered(ctx, es...)
	case s.unsynced && (recorded || resultFollows(ctx)):
		return s.j.CommitBuffered(ctx, es...)
	case s.unsynced:
		return s.j.CommitUnsynced(ctx, es...)
	}
	return s.j.Commit(ctx, es...)
}

// resultFollowsKey marks a context of ResultFollows.
type resultFollowsKey struct{}

// ResultFollows marks ctx as the context of a world's Execute on the
// effect path, which journals the effect's result — a synced commit — after
// every commit the world makes under it and before the agent hears of the
// effect. The answers store (AnswersStore) holds those commits in memory
// and writes them in the result's own transaction, whose sync covers them.
//
// A harness killed in between loses the answer with the result: the
// effect's intent is then without a result, as after a kill while the
// world was being called, and its reconciliation asks the world (an HTTP
// API's lookup) before anything is sent again.
func ResultFollows(ctx context.Context) context.Context {
	return context.WithValue(ctx, resultFollowsKey{}, true)
}

func resultFollows(ctx context.Context) bool {
	v, _ := ctx.Value(resultFollowsKey{}).(bool)
	return v
}

// Unsynced is the same key space with commits written in order with every
// other commit of the journal but not synced: each becomes durable with
// the next sync anyone makes (journal.Journal.CommitUnsynced), and only a
// machine's crash before it can lose it. It is for the journal of a world
// out of process's answers, whose every answer is followed by the
// effect's durable result: the world's own ledger is authoritative, and an
// answer lost is journaled again when the effect is reconciled.
func (s worldStore) Unsynced() world.Store {
	s.unsynced = !s.scratch
	return s
}

// Buffered is the same key space with commits held in memory, in order
// with every other commit of the journal, and written with the next
// commit anyone makes — in the same Badger transaction as the next synced
// one when it holds them (journal.Journal.CommitBuffered): readers see
// them at once, and a SIGKILL before that commit loses them. It is for the
// journal of a served world's answers, whose every answer is followed at
// once by the effect's durable result: the world's own ledger is
// authoritative, and an answer lost is journaled again from it when the
// effect, left without a result, is reconciled.
func (s worldStore) Buffered() world.Store {
	s.buffered = true
	return s
}

func (s worldStore) Get(key []byte) ([]byte, error) {
	v, err := s.j.Get(key)
	if errors.Is(err, journal.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", world.ErrNotFound, key)
	}
	return v, err
}

func (s worldStore) Scan(prefix []byte, fn func(key, value []byte) error) error {
	return s.j.Scan(prefix, fn)
}
