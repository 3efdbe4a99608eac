package history

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// Key spaces of the reflection loop and the gate.
const (
	prefixReflection = "refl/"   // refl/<run>/<n> -> ReflectionRecord (rewritten as it goes on)
	prefixGate       = "gate/"   // gate/<run>/<seq> -> GateRecord (append-only)
	prefixLesson     = "lesson/" // lesson/<scenario>/<agent>/<id> -> LessonRecord (across runs)
)

// Reflection stages, in order.
const (
	StageCaptured   = "captured"  // the failure is on record
	StageReplayed   = "replayed"  // the failing attempt was re-run in isolation
	StageDiagnosed  = "diagnosed" // the deterministic diagnosis (and the counterfactual)
	StageLesson     = "lesson"    // a lesson is drawn (or none could be)
	StageVerified   = "verified"  // the lesson was tried where the next attempt will stand
	StageDecided    = "decided"   // verified, or gave up
	DecisionVerify  = "verified"  // the next attempt acts with the lesson; guarded effects pass
	DecisionGaveUp  = "gave_up"   // the gate stays shut for guarded kinds
	DecisionPending = ""          // not decided yet
)

// Trigger is the failure that opened a reflection.
type Trigger struct {
	Kind      string          `json:"kind"` // a harness Failure kind: effect_refused, done_failure, ...
	Attempt   int             `json:"attempt"`
	Step      int             `json:"step"`
	Detail    string          `json:"detail"`
	Effect    *EffectRecord   `json:"effect,omitempty"`
	Invariant string          `json:"invariant,omitempty"`
	Virtual   time.Time       `json:"virtual"`
	Joined    []string        `json:"joined,omitempty"` // failures of the same step that joined it while it was open
	Data      json.RawMessage `json:"data,omitempty"`
}

// ReplayRecord is one isolated re-run of the failing attempt.
type ReplayRecord struct {
	RunID      string `json:"run_id"`
	Verdict    string `json:"verdict"`
	Reproduced bool   `json:"reproduced"` // the failure came back
	Divergence string `json:"divergence,omitempty"`
	Detail     string `json:"detail,omitempty"`
	WallMS     int64  `json:"wall_ms"`
}

// Diagnosis is what the journal and both ledgers say went wrong.
type Diagnosis struct {
	Class    string          `json:"class"` // api_contract_change, world_change, crash_recovery, transient_infrastructure, agent_logic, budget, gate_denied, poisoned_state
	Detail   string          `json:"detail"`
	Evidence json.RawMessage `json:"evidence,omitempty"`
}

// Lesson is a lesson drawn by a reflection: a short text for the agent and
// the structured evidence it rests on.
type Lesson struct {
	ID       string          `json:"id"`
	Text     string          `json:"text"`
	Class    string          `json:"class"` // the diagnosis class it answers
	Evidence json.RawMessage `json:"evidence,omitempty"`
	// By says who wrote the text, as the reflection recorded it: "model
	// PROVIDER:NAME", "the scripted model (…)" (the offline test double),
	// "deterministic" (drawn from the diagnosis: the run has no model) or
	// "deterministic (the model could not write it: …)". The reports say
	// it in plain words.
	By string `json:"by"`
}

// Protocol is the lesson as an agent is handed it.
func (l Lesson) Protocol() protocol.Lesson {
	return protocol.Lesson{ID: l.ID, Text: l.Text, Class: l.Class, Evidence: l.Evidence}
}

// Verification is the lesson tried in isolation where the next attempt will
// stand.
type Verification struct {
	RunID      string            `json:"run_id"`
	Verdict    string            `json:"verdict"`
	Reason     string            `json:"reason"`
	Invariants []InvariantResult `json:"invariants"`
	// WorldHash fingerprints the real world's state it copied (resources
	// and API version); a change before the next attempt makes it stale.
	WorldHash string `json:"world_hash"`
	WorldSeq  int64  `json:"world_seq"`
	Stale     bool   `json:"stale"`  // it went stale and was redone
	Redone    int    `json:"redone"` // how many times
	WallMS    int64  `json:"wall_ms"`
}

// ReflectionRecord is one reflection: rewritten as each stage completes, so
// that a harness that died mid-way resumes it from the last stage on record.
type ReflectionRecord struct {
	ID    string `json:"id"` // r1, r2, ...
	N     int    `json:"n"`
	Stage string `json:"stage"`
	// Trigger, and where the run stood at the failure.
	Trigger         Trigger `json:"trigger"`
	Checkpoint      int64   `json:"checkpoint"`       // the last good checkpoint (seq)
	StartCheckpoint int64   `json:"start_checkpoint"` // the checkpoint the failing attempt started from
	WorldSeq        int64   `json:"world_seq"`        // the real world's ledger at the failure
	WorldState      string  `json:"world_state"`      // blob: the real world's snapshot at the failure
	EventsFrom      int64   `json:"events_from"`      // the events since the last good checkpoint: seqs from..to
	EventsTo        int64   `json:"events_to"`
	// Replay: the failing attempt re-run in isolation.
	Replays []ReplayRecord `json:"replays,omitempty"`
	// ReplaysSkipped says why no replay (nor the counterfactual) ran: the
	// failing attempt held remembered lessons, and the journal alone shows
	// the diagnosis (an API version change in the world's ledger before the
	// refusal, a denial by the gate). Never set for a class the replays
	// decide (transient or not).
	ReplaysSkipped string `json:"replays_skipped,omitempty"`
	Divergence     string `json:"divergence,omitempty"` // the first request that differed from the recording
	// Diagnosis, with the counterfactual re-run without the run's faults.
	Diagnosis      *Diagnosis    `json:"diagnosis,omitempty"`
	Counterfactual *ReplayRecord `json:"counterfactual,omitempty"`
	// Remembered are the remembered lessons the failing attempt was handed
	// that answer the diagnosis, each verified against this run's world
	// before a new lesson is drawn (newest first, until one passes).
	Remembered []RememberedTry `json:"remembered,omitempty"`
	// FromMemory says Lesson is a remembered one that passed (its id is its
	// memory id): the attempts handed it from memory hold it already.
	FromMemory   bool          `json:"from_memory,omitempty"`
	Lesson       *Lesson       `json:"lesson,omitempty"`
	Verification *Verification `json:"verification,omitempty"`
	Decision     string        `json:"decision"`
	Reason       string        `json:"reason"`
	// LLM is what the reflection's own model calls (the lesson) cost, apart
	// from the agent's budget.
	LLM       *LLMTotals `json:"llm,omitempty"`
	OpenedAt  time.Time  `json:"opened_at"`
	DecidedAt time.Time  `json:"decided_at,omitzero"`
	// Consumed is the attempt that started with the verified lesson (0:
	// none yet).
	Consumed int `json:"consumed,omitempty"`
}

