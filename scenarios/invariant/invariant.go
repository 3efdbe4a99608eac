// Package invariant is the one registry of the invariants a scenario may
// list: each with its name, its kind (always, sometimes, eventually) and its
// judge. A harness holds one (harness.Options.Invariants, Default unless
// set): harness.CheckScenario checks a scenario's names against it, and the
// harness's judge runs its judges.
//
// A judge reads Evidence — the world itself (its own ledger and state, never
// the agent's claims) and the facts of the run's journal — and must not
// change anything. Adding a built-in invariant is one Invariant registered
// in Default; an invariant of a program's own is one Invariant registered in
// the registry it gives its harness.
package invariant

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// Kind is what an invariant promises.
type Kind string

// Kinds.
const (
	Always     Kind = "always"     // safety: must hold over the whole history
	Sometimes  Kind = "sometimes"  // coverage: must have happened at least once
	Eventually Kind = "eventually" // liveness: must hold by the end
)

// Verdicts of a judgement, and of a whole run: the one definition of these
// words (harness/history's VerdictPass, VerdictFail and VerdictUnknown, and
// harness's, are the same constants).
const (
	Pass    = "pass"
	Fail    = "fail"
	Unknown = "unknown"
)

// Names of the invariants this version ships.
const (
	NoDuplicateEffects = "no-duplicate-effects"
	GoalReached        = "goal-reached"
	NoLostProgress     = "no-lost-progress"
	EffectsResolved    = "effects-resolved"
	FaultsFired        = "faults-fired"
	StateConsistent    = "state-consistent"
)

// Judgement is a judge's answer.
type Judgement struct {
	Verdict string // Pass, Fail or Unknown
	Detail  string // the evidence, for a person
}

// Invariant is one checkable property of a run.
type Invariant struct {
	Name string
	Kind Kind
	// Doc says what it is judged from, for a person (docs/runs.md,
	// `overnight scenarios`).
	Doc string
	// Judge judges the run from the evidence. An error means the evidence
	// could not be read (the world's store failed), not a failed invariant.
	Judge func(ctx context.Context, ev *Evidence) (Judgement, error)
	// WhenFaults marks an invariant added to every run that schedules
	// faults, whether the scenario lists it or not.
	WhenFaults bool
}

// Evidence is what judges read.
type Evidence struct {
	World       world.World     // the run's world: its state and ledger
	Task        json.RawMessage // the scenario's task
	Checkpoints []Checkpoint    // in order
	Effects     []Effect        // in the order they were first asked for
	Faults      []Fault         // the schedule, in order
	Done        *Done           // nil: the agent claimed nothing
	// VirtualStart is where the run's virtual clock started.
	VirtualStart time.Time
	// Recovery bounds the virtual time from the last fault's heal to the
	// agent's world-confirmed success (0: no bound).
	Recovery time.Duration
	// Label names an effect identity (the tag the world keeps) for a person.
	Label func(id string) string
}

// Checkpoint is one durable checkpoint.
type Checkpoint struct {
	Attempt, Step int
	Seq           int64
	// Poisoned is the world's reason to contradict the checkpoint's claims
	// ("": it does not, or the checkpoint claims nothing).
	Poisoned string
	// RollbackOf is the poisoned checkpoint's seq this one replaced (0: an
	// agent's own checkpoint).
	RollbackOf int64
}

// Effect is one effect of the run.
type Effect struct {
	ID      string // the identity the world tags its resources with
	InDoubt bool   // no known outcome: an intent without a result, or unknown
}

// Fault is one scheduled fault and what became of it.
type Fault struct {
	Spec          string
	Applied       bool
	Error         string // why it fired but could not be injected
	Met           bool
	MetDetail     string
	HealedVirtual time.Time
}

// Done is the agent's claim.
type Done struct {
	Outcome string
	Virtual time.Time
	// Poisoned is the world's reason to contradict the claims sent with
	// done ("": it does not).
	Poisoned string
	// Claims are the figures it sent with done (its report), judged by a
	// world that judges claims (world.ReportChecker).
	Claims json.RawMessage
}

