package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/harness/protocol"
)

// Verdicts.
const (
	VerdictPass    = "pass"
	VerdictFail    = "fail"
	VerdictUnknown = "unknown"
)

// Invariant kinds.
const (
	KindAlways     = "always"     // safety: must hold over the whole history
	KindSometimes  = "sometimes"  // coverage: must have happened at least once
	KindEventually = "eventually" // liveness: must hold by the end
)

// Invariant names.
const (
	InvNoDuplicateEffects = "no-duplicate-effects"
	InvGoalReached        = "goal-reached"
	InvNoLostProgress     = "no-lost-progress"
	InvEffectsResolved    = "effects-resolved"
	InvFaultsFired        = "faults-fired"
)

// InvariantKinds maps every invariant a scenario may name to its kind.
var InvariantKinds = map[string]string{
	InvNoDuplicateEffects: KindAlways,
	InvNoLostProgress:     KindAlways,
	InvEffectsResolved:    KindAlways,
	InvGoalReached:        KindEventually,
	InvFaultsFired:        KindSometimes,
}

// Result is a run's verdict and the evidence for it: the JSON contract of
// `overnight run --output json`. Fields are only ever added.
type Result struct {
	RunID          string            `json:"run_id"`
	Scenario       string            `json:"scenario"`
	Agent          string            `json:"agent,omitempty"`
	Seed           int64             `json:"seed"`
	Verdict        string            `json:"verdict"`
	Reason         string            `json:"reason"`
	Outcome        string            `json:"outcome"` // the agent's own claim: success, failure, or none
	Attempts       int               `json:"attempts"`
	StepsCompleted int               `json:"steps_completed"`
	Faults         []FaultResult     `json:"faults"`
	Effects        EffectCounts      `json:"effects"`
	Invariants     []InvariantResult `json:"invariants"`
	LLM            *LLMTotals        `json:"llm,omitempty"`
	WallMS         int64             `json:"wall_ms"`
	VirtualMS      int64             `json:"virtual_ms"`
	HistoryDigest  string            `json:"history_digest"`
}

// FaultResult is one scheduled fault in a result.
type FaultResult struct {
	Kind             string `json:"kind"`
	Spec             string `json:"spec"`
	At               string `json:"at"`
	Applied          bool   `json:"applied"`
	AppliedVirtualMS *int64 `json:"applied_virtual_ms"`
	HealedVirtualMS  *int64 `json:"healed_virtual_ms"`
	Attempt          int    `json:"attempt,omitempty"`
	Error            string `json:"error,omitempty"` // why it fired but could not be injected
	From             string `json:"from,omitempty"`  // the spec it was expanded or drawn from
	Met              bool   `json:"met"`             // whether the agent really met it
	MetDetail        string `json:"met_detail,omitempty"`
}

// EffectCounts summarises the effects of a run.
type EffectCounts struct {
	Executed     int `json:"executed"`     // times the world was asked to act
	Deduplicated int `json:"deduplicated"` // repeats answered from the journal
	Duplicates   int `json:"duplicates"`   // extra resources the world shows created for one logical identity
	Unknown      int `json:"unknown"`      // effects whose outcome could not be established
	Unkeyed      int `json:"unkeyed"`      // effects sent without an idempotency key
}

// InvariantResult is one invariant's judgement.
type InvariantResult struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Verdict string `json:"verdict"`
	Detail  string `json:"detail"`
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// finish judges the run and records the result durably.
func (r *run) finish(ctx context.Context, end endState) (*Result, error) {
	r.mu.Lock()
	r.ended = true
	r.mu.Unlock()

	res, err := r.judge(ctx, end)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.rec.Status, r.rec.Verdict, r.rec.Reason = StatusFinished, res.Verdict, res.Reason
	r.rec.EndedAt = time.Now().UTC()
	res.WallMS = ms(r.rec.EndedAt.Sub(r.rec.StartedAt))
	r.rec.Result = res
	rec := r.rec
	r.mu.Unlock()
	if err := put(ctx, r.j, runKey(rec.ID), rec); err != nil {
		return nil, fmt.Errorf("record result of run %s: %w", rec.ID, err)
	}
	r.h.progress("run %s: %s (%s)", rec.ID, res.Verdict, res.Reason)
	return res, nil
}

