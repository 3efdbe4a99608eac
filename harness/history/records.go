package history

import (
	"encoding/json"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/sandbox/protocol"
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
	// Isolated says the run is an isolated re-run of another (Parent): its
	// world is a shadow in a key space of its own, never the real one.
	Isolated *Isolation `json:"isolated,omitempty"`
	// WorldURL, when set, is the world the run acts on instead of the
	// scenario's: one served over the world protocol at this base URL
	// (--world URL).
	WorldURL string `json:"world_url,omitempty"`
	// HTTPReplay, when set, is the run whose exchanges with the scenario's
	// HTTP APIs answer this run's requests (--http-replay).
	HTTPReplay string `json:"http_replay,omitempty"`
	// MCPReplay, when set, is the run whose recording of the scenario's
	// MCP servers answers this run's tool calls (--mcp-replay).
	MCPReplay string `json:"mcp_replay,omitempty"`
	// Extras are the run's options for its extension (the reflection
	// loop's lessons mode), kept so a resume runs with the same.
	Extras map[string]string `json:"extras,omitempty"`
}

// Isolation describes an isolated run: what it was forked from and what it
// stood on.
type Isolation struct {
	Parent string `json:"parent"` // the run it re-runs
	// FromCheckpoint is the parent's checkpoint seq it started from (0:
	// from the beginning).
	FromCheckpoint int64 `json:"from_checkpoint"`
	// WorldSeq is the point of the parent world's ledger its shadow world
	// was rebuilt at.
	WorldSeq int64 `json:"world_seq"`
	// Purpose says why it ran, for a person (e.g. "replay 2 of 3").
	Purpose string `json:"purpose,omitempty"`
	// Lessons are handed to each of its attempts.
	Lessons []protocol.Lesson `json:"lessons,omitempty"`
	// ReplayAttempt, when its model is a replay of the parent's recording,
	// is the parent's attempt its first attempt's calls are matched to.
	ReplayAttempt int `json:"replay_attempt,omitempty"`
	// ForkedOrder is the order of the last of the parent's effects copied
	// at the fork: the isolated run's own effects come after it.
	ForkedOrder int64 `json:"forked_order,omitempty"`
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
	// container was seen dead; when the attempt's sandbox was handed to it
	// (a standby's handover written, or a cold start's Start returned);
	// and when the attempt first read its checkpoint (how fast it got back
	// to work).
	KillIssuedAt   time.Time `json:"kill_issued_at,omitzero"`
	ExitedAt       time.Time `json:"exited_at,omitzero"`
	HandedOverAt   time.Time `json:"handed_over_at,omitzero"`
	FirstResumedAt time.Time `json:"first_resumed_at,omitzero"`
	// Lessons are the lessons the attempt was handed in GET /v1/run.
	Lessons []protocol.Lesson `json:"lessons,omitempty"`
	// WorldSeq is where the world's ledger stood when the attempt began
	// (the world an isolated re-run of it is rebuilt at).
	WorldSeq int64 `json:"world_seq,omitempty"`
	// Renewed marks the attempt a crash loop's reflection let start: a
	// lesson was verified, and max_attempts counts again from here.
	Renewed bool `json:"renewed,omitempty"`
	// Standby marks an attempt that took over a sandbox started ahead
	// (sandbox.Standbys) instead of starting one.
	Standby bool `json:"standby,omitempty"`
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
	// Where the rest of the run stood when it was written, so that a run
	// forked from it (an isolated re-run) starts exactly there: how far the
	// world's ledger had got, how many effect intents and LLM calls the run
	// had made.
	WorldSeq int64 `json:"world_seq,omitempty"`
	Intents  int   `json:"intents,omitempty"`
	LLMCalls int   `json:"llm_calls,omitempty"`
	// Wall is when it was written (for a report's timeline).
	Wall time.Time `json:"wall,omitzero"`
	// Claims are what the agent said about the world with it (canonical
	// JSON; nil: nothing), and Consistency the world's judgement of them,
	// made as it was written and journaled in the same commit.
	Claims      json.RawMessage `json:"claims,omitempty"`
	Consistency *Consistency    `json:"consistency,omitempty"`
	// RollbackOf is the seq of the poisoned checkpoint this one replaced:
	// written by the harness (rollback: consistent), it carries the state
	// of the newest consistent checkpoint before it, RollbackFrom.
	RollbackOf   int64 `json:"rollback_of,omitempty"`
	RollbackFrom int64 `json:"rollback_from,omitempty"`
	// EffectOrder is the order of the last effect journaled when it was
	// written; a rollback lists in RolledPast the effects journaled after
	// the checkpoint it went back to (the world keeps them: they are shown,
	// not undone).
	EffectOrder int64    `json:"effect_order,omitempty"`
	RolledPast  []string `json:"rolled_past,omitempty"`
}

// Poisoned reports whether the world contradicts the checkpoint's claims.
func (c CheckpointRecord) Poisoned() bool { return c.Consistency.Poisoned() }

