package world

import (
	"bytes"
	"encoding/json"
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