// judge evaluates the invariants from the journal and the world's ledger.
func (r *run) judge(ctx context.Context, end endState) (*Result, error) {
	faults := r.judgeMet(ctx)
	r.mu.Lock()
	rec, cp, clock, done := r.rec, r.cp, r.clock, r.done
	effects := make([]EffectRecord, 0, len(r.effects))
	for _, e := range r.effects {
		effects = append(effects, *e)
	}
	r.mu.Unlock()
	sort.Slice(effects, func(i, k int) bool { return effects[i].Order < effects[k].Order })

	checkpoints, err := scan[CheckpointRecord](r.j, runPrefix(prefixCheckpoint, rec.ID))
	if err != nil {
		return nil, fmt.Errorf("read checkpoints: %w", err)
	}
	res := &Result{
		RunID: rec.ID, Scenario: rec.Scenario, Agent: rec.Agent, Seed: rec.Seed, Attempts: rec.Attempts,
		StepsCompleted: cp.Step, Faults: []FaultResult{}, Invariants: []InvariantResult{},
		VirtualMS: ms(clock.Sub(rec.VirtualStart)), Outcome: "none",
	}
	if done != nil {
		res.Outcome = done.Outcome
	}
	if r.llm != nil && r.llm.model != nil {
		r.mu.Lock()
		t := r.llm.totals
		r.mu.Unlock()
		res.LLM = &t
	}
	for _, f := range faults {
		fr := FaultResult{Kind: f.Kind, Spec: f.Spec, At: f.At, Applied: f.Applied, Attempt: f.AppliedAttempt, Error: f.Error,
			Met: f.Met, MetDetail: f.MetDetail}
		if f.From != f.Spec {
			fr.From = f.From
		}
		if f.Applied {
			a := ms(f.AppliedVirtual.Sub(rec.VirtualStart))
			fr.AppliedVirtualMS = &a
			if !f.HealedVirtual.IsZero() {
				h := ms(f.HealedVirtual.Sub(rec.VirtualStart))
				fr.HealedVirtualMS = &h
			}
		}
		res.Faults = append(res.Faults, fr)
	}
	for _, e := range effects {
		res.Effects.Executed += e.Executions
		res.Effects.Deduplicated += e.Replays
		if e.Status == effectIntent || e.Status == protocol.StatusUnknown {
			res.Effects.Unknown++
		}
		if e.Unkeyed {
			res.Effects.Unkeyed++
		}
	}
	dups, err := r.world.Duplicates(ctx)
	if err != nil {
		return nil, err
	}
	for _, d := range dups {
		res.Effects.Duplicates += d.Count - 1
	}

	names := append([]string(nil), r.scen.Invariants...)
	if len(faults) > 0 && !contains(names, InvFaultsFired) {
		names = append(names, InvFaultsFired)
	}
	for _, name := range names {
		ir := InvariantResult{Name: name, Kind: InvariantKinds[name]}
		switch name {
		case InvNoDuplicateEffects:
			ir.Verdict, ir.Detail = VerdictPass, "the world shows every resource of a non-idempotent kind created once"
			if len(dups) > 0 {
				var parts []string
				for _, d := range dups {
					var keys []string
					for _, k := range d.Keys {
						keys = append(keys, effectLabel(k))
					}
					parts = append(parts, fmt.Sprintf("%s %q created %d times (%s, by %s)", d.Kind, d.Name, d.Count, strings.Join(d.IDs, ", "), strings.Join(keys, ", ")))
				}
				ir.Verdict, ir.Detail = VerdictFail, strings.Join(parts, "; ")
			}
		case InvGoalReached:
			chk, err := r.world.CheckGoal(ctx, r.task)
			switch {
			case err != nil:
				ir.Verdict, ir.Detail = VerdictUnknown, err.Error()
			case chk.OK:
				ir.Verdict, ir.Detail = VerdictPass, chk.Detail
			default:
				ir.Verdict, ir.Detail = VerdictFail, chk.Detail
			}
			if ir.Verdict == VerdictPass && done != nil && done.Outcome != protocol.OutcomeSuccess {
				ir.Detail += " (although the agent reported failure)"
			}
			if ir.Verdict == VerdictFail && done != nil && done.Outcome == protocol.OutcomeSuccess {
				ir.Detail = "the agent claimed success, but the world disagrees: " + ir.Detail
			}
			if ir.Verdict == VerdictPass && r.scen.Limits.Recovery > 0 {
				ir.Verdict, ir.Detail = recoveredInTime(ir.Detail, faults, done, rec.VirtualStart, r.scen.Limits.Recovery)
			}
		case InvNoLostProgress:
			ir.Verdict, ir.Detail = noLostProgress(checkpoints)
		case InvEffectsResolved:
			ir.Verdict, ir.Detail = VerdictPass, fmt.Sprintf("all %d effects have a known outcome", len(effects))
			if res.Effects.Unknown > 0 {
				var keys []string
				for _, e := range effects {
					if e.Status == effectIntent || e.Status == protocol.StatusUnknown {
						keys = append(keys, effectLabel(e.ID))
					}
				}
				ir.Verdict, ir.Detail = VerdictUnknown, fmt.Sprintf("%d effects in doubt: %s", len(keys), strings.Join(keys, ", "))
			}
		case InvFaultsFired:
			var missed, failed, unmet []string
			for _, f := range faults {
				switch {
				case !f.Applied:
					missed = append(missed, f.Spec)
				case f.Error != "":
					failed = append(failed, fmt.Sprintf("%s (%s)", f.Spec, f.Error))
				case !f.Met:
					unmet = append(unmet, fmt.Sprintf("%s (%s)", f.Spec, f.MetDetail))
				}
			}
			ir.Verdict, ir.Detail = VerdictPass, fmt.Sprintf("all %d scheduled faults fired and the agent met each", len(faults))
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
				ir.Verdict, ir.Detail = VerdictUnknown, strings.Join(why, "; ")
			}
		default:
			ir.Verdict, ir.Detail = VerdictUnknown, "this version of overnight cannot check it"
		}
		res.Invariants = append(res.Invariants, ir)
	}

	res.Verdict = VerdictPass
	judged := false
	for _, ir := range res.Invariants {
		if ir.Kind == KindAlways || ir.Kind == KindEventually {
			judged = true
		}
	}
	if !judged {
		res.Invariants = append(res.Invariants, InvariantResult{Name: "invariants-listed", Kind: KindAlways, Verdict: VerdictUnknown,
			Detail: "the scenario lists no safety or liveness invariant, so nothing about the run was judged"})
	}
	for _, ir := range res.Invariants {
		if ir.Verdict == VerdictFail {
			res.Verdict = VerdictFail
		} else if ir.Verdict == VerdictUnknown && res.Verdict == VerdictPass {
			res.Verdict = VerdictUnknown
		}
	}
	switch {
	case end.verdict != "":
		res.Verdict, res.Reason = end.verdict, end.reason
	case end.limit:
		res.Verdict, res.Reason = VerdictFail, end.reason
	case res.Verdict == VerdictPass:
		res.Reason = fmt.Sprintf("%s; all %d invariants hold", end.reason, len(res.Invariants))
	default:
		var bad []string
		for _, ir := range res.Invariants {
			if ir.Verdict != VerdictPass {
				bad = append(bad, ir.Name+" "+ir.Verdict)
			}
		}
		res.Reason = fmt.Sprintf("%s; %s", end.reason, strings.Join(bad, ", "))
	}
	res.HistoryDigest = digest(effects, checkpoints, faults, rec.VirtualStart, done)
	return res, nil
}