// Consistency verdicts.
const (
	Consistent = "consistent" // every claim holds
	Poisoned   = "poisoned"   // the world contradicts a claim
	// ConsistencyUnknown: no claim is contradicted, but the world could
	// not judge one.
	ConsistencyUnknown = "unknown"
)

// Consistency is the world's judgement of a checkpoint's or a done's
// claims.
type Consistency struct {
	Verdict string `json:"verdict"` // Consistent, Poisoned or ConsistencyUnknown
	// Reason says why, for a person: the contradicted claims first.
	Reason string `json:"reason,omitempty"`
	// Claims are the verdicts claim by claim, in the order of the claims
	// (whose values the record that carries them keeps).
	Claims []ClaimVerdict `json:"claims,omitempty"`
}

// ClaimVerdict is one claim's judgement in a Consistency.
type ClaimVerdict struct {
	Name    string `json:"name"`
	Verdict string `json:"verdict"` // world.ClaimHolds, ClaimContradicted or ClaimUnknown
	Detail  string `json:"detail,omitempty"`
}

// Poisoned reports whether the verdict is Poisoned (false for nil: no claims).
func (c *Consistency) Poisoned() bool { return c != nil && c.Verdict == Poisoned }

// EffectIntent is an effect record's status between its intent and its
// result.
const EffectIntent = "intent"

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
	Status     string                `json:"status"` // intent, done, failed, denied, unknown
	Result     json.RawMessage       `json:"result,omitempty"`
	Error      *protocol.EffectError `json:"error,omitempty"`
	Attempt    int                   `json:"attempt"`
	Intents    int                   `json:"intents"`    // times an intent was journaled (the effect: trigger counts these)
	Executions int                   `json:"executions"` // times the world was asked
	Replays    int                   `json:"replays"`    // times a recorded result was returned
	Reconciled bool                  `json:"reconciled,omitempty"`
	Virtual    time.Time             `json:"virtual"`
	// Wall is when it was last written (for a report's timeline).
	Wall time.Time `json:"wall,omitzero"`
}

// Final reports whether a repeat of the key returns the recorded result:
// done is final, and so is a permanent refusal by the world. A denial by the
// gate is not: the gate may decide otherwise next time.
func (e *EffectRecord) Final() bool {
	switch e.Status {
	case protocol.StatusDone:
		return true
	case protocol.StatusFailed:
		return e.Error == nil || !e.Error.Transient
	}
	return false
}

// InDoubt reports whether the effect's outcome is not known: an intent
// without a result, or unknown.
func (e *EffectRecord) InDoubt() bool {
	return e.Status == EffectIntent || e.Status == protocol.StatusUnknown
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
	// Evidence is what judging Met rests on, journaled so that a resumed
	// run judges exactly as the uninterrupted one would.
	Evidence chaos.Evidence `json:"evidence"`
	// DownUntil is the end of the down window a process fault opened
	// (stop/D): no attempt starts before it (virtual time).
	DownUntil time.Time `json:"down_until,omitzero"`
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
	// Consistency is the world's judgement of Claims, made as done was
	// written (nil: no claims).
	Consistency *Consistency `json:"consistency,omitempty"`
	// Withdrawn says the run went on after the claim (an attempt policy
	// reopened it): it is no longer the agent's last word.
	Withdrawn bool `json:"withdrawn,omitempty"`
	// Report is the agent's report file as the harness found it when the
	// agent reported done; nil when the scenario names none.
	Report *ReportRecord `json:"report,omitempty"`
}

// What became of the agent's report file (ReportRecord.Status).
const (
	// ReportKept: it was copied out of the sandbox and kept as a blob.
	ReportKept = "kept"
	// ReportMissing: the agent wrote no such file. Not an error of the
	// run; the report says so.
	ReportMissing = "missing"
	// ReportUnreadable: there is something at the path that could not be
	// kept (a directory, a link out of the workspace, a file over the
	// scenario's max_bytes, a backend that cannot copy a file out); Error
	// says which.
	ReportUnreadable = "unreadable"
)

// ReportRecord is the agent's report file (the scenario's report:), as
// the harness found it in the sandbox when the agent reported done —
// journaled with the claim, its content a blob.
type ReportRecord struct {
	Path   string `json:"path"`
	Status string `json:"status"`           // ReportKept, ReportMissing or ReportUnreadable
	SHA256 string `json:"sha256,omitempty"` // the content's hash, its blob (kept)
	Bytes  int64  `json:"bytes"`            // its size (kept)
	Error  string `json:"error,omitempty"`  // why it was not kept (unreadable)
}

