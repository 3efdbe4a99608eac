package reflect

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/invariant"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/httpworld"
)

// Diagnosis classes.
const (
	ClassAPIContract   = "api_contract_change"      // the world's API changed under the agent (its errors and details say how)
	ClassCrashRecovery = "crash_recovery"           // progress duplicated or lost across attempts
	ClassTransient     = "transient_infrastructure" // the failure needed the run's faults or timing: it does not come back on its own
	ClassAgentLogic    = "agent_logic"              // the agent's own mistake (a bad request, a claim the world does not show)
	ClassBudget        = "budget"                   // the LLM budget was spent
	ClassGateDenied    = "gate_denied"              // the gate denied the agent's effect and the agent stopped: the harness's own decision, never the infrastructure's
	ClassPoisonedState = "poisoned_state"           // the agent recorded as done what the world does not show: its checkpoint (or done) is poisoned, and what it builds on it inherits the mistake
	ClassWorldChange   = "world_change"             // the world changed under the agent by another world event than an API version (a dependency update, ...) before it refused the agent's request
)

// diagnose classifies a failure, deterministically, from the journal and
// the world's ledger (run: the real run's history), the replays and the
// counterfactual re-run without the run's faults (nil when not run).
//
// tail is the end of the failing attempt's output (stderr, else stdout):
// for a crash loop, what the agent said as it died.
func diagnose(t history.Trigger, run *history.Run, replays []history.ReplayRecord, counterfactual *history.ReplayRecord, tail string) history.Diagnosis {
	evidence := map[string]any{"trigger": t.Kind, "step": t.Step}
	d := history.Diagnosis{}
	reproducedAll, reproducedAny := len(replays) > 0, false
	for _, r := range replays {
		reproducedAll = reproducedAll && r.Reproduced
		reproducedAny = reproducedAny || r.Reproduced
	}
	refused := refusal(t, run)
	denied := denial(t, run)
	switch {
	case t.Kind == harness.FailureBudget:
		d.Class, d.Detail = ClassBudget, t.Detail
	case denied != nil:
		// Before the replays' say: an isolated re-run has no gate, so a
		// failure that rests on a denial never comes back there — it is
		// not transient for that.
		reason := ""
		if denied.Error != nil {
			reason = denied.Error.Message
		}
		d.Class, d.Detail = ClassGateDenied, fmt.Sprintf("the gate denied %s (%s); the agent then stopped (%s)", denied.Kind, reason, t.Kind)
		evidence["effect"] = map[string]any{"kind": denied.Kind, "args": denied.Args}
		evidence["denied"] = reason
	case t.Kind == harness.FailurePoisoned:
		// Before the replays' say: the world contradicted the agent's own
		// record of what it did, whatever made the step fail.
		d.Class, d.Detail = ClassPoisonedState, "the agent recorded as done what the world does not show: "+t.Detail
	case t.Kind == harness.FailureInvariant && t.Invariant == invariant.StateConsistent:
		d.Class, d.Detail = ClassPoisonedState, fmt.Sprintf("%s was violated: %s", t.Invariant, t.Detail)
		evidence["invariant"] = t.Invariant
	case t.Kind == harness.FailureInvariant && (t.Invariant == "no-duplicate-effects" || t.Invariant == "no-lost-progress"):
		d.Class, d.Detail = ClassCrashRecovery, fmt.Sprintf("%s was violated: %s", t.Invariant, t.Detail)
		evidence["invariant"] = t.Invariant
	case len(replays) > 0 && !reproducedAny:
		d.Class, d.Detail = ClassTransient, "the failure did not come back in "+history.Count(len(replays), "isolated replay")
	case refused != nil:
		evidence["effect"] = map[string]any{"kind": refused.Kind, "args": refused.Args}
		evidence["error"] = refused.Error
		if ev, ok := eventBefore(run, refused); ok && ev.kind == world.EventAPIVersion {
			var a struct {
				Version string `json:"version"`
			}
			_ = json.Unmarshal(ev.args, &a)
			d.Class = ClassAPIContract
			d.Detail = fmt.Sprintf("the world's API changed to %s (%s) before %s, which it refused: %s (%s)",
				a.Version, ev.at, refused.Kind, refused.Error.Message, refused.Error.Code)
			evidence["api_version"] = a.Version
		} else if ok {
			d.Class = ClassWorldChange
			d.Detail = fmt.Sprintf("the world changed under the agent: %s (%s) before %s, which it refused: %s (%s)",
				ev.text(), ev.at, refused.Kind, refused.Error.Message, refused.Error.Code)
			evidence["world_event"] = map[string]any{"kind": ev.kind, "args": ev.args}
		} else {
			d.Class = ClassAgentLogic
			d.Detail = fmt.Sprintf("the agent sent %s, which the world refused: %s (%s)", refused.Kind, refused.Error.Message, refused.Error.Code)
		}
	case t.Kind == harness.FailureCrashLoop:
		d.Class, d.Detail = crashLoop(t, run, tail, evidence)
	default:
		d.Class, d.Detail = ClassAgentLogic, t.Kind+": "+t.Detail
	}
	if counterfactual != nil {
		evidence["counterfactual"] = map[string]any{"reproduced": counterfactual.Reproduced, "verdict": counterfactual.Verdict}
		switch {
		case !counterfactual.Reproduced && d.Class == ClassAgentLogic && !hasWorldEvent(run):
			d.Class = ClassTransient
			d.Detail += "; without the run's faults it does not happen"
		case !counterfactual.Reproduced:
			d.Detail += "; without the run's faults it does not happen (the faults triggered it)"
		default:
			d.Detail += "; it happens without the run's faults too"
		}
	}
	if len(replays) > 0 && reproducedAny && !reproducedAll {
		d.Detail += fmt.Sprintf("; flaky: it came back in some of %d replays only", len(replays))
	}
	d.Evidence, _ = json.Marshal(evidence)
	return d
}