// Registry holds invariants by name. Registration is explicit.
type Registry struct {
	byName map[string]Invariant
	order  []string
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byName: map[string]Invariant{}} }

// Register adds an invariant; a name registered twice, or an invariant
// without a name, kind or judge, panics (a programming error).
func (r *Registry) Register(inv Invariant) {
	if inv.Name == "" {
		panic("invariant: an invariant needs a name")
	}
	if _, dup := r.byName[inv.Name]; dup {
		panic("invariant: " + inv.Name + " registered twice")
	}
	if inv.Kind == "" || inv.Judge == nil {
		panic("invariant: " + inv.Name + " needs a kind and a judge")
	}
	r.byName[inv.Name] = inv
	r.order = append(r.order, inv.Name)
}

// Lookup returns the invariant called name.
func (r *Registry) Lookup(name string) (Invariant, bool) {
	inv, ok := r.byName[name]
	return inv, ok
}

// Names lists the invariants in registration order.
func (r *Registry) Names() []string { return append([]string(nil), r.order...) }

// All lists the invariants in registration order.
func (r *Registry) All() []Invariant {
	out := make([]Invariant, len(r.order))
	for i, n := range r.order {
		out[i] = r.byName[n]
	}
	return out
}

// Judge runs the judge of the invariant called name. A name the registry
// does not hold is judged Unknown: a run resumed by a harness whose registry
// lacks an invariant its scenario lists cannot say whether it holds.
func (r *Registry) Judge(ctx context.Context, name string, ev *Evidence) (Judgement, error) {
	inv, ok := r.byName[name]
	if !ok {
		return Judgement{Unknown, fmt.Sprintf("no invariant %q is registered with this harness (its invariants: %s), so it was not judged", name, Quoted(r.order))}, nil
	}
	return inv.Judge(ctx, ev)
}

// Defaults are the invariants a scenario checks when it lists none.
func Defaults() []string { return []string{NoDuplicateEffects, GoalReached, NoLostProgress} }

// Default returns a new registry holding the invariants this version
// ships, in a fixed order. Each call returns a registry of its own: a
// program adds its own invariants to it with Register and hands it to its
// harness (harness.Options.Invariants), changing no other registry.
func Default() *Registry {
	r := NewRegistry()
	r.Register(Invariant{Name: NoDuplicateEffects, Kind: Always, Judge: noDuplicateEffects,
		Doc: "the world's ledger: no resource of a non-idempotent kind created twice under one name"})
	r.Register(Invariant{Name: GoalReached, Kind: Eventually, Judge: goalReached,
		Doc: "the world's state, not the agent's claim (and, with limits.recovery, the time to recover after the last fault); a world that judges claims also holds the figures the agent sent with done to what it shows"})
	r.Register(Invariant{Name: NoLostProgress, Kind: Always, Judge: noLostProgress,
		Doc: "the checkpoints: no attempt went back behind a step that was durable when it started"})
	r.Register(Invariant{Name: EffectsResolved, Kind: Always, Judge: effectsResolved,
		Doc: "the effect journal: no effect left in doubt (unknown if any)"})
	r.Register(Invariant{Name: FaultsFired, Kind: Sometimes, Judge: faultsFired, WhenFaults: true,
		Doc: "the fault log: every scheduled fault fired, was injected and met the agent (unknown otherwise)"})
	r.Register(Invariant{Name: StateConsistent, Kind: Always, Judge: stateConsistent,
		Doc: "the claims of checkpoints and done, judged by the world as they were written: no attempt resumed from a poisoned checkpoint, no done the world contradicts"})
	return r
}

func noDuplicateEffects(ctx context.Context, ev *Evidence) (Judgement, error) {
	dups, err := ev.World.Duplicates(ctx)
	if err != nil {
		return Judgement{}, err
	}
	if len(dups) == 0 {
		return Judgement{Pass, "the world shows every resource of a non-idempotent kind created once"}, nil
	}
	var parts []string
	for _, d := range dups {
		var keys []string
		for _, k := range d.Keys {
			keys = append(keys, ev.label(k))
		}
		parts = append(parts, fmt.Sprintf("%s %q created %d times (%s, by %s)", d.Kind, d.Name, d.Count, strings.Join(d.IDs, ", "), strings.Join(keys, ", ")))
	}
	return Judgement{Fail, strings.Join(parts, "; ")}, nil
}

