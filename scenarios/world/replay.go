package world

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"
)

// RecordedAnswer answers req from a recording, as a world replaying an
// earlier run does: the n-th request of this run with req's kind and
// arguments (counted in mine, the run's own ledger so far) gets the n-th
// such answer of recording. found is false when the recording has no such
// answer — the first divergence — and then occurrence is the request's
// number among its kind and arguments (from 1) and recorded how many the
// recording holds.
func RecordedAnswer(mine, recording []LedgerEntry, req Request) (o Outcome, found bool, occurrence, recorded int) {
	args := CompactJSON(req.Args)
	n := 0
	for _, e := range mine {
		if e.Kind == req.Kind && bytes.Equal(CompactJSON(e.Args), args) {
			n++
		}
	}
	seen := 0
	for _, e := range recording {
		if e.Kind != req.Kind || !bytes.Equal(CompactJSON(e.Args), args) {
			continue
		}
		if seen == n {
			return e.Outcome, true, n + 1, seen
		}
		seen++
	}
	return Outcome{}, false, n + 1, seen
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