// recoveredInTime checks the eventually-bound: the agent reported its
// (world-confirmed) success within bound of virtual time after the last
// fault healed.
func recoveredInTime(detail string, faults []FaultRecord, done *DoneRecord, start time.Time, bound time.Duration) (string, string) {
	var last time.Time
	for _, f := range faults {
		if f.Applied && f.HealedVirtual.After(last) {
			last = f.HealedVirtual
		}
	}
	if last.IsZero() {
		last = start
	}
	if done == nil {
		return VerdictUnknown, detail + "; the agent never reported done, so the time to recover is unknown"
	}
	took := done.Virtual.Sub(last)
	if took > bound {
		return VerdictFail, fmt.Sprintf("%s, but only %s after the last fault healed (bound %s)", detail, took, bound)
	}
	return VerdictPass, fmt.Sprintf("%s, %s after the last fault healed (bound %s)", detail, max(took, 0), bound)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// noLostProgress checks that no attempt went back behind a step that was
// already durable when it started: the first checkpoint of every attempt
// is at or beyond the highest step checkpointed before it.
func noLostProgress(cps []CheckpointRecord) (string, string) {
	best, bestAttempt := 0, 0
	seen := map[int]bool{}
	for _, c := range cps {
		if !seen[c.Attempt] {
			seen[c.Attempt] = true
			if c.Attempt != bestAttempt && c.Step < best {
				return VerdictFail, fmt.Sprintf("attempt %d checkpointed step %d after step %d was already durable (attempt %d): it started over and lost its progress",
					c.Attempt, c.Step, best, bestAttempt)
			}
		}
		if c.Step >= best {
			best, bestAttempt = c.Step, c.Attempt
		}
	}
	return VerdictPass, fmt.Sprintf("%d checkpoints over %d attempts never went back (last step %d)", len(cps), len(seen), best)
}

// digest is the run's history_digest: SHA-256 over the ordered effects
// (kind, args, status, result, and the virtual time of their last
// execution), checkpoints (step, state hash, virtual time), faults (kind,
// trigger, whether and when they fired, whether they were injected and
// met) and the outcome — nothing that differs between two honest runs
// (ids, tokens, containers, attempts a harness crash adds, wall times, the
// provider's name).
func digest(effects []EffectRecord, cps []CheckpointRecord, faults []FaultRecord, start time.Time, done *DoneRecord) string {
	h := sha256.New()
	line := func(fields ...string) {
		b, _ := json.Marshal(fields)
		h.Write(b)
		h.Write([]byte{'\n'})
	}
	for _, e := range effects {
		errCode := ""
		if e.Error != nil {
			errCode = e.Error.Code
		}
		line("effect", e.Kind, string(e.Args), e.Status, string(e.Result), errCode, fmt.Sprint(ms(e.Virtual.Sub(start))))
	}
	for _, c := range cps {
		line("checkpoint", fmt.Sprint(c.Step), c.StateHash, fmt.Sprint(ms(c.Virtual.Sub(start))))
	}
	for _, f := range faults {
		if f.Applied {
			line("fault", f.Kind, f.At, fmt.Sprint(ms(f.AppliedVirtual.Sub(start))), fmt.Sprint(f.Error == ""), fmt.Sprint(f.Met))
		} else {
			line("fault", f.Kind, f.At, "never")
		}
	}
	outcome := "none"
	if done != nil {
		outcome = done.Outcome
	}
	line("outcome", outcome)
	return hex.EncodeToString(h.Sum(nil))
}