func (ev *Evidence) label(id string) string {
	if ev.Label == nil {
		return id
	}
	return ev.Label(id)
}

func goalReached(ctx context.Context, ev *Evidence) (Judgement, error) {
	var j Judgement
	chk, err := ev.World.CheckGoal(ctx, ev.Task)
	switch {
	case err != nil:
		j = Judgement{Unknown, err.Error()}
	case chk.OK:
		j = Judgement{Pass, chk.Detail}
	default:
		j = Judgement{Fail, chk.Detail}
	}
	done := ev.Done
	if j.Verdict == Pass && done != nil && done.Outcome != protocol.OutcomeSuccess {
		j.Detail += " (although the agent reported failure)"
	}
	if j.Verdict == Fail && done != nil && done.Outcome == protocol.OutcomeSuccess {
		j.Detail = "the agent claimed success, but the world disagrees: " + j.Detail
	}
	if j.Verdict == Pass && done != nil {
		chk, judged, err := world.JudgeReport(ctx, ev.World, ev.Task, done.Claims)
		switch {
		case err != nil:
			j = Judgement{Unknown, j.Detail + "; the agent's claims could not be judged: " + err.Error()}
		case judged && !chk.OK:
			j = Judgement{Fail, "the agent's report disagrees with the world: " + chk.Detail}
		case judged:
			j.Detail += "; its claims agree: " + chk.Detail
		}
	}
	if j.Verdict == Pass && ev.Recovery > 0 {
		j = recoveredInTime(j.Detail, ev)
	}
	return j, nil
}

// recoveredInTime checks the eventually-bound: the agent reported its
// (world-confirmed) success within the bound of virtual time after the last
// fault healed.
func recoveredInTime(detail string, ev *Evidence) Judgement {
	var last time.Time
	for _, f := range ev.Faults {
		if f.Applied && f.HealedVirtual.After(last) {
			last = f.HealedVirtual
		}
	}
	if last.IsZero() {
		last = ev.VirtualStart
	}
	if ev.Done == nil {
		return Judgement{Unknown, detail + "; the agent never reported done, so the time to recover is unknown"}
	}
	took, bound := ev.Done.Virtual.Sub(last), ev.Recovery
	if took > bound {
		return Judgement{Fail, fmt.Sprintf("%s, but only %s after the last fault healed (bound %s)", detail, chaos.FormatDuration(took), chaos.FormatDuration(bound))}
	}
	return Judgement{Pass, fmt.Sprintf("%s, %s after the last fault healed (bound %s)", detail, chaos.FormatDuration(max(took, 0)), chaos.FormatDuration(bound))}
}

// noLostProgress checks that no attempt went back behind a step that was
// already durable when it started: the first checkpoint of every attempt
// is at or beyond the highest step checkpointed before it.
func noLostProgress(_ context.Context, ev *Evidence) (Judgement, error) {
	best, bestAttempt := 0, 0
	seen := map[int]bool{}
	for _, c := range ev.Checkpoints {
		if c.RollbackOf > 0 {
			// A rollback is not lost progress: progress counts from it.
			seen[c.Attempt] = true
			best, bestAttempt = c.Step, c.Attempt
			continue
		}
		if !seen[c.Attempt] {
			seen[c.Attempt] = true
			if c.Attempt != bestAttempt && c.Step < best {
				return Judgement{Fail, fmt.Sprintf("attempt %d checkpointed step %d after step %d was already durable (attempt %d): it started over and lost its progress",
					c.Attempt, c.Step, best, bestAttempt)}, nil
			}
		}
		if c.Step >= best {
			best, bestAttempt = c.Step, c.Attempt
		}
	}
	return Judgement{Pass, fmt.Sprintf("%s over %s never went back (last step %d)", count(len(ev.Checkpoints), "checkpoint"), count(len(seen), "attempt"), best)}, nil
}