// crashLoop diagnoses attempts that kept ending without done: a
// crash-recovery bug when they resumed from a checkpoint and died before
// checkpointing anything of their own, else the agent's own logic.
func crashLoop(t history.Trigger, run *history.Run, tail string, evidence map[string]any) (class, detail string) {
	if tail != "" {
		evidence["output"] = tail
	}
	if run == nil {
		return ClassAgentLogic, "the agent's attempts kept ending without it reporting done: " + t.Detail
	}
	var ends []map[string]any
	for _, a := range run.Attempts {
		if a.N <= t.Attempt && !a.EndedAt.IsZero() {
			e := map[string]any{"attempt": a.N, "end": a.End}
			if a.ExitCode != nil {
				e["exit_code"] = *a.ExitCode
			}
			ends = append(ends, e)
		}
	}
	evidence["attempts"] = ends
	resumed, by, progressed := -1, 0, false
	for _, c := range run.Checkpoints {
		switch {
		case c.Attempt < t.Attempt:
			resumed, by = c.Step, c.Attempt
		case c.Attempt == t.Attempt:
			progressed = true
		}
	}
	said := ""
	if tail != "" {
		said = "; the last one's output: " + tail
	}
	if resumed >= 0 && !progressed {
		evidence["resumed_step"] = resumed
		return ClassCrashRecovery, fmt.Sprintf("%s in a row resumed from the checkpoint at step %d and died before checkpointing anything%s", history.Count(t.Attempt-by, "attempt"), resumed, said)
	}
	return ClassAgentLogic, "the agent's attempts kept ending without it reporting done (" + t.Detail + ")" + said
}

// refusal is the effect the world refused that the failure rests on: the
// trigger's, else the failing attempt's last permanent refusal.
func refusal(t history.Trigger, run *history.Run) *history.EffectRecord {
	if t.Effect != nil && t.Effect.Error != nil {
		return t.Effect
	}
	if run == nil {
		return nil
	}
	var last *history.EffectRecord
	for i := range run.Effects {
		e := &run.Effects[i]
		if e.Attempt == t.Attempt && e.Status == protocol.StatusFailed && e.Final() && e.Error != nil {
			last = e
		}
	}
	return last
}

// denial is the effect the gate denied that a failure of the agent's own
// (giving up, a crash loop) rests on: the failing attempt's last effect,
// when the gate denied it.
func denial(t history.Trigger, run *history.Run) *history.EffectRecord {
	if run == nil || t.Kind == harness.FailureEffectRefused || t.Kind == harness.FailureInvariant || t.Kind == harness.FailureBudget {
		return nil
	}
	var last *history.EffectRecord
	for i := range run.Effects {
		if e := &run.Effects[i]; e.Attempt == t.Attempt && (last == nil || e.Order > last.Order) {
			last = e
		}
	}
	if last == nil || last.Status != protocol.StatusDenied {
		return nil
	}
	return last
}