// RememberedTry is one remembered lesson verified by a reflection.
type RememberedTry struct {
	Lesson       Lesson       `json:"lesson"`
	Run          string       `json:"run"` // the run it was drawn in
	Verification Verification `json:"verification"`
}

// Decided reports whether the reflection has decided.
func (r *ReflectionRecord) Decided() bool { return r.Decision != DecisionPending }

// LessonID is the id of the lesson a reflection of run draws.
func LessonID(run, reflection string) string { return fmt.Sprintf("lesson-%s-%s", run, reflection) }

// Gate decisions.
const (
	GateHeld     = "held"     // waiting: a reflection, or a person
	GateReleased = "released" // executed on the strength of a passed verification
	GateApproved = "approved" // a person approved it
	GateDenied   = "denied"   // never executed: the policy, a person, a reflection that gave up, or the wait timed out
)

// GateRecord is one decision of the gate on an effect, with its evidence.
type GateRecord struct {
	Seq        int64           `json:"seq"`
	EffectID   string          `json:"effect_id"`
	Key        string          `json:"key,omitempty"`
	Kind       string          `json:"kind"`
	Args       json.RawMessage `json:"args,omitempty"`
	ArgsDigest string          `json:"args_digest,omitempty"` // the effect's ArgsHash: a person's decision binds to it
	Attempt    int             `json:"attempt"`
	Policy     string          `json:"policy"`
	Rule       int             `json:"rule"` // index of the scenario's gate rule that matched
	Decision   string          `json:"decision"`
	Reason     string          `json:"reason,omitempty"`
	Reflection string          `json:"reflection,omitempty"` // the reflection whose state decided (verify)
	By         string          `json:"by"`                   // gate, person:<who>, timeout
	Since      time.Time       `json:"since"`                // when it was first held (wall clock)
	At         time.Time       `json:"at"`                   // when this decision was made (wall clock)
	Virtual    time.Time       `json:"virtual"`
}

// LessonRecord is a lesson kept in memory across runs of a scenario and
// agent, with the verifications it took part in.
type LessonRecord struct {
	Lesson
	Scenario      string          `json:"scenario"`
	Agent         string          `json:"agent"`
	Run           string          `json:"run"`        // the run it was drawn in
	Reflection    string          `json:"reflection"` // and by which reflection
	CreatedAt     time.Time       `json:"created_at"`
	Verifications []LessonOutcome `json:"verifications"`
	Retired       bool            `json:"retired,omitempty"` // it kept failing: no longer handed out
}

// LessonOutcome is one verification a lesson took part in.
type LessonOutcome struct {
	Run        string `json:"run"`
	Reflection string `json:"reflection"`
	Verdict    string `json:"verdict"`
}

// ReflectionEntry is a reflection of run id.
func ReflectionEntry(id string, r ReflectionRecord) Entry {
	return Entry{seqKey(prefixReflection, id, int64(r.N)), r}
}

// GateEntry is a gate decision of run id.
func GateEntry(id string, g GateRecord) Entry { return Entry{seqKey(prefixGate, id, g.Seq), g} }

// LessonEntry is a lesson in memory.
func LessonEntry(l LessonRecord) Entry {
	return Entry{[]byte(prefixLesson + l.Scenario + "/" + agentKey(l.Agent) + "/" + l.ID), l}
}

// agentKey names the default agent in a key.
func agentKey(agent string) string {
	if agent == "" {
		return "-"
	}
	return agent
}

// Reflections returns the run's reflections, in order.
func (r *Reader) Reflections(id string) ([]ReflectionRecord, error) {
	return wrap(scan[ReflectionRecord](r.j, runPrefix(prefixReflection, id)))("reflections", id)
}

// GateDecisions returns the run's gate decisions, in order.
func (r *Reader) GateDecisions(id string) ([]GateRecord, error) {
	return wrap(scan[GateRecord](r.j, runPrefix(prefixGate, id)))("gate decisions", id)
}

// Lessons returns the lessons in memory for a scenario and agent, oldest
// first.
func (r *Reader) Lessons(scenario, agent string) ([]LessonRecord, error) {
	ls, err := scan[LessonRecord](r.j, []byte(prefixLesson+scenario+"/"+agentKey(agent)+"/"))
	if err != nil {
		return nil, fmt.Errorf("read lessons of %s/%s: %w", scenario, agentKey(agent), err)
	}
	sortLessons(ls)
	return ls, nil
}

func sortLessons(ls []LessonRecord) {
	sort.SliceStable(ls, func(i, j int) bool { return ls[i].CreatedAt.Before(ls[j].CreatedAt) })
}