// stateConsistent checks that no attempt was built on a poisoned
// checkpoint: the first checkpoint of every later attempt follows no
// poisoned checkpoint that a rollback has not replaced, and the world does
// not contradict the claims sent with done.
func stateConsistent(_ context.Context, ev *Evidence) (Judgement, error) {
	var poisoned *Checkpoint // the first poisoned checkpoint no rollback has replaced
	var fails []string
	rollbacks, npoisoned := 0, 0
	seen := map[int]bool{}
	for i := range ev.Checkpoints {
		c := &ev.Checkpoints[i]
		first := !seen[c.Attempt]
		seen[c.Attempt] = true
		if c.RollbackOf > 0 {
			poisoned = nil
			rollbacks++
			continue
		}
		if first && poisoned != nil && c.Attempt != poisoned.Attempt {
			fails = append(fails, fmt.Sprintf("attempt %d resumed from state built on poisoned checkpoint %d (step %d, attempt %d: %s)",
				c.Attempt, poisoned.Seq, poisoned.Step, poisoned.Attempt, poisoned.Poisoned))
		}
		if c.Poisoned != "" {
			npoisoned++
			if poisoned == nil {
				poisoned = c
			}
		}
	}
	if ev.Done != nil && ev.Done.Poisoned != "" {
		fails = append(fails, "the claims sent with done: "+ev.Done.Poisoned)
	}
	if len(fails) > 0 {
		return Judgement{Fail, strings.Join(fails, "; ")}, nil
	}
	switch {
	case npoisoned == 0:
		return Judgement{Pass, "the world contradicts no claim of the run's checkpoints or done"}, nil
	case rollbacks > 0:
		return Judgement{Pass, fmt.Sprintf("%s poisoned, %s back to a consistent state before any attempt resumed from it", count(npoisoned, "checkpoint"), count(rollbacks, "rollback"))}, nil
	}
	return Judgement{Pass, fmt.Sprintf("%s poisoned, but no later attempt resumed from it", count(npoisoned, "checkpoint"))}, nil
}

func effectsResolved(_ context.Context, ev *Evidence) (Judgement, error) {
	var keys []string
	for _, e := range ev.Effects {
		if e.InDoubt {
			keys = append(keys, ev.label(e.ID))
		}
	}
	if len(keys) > 0 {
		return Judgement{Unknown, fmt.Sprintf("%s in doubt: %s", count(len(keys), "effect"), strings.Join(keys, ", "))}, nil
	}
	if len(ev.Effects) == 1 {
		return Judgement{Pass, "its 1 effect has a known outcome"}, nil
	}
	return Judgement{Pass, fmt.Sprintf("all %d effects have a known outcome", len(ev.Effects))}, nil
}

func faultsFired(_ context.Context, ev *Evidence) (Judgement, error) {
	var missed, failed, unmet []string
	for _, f := range ev.Faults {
		switch {
		case !f.Applied:
			missed = append(missed, f.Spec)
		case f.Error != "":
			failed = append(failed, fmt.Sprintf("%s (%s)", f.Spec, f.Error))
		case !f.Met:
			unmet = append(unmet, fmt.Sprintf("%s (%s)", f.Spec, f.MetDetail))
		}
	}
	var why []string
	if len(missed) > 0 {
		why = append(why, "never fired, so the run did not test them: "+strings.Join(missed, ", "))
	}
	if len(failed) > 0 {
		why = append(why, "fired but could not be injected: "+strings.Join(failed, ", "))
	}
	if len(unmet) > 0 {
		why = append(why, "fired but the agent never met them: "+strings.Join(unmet, ", "))
	}
	if len(why) > 0 {
		return Judgement{Unknown, strings.Join(why, "; ")}, nil
	}
	if len(ev.Faults) == 1 {
		return Judgement{Pass, "the 1 scheduled fault fired and the agent met it"}, nil
	}
	return Judgement{Pass, fmt.Sprintf("all %d scheduled faults fired and the agent met each", len(ev.Faults))}, nil
}

// count writes n and a noun in the number it agrees with: "1 attempt",
// "3 attempts" (nouns whose plural adds an s).
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Quoted lists names quoted and comma-separated, for messages.
func Quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