// LLMRecord is one LLM exchange, as journaled: what was asked, what came
// back (or which fault answered instead), and what it cost.
type LLMRecord struct {
	Seq          int64               `json:"seq"`
	Attempt      int                 `json:"attempt"`
	Call         int                 `json:"call"`    // the n-th LLM call of the run (the llm:N trigger counts these)
	Ordinal      int                 `json:"ordinal"` // the n-th call of the attempt that reached the model (0: a fault answered)
	RequestHash  string              `json:"request_hash"`
	Request      json.RawMessage     `json:"request,omitempty"` // canonical
	RequestBlob  string              `json:"request_blob,omitempty"`
	Response     json.RawMessage     `json:"response,omitempty"`
	ResponseBlob string              `json:"response_blob,omitempty"`
	Status       int                 `json:"status"` // 200, or the error status answered
	Error        string              `json:"error,omitempty"`
	Code         string              `json:"code,omitempty"`  // the error's code, replayed exactly
	Param        string              `json:"param,omitempty"` // the error's param
	RetryAfterMS int64               `json:"retry_after_ms,omitempty"`
	Fault        string              `json:"fault,omitempty"` // the LLM fault that answered or damaged it
	Provider     string              `json:"provider"`
	Model        string              `json:"model"`
	Usage        *protocol.ChatUsage `json:"usage,omitempty"`
	CostUSD      float64             `json:"cost_usd"`
	Virtual      time.Time           `json:"virtual"`
	WallMicros   int64               `json:"wall_us"`
}

// AttemptLog is one attempt's kept output.
type AttemptLog struct {
	Attempt   int       `json:"attempt"`
	Container string    `json:"container"`
	End       string    `json:"end"`
	ExitCode  *int      `json:"exit_code,omitempty"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	Stdout    string    `json:"stdout"`
	Stderr    string    `json:"stderr"`
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

// EventMCPRefused is the type of the harness event journaled for a
// tools/call the gateway refused before it became an effect: a call to a
// tool an mcp-tool-gone fault took away, or a call in the old shape of a
// tool an mcp-schema fault changed. Its data is an MCPRefusal. It is no
// effect: effect counts, no-duplicate-effects and history_digest do not
// see it.
const EventMCPRefused = "mcp.refused"

// MCPRefusal is what the journal keeps of a tools/call the gateway
// refused (the data of an EventMCPRefused event).
type MCPRefusal struct {
	Tool       string `json:"tool"`            // as the agent sees it: <server>__<tool>
	Key        string `json:"key,omitempty"`   // the agent's _meta key ("": none)
	ArgsDigest string `json:"args_digest"`     // SHA-256 of the arguments as sent
	Reason     string `json:"reason"`          // the tool error the agent got
	Fault      string `json:"fault,omitempty"` // the fault's spec
	Attempt    int    `json:"attempt"`         // the attempt that called
	Seq        int64  `json:"seq"`             // the event's sequence number (set by MCPRefusals)
	// Virtual is when the gateway refused it, in the run's virtual time
	// (set by MCPRefusals).
	Virtual time.Time `json:"virtual,omitzero"`
}

// MCPRefusals are the refused tools/calls among a run's events, in order.
// An event whose data cannot be read is skipped.
func MCPRefusals(events []EventRecord) []MCPRefusal {
	return eventData(events, EventMCPRefused, func(r *MCPRefusal, ev EventRecord) { r.Seq, r.Virtual = ev.Seq, ev.Virtual })
}

// eventData reads the data of a run's events of type typ, in order, set
// filling in what each one takes from its event (its seq); an event whose
// data cannot be read is skipped.
func eventData[T any](events []EventRecord, typ string, set func(*T, EventRecord)) []T {
	var out []T
	for _, ev := range events {
		if ev.Type != typ {
			continue
		}
		var d T
		if json.Unmarshal(ev.Data, &d) != nil {
			continue
		}
		set(&d, ev)
		out = append(out, d)
	}
	return out
}

// EventMCPListChanged is the type of the harness event journaled for each
// notifications/tools/list_changed the gateway's MCP endpoint delivered to
// an agent's client: after an mcp-tool-gone or mcp-schema fault changed
// (or healed) the tools the agent sees. Its data is an MCPListChange. Like
// every event, history_digest does not see it: whether a client held a
// stream open to hear it differs between honest runs.
const EventMCPListChanged = "mcp.list_changed"

// MCPListChange is what the journal keeps of a list_changed notification
// delivered (the data of an EventMCPListChanged event).
type MCPListChange struct {
	Attempt int    `json:"attempt"`           // the attempt whose client got it
	Session string `json:"session,omitempty"` // its Mcp-Session-Id ("": a subscriptions/listen stream)
	Stream  string `json:"stream"`            // "GET" (the session's stream) or "subscriptions/listen"
	// Changed are the tools the agent is served otherwise than the
	// servers list them when it was sent, each with how and by which
	// fault ("counters__pay gone (mcp-tool-gone:counters__pay@step:1)");
	// empty once every change healed.
	Changed []string `json:"changed"`
	Seq     int64    `json:"seq"` // the event's sequence number (set by MCPListChanges)
}

// MCPListChanges are the list_changed notifications among a run's events,
// in order. An event whose data cannot be read is skipped.
func MCPListChanges(events []EventRecord) []MCPListChange {
	return eventData(events, EventMCPListChanged, func(c *MCPListChange, ev EventRecord) { c.Seq = ev.Seq })
}
