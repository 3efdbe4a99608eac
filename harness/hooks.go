package harness

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
)

// Hooks are the extension points of one run. A nil field keeps the
// behaviour of a run without it: every effect passes the gate, no lessons
// are handed out, nobody hears of failures, and the next attempt starts
// after the back-off until a limit ends the run.
type Hooks struct {
	// Gate is the gate stage of the effect path.
	Gate Gate
	// Lessons supplies the lessons each attempt is handed in GET /v1/run.
	Lessons LessonSource
	// Failures hears of every failure as it happens.
	Failures FailureHook
	// Next has a say in whether and when the next attempt starts.
	Next AttemptPolicy
}

// Extension gives runs their hooks (Options.Extension). Hooks is called
// once each time a run is driven — when it starts and when it is resumed —
// so that what it attaches survives a harness crash as the run does.
type Extension interface {
	Hooks(ctx context.Context, h *Harness, rec history.RunRecord, scen *scenarios.Scenario) (Hooks, error)
}

// GateRequest is an effect about to reach the world.
type GateRequest struct {
	RunID    string
	Attempt  int
	EffectID string // the effect's identity in the journal (history.KeyedID, history.UnkeyedID)
	Key      string // as the agent gave it; "" when unkeyed
	Kind     string
	Args     json.RawMessage // canonical
	// ArgsDigest is the effect's arguments digest (history.EffectRecord's
	// ArgsHash, over its kind and canonical args): a person's approval is
	// bound to it.
	ArgsDigest string
	Virtual    time.Time
	// ReadOnly says the world describes the kind as read-only (an MCP
	// tool's readOnlyHint, say): no side effect at all.
	ReadOnly bool
}

// GateDecision is the gate's answer.
type GateDecision struct {
	Allow bool
	// Policy names the rule that decided, for the record.
	Policy string
	// Reason says why, for a person and, on a denial, for the agent (the
	// effect is answered `denied` with it).
	Reason string
}

// Gate decides whether an effect may reach the world. The effect's intent
// is durable when Admit is called, and the run's lock is not held: Admit
// may block (waiting for a person) until ctx ends. An effect answered from
// the journal for a repeated key never reaches the gate. A denied effect is
// not final: a retry of its key asks the gate again.
type Gate interface {
	Admit(ctx context.Context, req GateRequest) (GateDecision, error)
}

// LessonSource supplies the lessons an attempt is handed in GET /v1/run.
// They are asked for once per attempt, before its container starts, and
// journaled with the attempt, so a replay hands out the same ones.
type LessonSource interface {
	Lessons(ctx context.Context, runID string, attempt int) ([]protocol.Lesson, error)
}

// Kinds of Failure.
const (
	FailureEffectRefused = "effect_refused" // the world refused an effect permanently (a 4xx)
	FailureDone          = "done_failure"   // the agent reported done with outcome failure
	FailureCrashLoop     = "crash_loop"     // max_attempts attempts ended without done
	FailureBudget        = "budget"         // the LLM budget is spent
	FailureInvariant     = "invariant"      // an always invariant was seen violated while the run is live
	// FailurePoisoned: the world contradicts the claims of a checkpoint
	// the agent wrote (Checkpoint) or of its done (Checkpoint 0).
	FailurePoisoned = "poisoned_checkpoint"
)

// Failure is something that went wrong in a run, as it happened.
type Failure struct {
	Kind    string
	RunID   string
	Attempt int
	Step    int // the step of the last durable checkpoint
	Detail  string
	// Effect is the refused effect (FailureEffectRefused).
	Effect *history.EffectRecord
	// Invariant names the violated invariant (FailureInvariant).
	Invariant string
	// Checkpoint is the poisoned checkpoint's seq (FailurePoisoned; 0:
	// the claims of done).
	Checkpoint int64
	Virtual    time.Time
}

// FailureHook hears of failures once they are durable, without the run's
// lock held. It must not block for long: what it wants to decide is asked
// of it through AttemptPolicy and Gate.
type FailureHook interface {
	Failed(ctx context.Context, f Failure)
}

// AttemptEnd is what the supervisor knows when it asks whether to go on.
type AttemptEnd struct {
	RunID   string
	Attempt int // the attempt that ended
	End     string
	// Done is the agent's claim, when it made one.
	Done *history.DoneRecord
	// Step is the step of the last durable checkpoint.
	Step int
	// CrashLoop says max_attempts attempts in a row ended without the agent
	// reporting done: without a Renew the run ends.
	CrashLoop bool
}

