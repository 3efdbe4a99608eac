package harness

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/harness/protocol"
)

// Key spaces of a run in the journal. Every key of a run starts with one of
// these prefixes followed by the run id and a slash.
const (
	prefixRun        = "run/"   // run/<id> -> RunRecord
	prefixAttempt    = "att/"   // att/<id>/<n> -> AttemptRecord
	prefixEvent      = "ev/"    // ev/<id>/<seq> -> EventRecord (append-only)
	prefixCheckpoint = "cp/"    // cp/<id>/<seq> -> CheckpointRecord
	prefixEffect     = "fx/"    // fx/<id>/<key> -> EffectRecord (intent, then result)
	prefixFault      = "fault/" // fault/<id>/<index> -> FaultRecord
	prefixClock      = "clock/" // clock/<id> -> ClockRecord
	prefixDone       = "done/"  // done/<id> -> DoneRecord
	prefixWorld      = "world/" // world/<id>/... -> the world's own key space
)

// Run statuses.
const (
	StatusRunning     = "running"     // a harness process is (or was, until it died) driving it
	StatusInterrupted = "interrupted" // stopped by Ctrl-C or found dead; resumable
	StatusFinished    = "finished"    // ended with a verdict
)

// RunRecord is a run's durable header.
type RunRecord struct {
	ID           string    `json:"id"`
	Scenario     string    `json:"scenario"`
	Source       string    `json:"source"`        // scenario path or builtin:<name>
	ScenarioBlob string    `json:"scenario_blob"` // blob hash of the scenario's exact bytes
	Agent        string    `json:"agent,omitempty"`
	Seed         int64     `json:"seed"`
	LLM          string    `json:"llm,omitempty"` // the model spec: scripted, openai:MODEL, ..., replay:RUN
	Faults       []string  `json:"faults"`        // canonical fault specs
	Timeout      Duration  `json:"timeout"`
	MaxAttempts  int       `json:"max_attempts"`
	Status       string    `json:"status"`
	Verdict      string    `json:"verdict,omitempty"`
	Reason       string    `json:"reason,omitempty"`
	StartedAt    time.Time `json:"started_at"`
	EndedAt      time.Time `json:"ended_at,omitzero"`
	Attempts     int       `json:"attempts"`
	VirtualStart time.Time `json:"virtual_start"`
	OwnerPID     int       `json:"owner_pid,omitempty"`
	SocketDir    string    `json:"socket_dir,omitempty"`
	Result       *Result   `json:"result,omitempty"`
}

// AttemptRecord is one container's life.
type AttemptRecord struct {
	N          int       `json:"n"`
	TokenHash  string    `json:"token_hash"`
	Container  string    `json:"container,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	EndedAt    time.Time `json:"ended_at,omitzero"`
	ExitCode   *int      `json:"exit_code,omitempty"`
	End        string    `json:"end,omitempty"` // why it ended: exited, killed by fault, reaped, timeout, interrupted
	StdoutBlob string    `json:"stdout_blob,omitempty"`
	StderrBlob string    `json:"stderr_blob,omitempty"`
	// Timings of a fault's kill (wall clock): when it was issued, when the
	// container was seen dead; and when the attempt first read its
	// checkpoint (how fast it got back to work).
	KillIssuedAt   time.Time `json:"kill_issued_at,omitzero"`
	ExitedAt       time.Time `json:"exited_at,omitzero"`
	FirstResumedAt time.Time `json:"first_resumed_at,omitzero"`
}

// EventRecord is one entry of the run's trajectory.
type EventRecord struct {
	Seq     int64           `json:"seq"`
	Attempt int             `json:"attempt"`
	Type    string          `json:"type"`
	Message string          `json:"message,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	Virtual time.Time       `json:"virtual"`
	Wall    time.Time       `json:"wall"`
}

// CheckpointRecord is one durable checkpoint.
type CheckpointRecord struct {
	Seq       int64           `json:"seq"`
	Step      int             `json:"step"`
	State     json.RawMessage `json:"state,omitempty"`      // inline when small
	StateBlob string          `json:"state_blob,omitempty"` // blob hash when large
	StateHash string          `json:"state_hash"`
	Attempt   int             `json:"attempt"`
	ExpectSeq *int64          `json:"expect_seq,omitempty"`
	Virtual   time.Time       `json:"virtual"`
}

// Effect record statuses beyond the protocol's: an intent journaled and
// not yet resolved.
const effectIntent = "intent"

// EffectRecord is one effect's journal entry: written as an intent before
// the world sees it, rewritten with the result after.
type EffectRecord struct {
	// ID is the effect's identity in the journal and the tag the world
	// keeps: "k/<key>" for a key the agent gave, "u/<n>" for the n-th
	// unkeyed effect. The two spaces never meet, whatever key an agent sends.
	ID         string                `json:"id"`
	Key        string                `json:"key,omitempty"` // as the agent gave it; empty when unkeyed
	Order      int64                 `json:"order"`
	Kind       string                `json:"kind"`
	Args       json.RawMessage       `json:"args"`
	ArgsHash   string                `json:"args_hash"`
	Unkeyed    bool                  `json:"unkeyed,omitempty"`
	Status     string                `json:"status"` // intent, done, failed, unknown
	Result     json.RawMessage       `json:"result,omitempty"`
	Error      *protocol.EffectError `json:"error,omitempty"`
	Attempt    int                   `json:"attempt"`
	Intents    int                   `json:"intents"`    // times an intent was journaled (the effect: trigger counts these)
	Executions int                   `json:"executions"` // times the world was asked
	Replays    int                   `json:"replays"`    // times a recorded result was returned
	Reconciled bool                  `json:"reconciled,omitempty"`
	Virtual    time.Time             `json:"virtual"`
}

