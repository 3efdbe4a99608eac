package world

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// Replay answers the requests of a run from a recording, as a world
// replaying an earlier run does: the n-th request of this run with a kind
// and (canonical) arguments — counted in the run's own journal — gets the
// n-th answer the recording holds for that kind and arguments. The
// recording is indexed once, by kind and arguments, and the run's
// requests are counted as they are journaled, so an answer costs the same
// however long the run; the journal is read again only when something else
// appended to it (a resume opens it with entries already in it).
//
// Answer, the journaling of its answer and Journaled are one step: the
// caller runs them one request at a time (the replaying worlds hold their
// lock). It is not safe for concurrent use otherwise.
type Replay struct {
	journal  *Ledgered
	recorded map[string][]Outcome // by replayKey, in the recording's order

	counted  int64          // the journal's seq seen counts up to; -1: count it again
	answered int64          // counted when Answer last answered
	seen     map[string]int // this run's journaled requests by replayKey
	diverged *LedgerEntry   // the first journaled request the recording could not answer
}

// NewReplay indexes recording (a recorded run's journal of answers, in
// order) to answer the requests of the run whose journal is journal.
func NewReplay(recording []LedgerEntry, journal *Ledgered) *Replay {
	r := &Replay{journal: journal, recorded: map[string][]Outcome{}, counted: -1}
	for _, e := range recording {
		k := replayKey(e.Kind, e.Args)
		r.recorded[k] = append(r.recorded[k], e.Outcome)
	}
	return r
}

// replayKey is what a replay matches a request by: its kind and its
// arguments without insignificant space.
func replayKey(kind string, args json.RawMessage) string {
	return kind + "\x00" + string(CompactJSON(args))
}

// ReplayAnswer is what a recording answers a request.
type ReplayAnswer struct {
	Outcome Outcome // the recorded answer (when Found)
	// Found is false when the recording holds no answer to this occurrence
	// of the request: the first divergence.
	Found bool
	// Occurrence is the request's number among this run's requests of its
	// kind and arguments, from 1; Recorded how many the recording holds.
	Occurrence, Recorded int
}

// Answer is the recording's answer to req. The caller journals the request
// with its answer (divergence or not) and then calls Journaled.
func (r *Replay) Answer(ctx context.Context, req Request) (ReplayAnswer, error) {
	if err := r.count(ctx); err != nil {
		return ReplayAnswer{}, err
	}
	r.answered = r.counted
	k := replayKey(req.Kind, req.Args)
	n, answers := r.seen[k], r.recorded[k]
	if n < len(answers) {
		return ReplayAnswer{Outcome: answers[n], Found: true, Occurrence: n + 1, Recorded: len(answers)}, nil
	}
	return ReplayAnswer{Occurrence: n + 1, Recorded: len(answers)}, nil
}

// Journaled tells r that the journal now holds e, the request Answer
// last answered. Unless e is the one entry journaled since that answer,
// and r counted nothing meanwhile, the journal is counted again on the
// next Answer.
func (r *Replay) Journaled(e LedgerEntry) {
	if r.counted < 0 || r.counted != r.answered || r.journal.LedgerSeq() != r.counted+1 {
		r.counted = -1
		return
	}
	r.counted++
	r.note(e, r.counted)
}

// note counts e, journaled at seq.
func (r *Replay) note(e LedgerEntry, seq int64) {
	r.seen[replayKey(e.Kind, e.Args)]++
	if r.diverged == nil && IsDiverged(e) {
		e.Seq = seq
		r.diverged = &e
	}
}

// Diverged is the first request of the journal the recording could not
// answer (nil: none), as FirstDiverged finds it.
func (r *Replay) Diverged(ctx context.Context) (*LedgerEntry, error) {
	if err := r.count(ctx); err != nil {
		return nil, err
	}
	return r.diverged, nil
}

// count counts the journal's requests again when r has not seen them all.
func (r *Replay) count(ctx context.Context) error {
	seq := r.journal.LedgerSeq()
	if r.counted == seq {
		return nil
	}
	mine, err := r.journal.Ledger(ctx)
	if err != nil {
		return err
	}
	r.seen, r.diverged, r.counted = make(map[string]int, len(mine)), nil, 0
	for _, e := range mine {
		r.note(e, e.Seq)
		r.counted = max(r.counted, e.Seq)
	}
	return nil
}

// IsDiverged reports whether e is a request a replay's recording could
// not answer: failed, code CodeReplayDiverged.
func IsDiverged(e LedgerEntry) bool {
	return e.Outcome.Status == protocol.StatusFailed && e.Outcome.Error != nil && e.Outcome.Error.Code == CodeReplayDiverged
}

// FirstDivergedIn is the first request of journal a replay's recording
// could not answer (nil: none): counted by replay when the world replays
// (the caller serializes the call with replay's Answer), else read from
// the journal (a journal-only view: replay is nil).
func FirstDivergedIn(ctx context.Context, journal *Ledgered, replay *Replay) (*LedgerEntry, error) {
	if replay != nil {
		return replay.Diverged(ctx)
	}
	ledger, err := journal.Ledger(ctx)
	if err != nil {
		return nil, err
	}
	return FirstDiverged(ledger), nil
}

// FirstDiverged is the first entry of ledger a replay's recording could
// not answer (IsDiverged), nil when there is none.
func FirstDiverged(ledger []LedgerEntry) *LedgerEntry {
	for i := range ledger {
		if IsDiverged(ledger[i]) {
			return &ledger[i]
		}
	}
	return nil
}

// CompactJSON is raw without insignificant space; "null" for nothing or
// for what is not JSON, so two such values compare equal.
func CompactJSON(raw json.RawMessage) []byte {
	var buf bytes.Buffer
	if len(raw) == 0 || json.Compact(&buf, raw) != nil {
		return []byte("null")
	}
	return buf.Bytes()
}

// CodeReplayDiverged is the error code of a request a replay's recording
// cannot answer: it was not sent anywhere.
const CodeReplayDiverged = "replay_diverged"

// ErrReplayDiverged is wrapped by what a diverged replay cannot judge: the
// goal and the duplicates of a run whose requests the recording stopped
// answering were never seen by a world, so they are unknown, not a pass
// and not a failure.
var ErrReplayDiverged = errors.New("the replay diverged from its recording")

// Divergence is the first request of a replay its recording could not
// answer (and that was not sent upstream): an HTTP API's request or an MCP
// server's tools/call.
type Divergence struct {
	API   string `json:"api"`   // the HTTP API or MCP server
	Kind  string `json:"kind"`  // the effect kind, http.<api>.<kind> or mcp.<server>.<tool>
	Route string `json:"route"` // "METHOD /path", or "tools/call <tool>"
	// Ordinal is the request's number among the run's requests to the API,
	// from 1; Occurrence its number among those of its kind and args (the
	// recording answers fewer).
	Ordinal    int64  `json:"ordinal"`
	Occurrence int    `json:"occurrence"`
	Key        string `json:"key,omitempty"`
	Recording  string `json:"recording,omitempty"` // the run replayed
	Message    string `json:"message"`
	// At is the request's virtual time.
	At time.Time `json:"-"`
}
