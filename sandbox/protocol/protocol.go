// Package protocol holds the wire types of gateway protocol v1: the JSON
// bodies exchanged over HTTP between an agent inside a sandbox and the
// harness's gateway. It is shared by the gateway server (harness/gateway) and
// the Go agent SDK (sandbox/agent), and has no dependencies beyond the
// standard library so that any agent can import it cheaply.
//
// The protocol is documented for agents in other languages in
// PROTOCOL.md (next to this file); a change here that is not backward compatible needs a new
// version prefix (/v2).
package protocol

import (
	"encoding/json"
	"time"
)

// Version is the protocol version served under the /v1 prefix.
const Version = "v1"

// Environment variables the harness sets for every agent.
const (
	EnvSocket  = "OVERNIGHT_SOCKET"  // path of the gateway's unix socket inside the sandbox
	EnvURL     = "OVERNIGHT_URL"     // http://127.0.0.1:7070, the init's relay to the socket
	EnvToken   = "OVERNIGHT_TOKEN"   // the attempt's bearer token (a fencing token)
	EnvRunID   = "OVERNIGHT_RUN_ID"  // the run's id (informational; keys are namespaced by the gateway)
	EnvAttempt = "OVERNIGHT_ATTEMPT" // the attempt number, 1-based
)

// Error codes carried in ErrorBody.
const (
	CodeUnauthorized   = "unauthorized" // 401: no or unknown token
	CodeFenced         = "fenced"       // 409: the token belongs to an earlier attempt
	CodeConflict       = "conflict"     // 409: stale expect_seq
	CodeKeyReused      = "key_reused"   // 409: same idempotency key, different arguments
	CodeBadRequest     = "bad_request"  // 400: malformed JSON or a missing/invalid field
	CodeNotFound       = "not_found"    // 404: no such endpoint
	CodeMethod         = "method_not_allowed"
	CodeTooLarge       = "too_large"       // 413: body over the limit
	CodeNotImplemented = "not_implemented" // 501: endpoint reserved for a later version
	CodeRunEnded       = "run_ended"       // 409: the run already finished
	CodeInterrupted    = "interrupted"     // 409: a sleep was cut short by a fault; sleep again
	CodeInternal       = "internal"        // 500: the harness failed (journal, world)
)

// ErrorBody is the body of every non-2xx response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Param names the refused field (the LLM endpoint, OpenAI-style).
	Param string `json:"param,omitempty"`
}

// Lesson is a lesson drawn by an earlier reflection, handed to the agent:
// a short text, and the structured evidence it rests on — the diagnosis'
// class (api_contract_change, world_change, crash_recovery, transient_infrastructure,
// agent_logic, budget) and, for example, the world's error with its
// details.
type Lesson struct {
	ID       string          `json:"id"`
	Text     string          `json:"text"`
	Class    string          `json:"class,omitempty"`
	Evidence json.RawMessage `json:"evidence,omitempty"`
}

// RunInfo is the answer of GET /v1/run.
type RunInfo struct {
	RunID    string          `json:"run_id"`
	Attempt  int             `json:"attempt"`
	Scenario string          `json:"scenario"`
	Task     json.RawMessage `json:"task"`
	Lessons  []Lesson        `json:"lessons"`
	Now      time.Time       `json:"now"`
}

// Checkpoint is the answer of GET /v1/checkpoint. Seq is 0 and State is
// null before the first checkpoint.
type Checkpoint struct {
	Seq   int64           `json:"seq"`
	Step  int             `json:"step"`
	State json.RawMessage `json:"state"`
}

// PutCheckpoint is the body of PUT /v1/checkpoint. ExpectSeq, when present,
// must equal the current seq or the write is refused with 409 conflict.
type PutCheckpoint struct {
	Step      int             `json:"step"`
	State     json.RawMessage `json:"state"`
	ExpectSeq *int64          `json:"expect_seq,omitempty"`
	// Claims are what the agent says about the world as it stands at this
	// checkpoint: a JSON object whose every member is one claim
	// ({"exists": {"kind": "database", "name": "prod-db"}}), or a list of
	// such objects. The harness judges them against the world and journals
	// the judgement with the checkpoint (docs/state.md).
	Claims json.RawMessage `json:"claims,omitempty"`
}

// CheckpointAck is the answer of PUT /v1/checkpoint.
type CheckpointAck struct {
	Seq int64 `json:"seq"`
}

// EffectRequest is the body of POST /v1/effects. An empty Key runs the
// effect unprotected (reported as unkeyed).
type EffectRequest struct {
	Key  string          `json:"key,omitempty"`
	Kind string          `json:"kind"`
	Args json.RawMessage `json:"args"`
}

// Effect statuses.
const (
	StatusDone    = "done"
	StatusFailed  = "failed"
	StatusDenied  = "denied"
	StatusUnknown = "unknown"
)

// EffectError is the world's refusal of an effect. Transient errors (5xx
// class) may be retried with the same key; permanent ones (4xx class) are
// final for the same arguments.
type EffectError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Status    int    `json:"status"`
	Transient bool   `json:"transient"`
	// Details are machine-readable hints an agent can act on to correct
	// its request, e.g. {"renamed": {"database_id": "db_id"}}; their shape
	// depends on Code. Absent when the world has none.
	Details json.RawMessage `json:"details,omitempty"`
}

// EffectResult is the answer of POST /v1/effects. A failed effect is an
// answer the agent must handle, not a transport error.
type EffectResult struct {
	Key      string          `json:"key,omitempty"`
	Status   string          `json:"status"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    *EffectError    `json:"error,omitempty"`
	Replayed bool            `json:"replayed"`
}

// Clock is the answer of GET /v1/clock and POST /v1/sleep.
type Clock struct {
	Now time.Time `json:"now"`
}

// SleepRequest is the body of POST /v1/sleep: exactly one of Until
// (safe to retry) or Seconds.
type SleepRequest struct {
	Until   *time.Time `json:"until,omitempty"`
	Seconds *float64   `json:"seconds,omitempty"`
}

// Event is the body of POST /v1/events.
type Event struct {
	Type    string          `json:"type"`
	Message string          `json:"message,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Outcomes of POST /v1/done.
const (
	OutcomeSuccess = "success"
	OutcomeFailure = "failure"
)

// Done is the body of POST /v1/done: the agent's own claim.
type Done struct {
	Outcome string          `json:"outcome"`
	Summary string          `json:"summary,omitempty"`
	Claims  json.RawMessage `json:"claims,omitempty"`
}