// AttemptDecision is an AttemptPolicy's answer.
type AttemptDecision struct {
	// Stop ends the run now, with Reason; the invariants judge it, unless
	// Verdict is set.
	Stop    bool
	Reason  string
	Verdict string
	// Reopen, after the agent reported done with outcome failure, takes
	// that claim back (it stays in the trajectory) and starts the next
	// attempt: the agent may act again.
	Reopen bool
	// Renew, after a crash loop, starts the next attempt all the same and
	// counts max_attempts again from it (a lesson was verified). The
	// attempt is journaled as renewed.
	Renew bool
}

// AttemptPolicy has a say in whether and when the next attempt starts. Next
// is asked after every attempt that ends without a limit being hit — also
// when the agent reported done, and when the attempts ran into the crash
// loop limit (AttemptEnd.CrashLoop) — and may block (a reflection deciding)
// until ctx ends. The zero decision goes on as a run without a policy
// would: the next attempt after the back-off, or the end once the agent
// reported done.
type AttemptPolicy interface {
	Next(ctx context.Context, end AttemptEnd) (AttemptDecision, error)
}

// failed tells the failure hook, once mu is released; mu must be held.
func (r *run) failed(f Failure) {
	hook := r.hooks.Failures
	if hook == nil {
		return
	}
	f.RunID, f.Step, f.Virtual = r.rec.ID, r.cp.Step, r.clock.now
	if f.Attempt == 0 {
		f.Attempt = r.sup.current
	}
	r.afterUnlock(func() { hook.Failed(context.Background(), f) })
}

// HeldEffect is an effect waiting at the gate.
type HeldEffect struct {
	// ID is the effect's identity in the journal (history.KeyedID,
	// history.UnkeyedID): a decision addresses it, since an unkeyed call
	// has no key.
	ID string `json:"id"`
	// ArgsDigest is its arguments digest: a decision that names one binds
	// to it.
	ArgsDigest string          `json:"args_digest"`
	Key        string          `json:"key"`
	Kind       string          `json:"kind"`
	Args       json.RawMessage `json:"args"`
	Policy     string          `json:"policy"`
	Since      time.Time       `json:"since"`
	// Waiting says what for: "a person" (approve) or the reflection's id
	// (verify).
	Waiting string `json:"waiting"`
}

// Approvals is implemented by an Extension whose gate holds effects for a
// person to decide. The state dir's control socket, Held and Decide reach
// it; while a run is not live, a decision is journaled and applies when the
// effect reaches the gate again.
type Approvals interface {
	Held(ctx context.Context, h *Harness, runID string) ([]HeldEffect, error)
	Decide(ctx context.Context, h *Harness, runID string, d Decision) error
}

// Decision is a person's decision on an effect held at the gate. It
// applies to that one call: an approval lets nothing else through, not a
// second call with other arguments (held again), while the same call
// repeated under the same key gets the approved call's recorded answer.
type Decision struct {
	// Effect names the held effect: its ID (HeldEffect.ID, "u/3"), or its
	// idempotency key.
	Effect string
	// ArgsDigest, when set, must be the held effect's (HeldEffect.
	// ArgsDigest): what the person saw is what is approved.
	ArgsDigest string
	Approve    bool
	By         string
}

// ErrNotHeld is returned by Decide for an effect id or key no effect of
// the run is held under.
var ErrNotHeld = errors.New("no effect is held under that id or key")

// ErrOtherArgs is returned by Decide when the held effect's arguments
// digest is not the decision's.
var ErrOtherArgs = errors.New("the held call's arguments are not the ones decided on")

// ErrNoApprovals is returned by Held and Decide when no extension holds
// effects for a person.
var ErrNoApprovals = errors.New("no gate holds effects for a person in this harness")

// Held lists the effects of a run waiting at its gate now.
func (h *Harness) Held(ctx context.Context, runID string) ([]HeldEffect, error) {
	if _, err := h.runRecord(runID); err != nil {
		return nil, err
	}
	a, ok := h.opts.Extension.(Approvals)
	if !ok {
		return nil, ErrNoApprovals
	}
	return a.Held(ctx, h, runID)
}

// Decide approves or denies a held effect of a run (its id or idempotency
// key), as the person d.By.
func (h *Harness) Decide(ctx context.Context, runID string, d Decision) error {
	if _, err := h.runRecord(runID); err != nil {
		return err
	}
	a, ok := h.opts.Extension.(Approvals)
	if !ok {
		return ErrNoApprovals
	}
	return a.Decide(ctx, h, runID, d)
}

// fixedLessons hands every attempt the same lessons.
type fixedLessons []protocol.Lesson

func (l fixedLessons) Lessons(context.Context, string, int) ([]protocol.Lesson, error) {
	return append([]protocol.Lesson(nil), l...), nil
}