// worldEvent is a world event of the ledger: an API version change, a
// dependency update, or any event a world undergoes.
type worldEvent struct {
	kind string          // world.EventAPIVersion, "world.dep_update", ...
	args json.RawMessage // the event's arguments as the ledger keeps them
	at   string          // "at +1h virtual"
}

// text is the event as a diagnosis names it: its kind without the
// "world." prefix, then its arguments.
func (e worldEvent) text() string {
	name := strings.TrimPrefix(e.kind, "world.")
	if len(e.args) == 0 || string(e.args) == "null" || string(e.args) == "{}" {
		return name
	}
	return name + " " + string(e.args)
}

// eventBefore finds the last world event in the world's ledger before the
// world refused e.
func eventBefore(run *history.Run, e *history.EffectRecord) (worldEvent, bool) {
	if run == nil {
		return worldEvent{}, false
	}
	var found worldEvent
	ok := false
	for _, l := range run.Ledger {
		if l.Key == e.ID {
			break
		}
		if changesWorld(l) {
			found, ok = worldEvent{kind: l.Kind, args: l.Args, at: "at " + history.VirtualSince(run.Record.VirtualStart, l.At) + " virtual"}, true
		}
	}
	return found, ok
}

// hasWorldEvent says whether the world underwent any event in the run.
func hasWorldEvent(run *history.Run) bool {
	if run == nil {
		return false
	}
	for _, l := range run.Ledger {
		if changesWorld(l) {
			return true
		}
	}
	return false
}

// changesWorld says whether a ledger entry is a world event that changes
// the world: any but a goal's probe (httpworld.EventProbe), which only
// reads it when the run is judged.
func changesWorld(l world.LedgerEntry) bool {
	return l.IsEvent() && l.Kind != httpworld.EventProbe
}

// deterministicLesson is the lesson a diagnosis gives when no model writes
// one.
func deterministicLesson(d history.Diagnosis) string {
	var ev struct {
		Version string `json:"api_version"`
		Event   *struct {
			Kind string          `json:"kind"`
			Args json.RawMessage `json:"args"`
		} `json:"world_event"`
		Error  *protocol.EffectError `json:"error"`
		Effect struct {
			Kind string `json:"kind"`
		} `json:"effect"`
		Resumed *int   `json:"resumed_step"`
		Output  string `json:"output"`
	}
	_ = json.Unmarshal(d.Evidence, &ev)
	switch d.Class {
	case ClassAPIContract:
		details := ""
		if ev.Error != nil && len(ev.Error.Details) > 0 {
			details = " (its details: " + string(ev.Error.Details) + ")"
		}
		return fmt.Sprintf("The world's API changed to %s under you: %s is refused with %s%s. Read each refusal's details and correct the request — a corrected request is a new effect with a new key — instead of giving up.",
			ev.Version, ev.Effect.Kind, codeOf(ev.Error), details)
	case ClassWorldChange:
		event := "a world event"
		if ev.Event != nil {
			event = worldEvent{kind: ev.Event.Kind, args: ev.Event.Args}.text()
		}
		return fmt.Sprintf("The world changed under you (%s): %s is refused with %s. Read the world again after such a change and redo what it made stale — a corrected request is a new effect with a new key — instead of building on what you read before it.",
			event, ev.Effect.Kind, codeOf(ev.Error))
	case ClassAgentLogic:
		return "Your own request was wrong: " + d.Detail + ". Check the world's error before sending it again, and never claim success the world does not show."
	case ClassCrashRecovery:
		if ev.Resumed != nil {
			said := ""
			if ev.Output != "" {
				said = " (the last one said: " + ev.Output + ")"
			}
			return fmt.Sprintf("Your attempts die as they resume from the checkpoint at step %d, before doing anything%s. Read the checkpoint back as you wrote it, tolerating every field you wrote, and carry on from step %d under the same keys.", *ev.Resumed, said, *ev.Resumed)
		}
		return "Resume from your last checkpoint and send every effect under a key derived from the checkpointed step, so that nothing is done twice after a restart: " + d.Detail
	case ClassBudget:
		return "Stay within the run's LLM budget: " + d.Detail
	case ClassGateDenied:
		return "The gate, not the world, stopped you: " + d.Detail + ". Do not send what the gate's policy denies; a person decides what it holds for approval."
	}
	return "The failure came from the run's infrastructure (" + d.Detail + "): retry with the same keys once it heals."
}

func codeOf(e *protocol.EffectError) string {
	if e == nil {
		return "an error"
	}
	return strings.TrimSpace(e.Code)
}