// final reports whether a repeat of the key returns the recorded result:
// done is final, and so is a permanent refusal by the world.
func (e *EffectRecord) final() bool {
	switch e.Status {
	case protocol.StatusDone:
		return true
	case protocol.StatusFailed:
		return e.Error == nil || !e.Error.Transient
	}
	return false
}

// FaultRecord is one scheduled fault instance and what became of it. The
// schedule is written before anything is applied; recurring specs
// (every, rate) are recorded as their concrete firings.
type FaultRecord struct {
	Index          int       `json:"index"`
	Spec           string    `json:"spec"` // the instance: KIND[:ARG]@TRIGGER[/DURATION], trigger concrete
	From           string    `json:"from"` // the spec as written (in the scenario, --fault or a draw)
	Kind           string    `json:"kind"`
	At             string    `json:"at"` // canonical trigger text of the instance
	Applied        bool      `json:"applied"`
	AppliedAttempt int       `json:"applied_attempt,omitempty"`
	AppliedVirtual time.Time `json:"applied_virtual,omitzero"`
	HealedVirtual  time.Time `json:"healed_virtual,omitzero"`
	AppliedWall    time.Time `json:"applied_wall,omitzero"`
	// Error says why the fault could not be injected after it fired (for
	// example, Docker refused the kill). Such a fault did not test anything.
	Error string `json:"error,omitempty"`
	// Met says whether the agent really met the fault (a live container to
	// act on, a connection it broke, an effect it failed), with evidence.
	Met       bool   `json:"met"`
	MetDetail string `json:"met_detail,omitempty"`
	// State is what a stateful fault needs to undo itself (chaos.Stateful).
	State string `json:"state,omitempty"`
}

// ClockRecord is the run's virtual clock.
type ClockRecord struct {
	Now time.Time `json:"now"`
}

// DoneRecord is the agent's own claim.
type DoneRecord struct {
	Outcome string          `json:"outcome"`
	Summary string          `json:"summary,omitempty"`
	Claims  json.RawMessage `json:"claims,omitempty"`
	Attempt int             `json:"attempt"`
	Virtual time.Time       `json:"virtual"`
}

// Duration is a time.Duration that marshals as Go duration text.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

func seqKey(prefix, runID string, n int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	return []byte(prefix + runID + "/" + hex.EncodeToString(b[:]))
}

func runKey(id string) []byte              { return []byte(prefixRun + id) }
func clockKey(id string) []byte            { return []byte(prefixClock + id) }
func doneKey(id string) []byte             { return []byte(prefixDone + id) }
func effectKey(id, effectID string) []byte { return []byte(prefixEffect + id + "/" + effectID) }

// Effect identities: agent keys and unkeyed effects live in separate spaces.
func keyedID(key string) string { return "k/" + key }
func unkeyedID(n int) string    { return fmt.Sprintf("u/%d", n) }

// effectLabel is an effect identity as a person reads it.
func effectLabel(id string) string {
	if n, ok := strings.CutPrefix(id, "u/"); ok {
		return "unkeyed #" + n
	}
	return strings.TrimPrefix(id, "k/")
}
func runPrefix(prefix, id string) []byte      { return []byte(prefix + id + "/") }
func worldPrefix(id string) []byte            { return []byte(prefixWorld + id + "/") }
func attemptKey(id string, n int) []byte      { return seqKey(prefixAttempt, id, int64(n)) }
func faultKey(id string, index int) []byte    { return seqKey(prefixFault, id, int64(index)) }
func eventKey(id string, seq int64) []byte    { return seqKey(prefixEvent, id, seq) }
func checkpointKey(id string, s int64) []byte { return seqKey(prefixCheckpoint, id, s) }

func entry(key []byte, v any) (journal.Entry, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return journal.Entry{}, fmt.Errorf("encode %s: %w", key, err)
	}
	return journal.Entry{Key: key, Value: b}, nil
}

// put writes v under key durably.
func put(ctx context.Context, j *journal.Journal, key []byte, v any) error {
	e, err := entry(key, v)
	if err != nil {
		return err
	}
	return j.Commit(ctx, e)
}

// get reads key into v; found is false when the key is absent.
func get(j *journal.Journal, key []byte, v any) (found bool, err error) {
	b, err := j.Get(key)
	if errors.Is(err, journal.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("decode %s: %w", key, err)
	}
	return true, nil
}

// scan decodes every value under prefix, in key order.
func scan[T any](j *journal.Journal, prefix []byte) ([]T, error) {
	var out []T
	err := j.Scan(prefix, func(k, v []byte) error {
		var t T
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("decode %s: %w", k, err)
		}
		out = append(out, t)
		return nil
	})
	return out, err
}
