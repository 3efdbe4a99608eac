// Package timeline draws a run on one wall-clock axis as inline SVG: its
// attempts and restarts, steps (checkpoints), effects, faults, the
// reflections' isolated re-runs and decisions, and the gate's decisions —
// a row per lane that has something, the attempts, faults and decisions
// written on it, and a legend of its shapes and colours (svg.go); the
// marks are read from a run's history (timeline.go). It is the one timeline renderer of overnight: the reflection report, the
// run report and the viewer (overnight serve) all draw with it.
//
// It reads a run through history.Full and draws; it reads no state dir
// and writes nothing.
package timeline

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/harness/history"
)

// Mark is one thing on a timeline.
type Mark struct {
	Lane  string `json:"lane"`  // one of Lanes
	At    int64  `json:"at_ms"` // wall milliseconds since the run started
	End   int64  `json:"end_ms,omitempty"`
	Label string `json:"label"`
	Tone  string `json:"tone"` // ok, bad, hold, info
	// Short is the mark's visible label, written beside it when there is
	// room ("attempt 2", "kill@step:3"); "" for none. Label is its tooltip.
	Short string `json:"short,omitempty"`
}

// Lanes are the rows of a timeline, top to bottom; a timeline draws only
// those that have a mark.
var Lanes = []string{"attempts", "steps", "effects", "faults", "reflection", "gate"}

// Marks places a run's attempts (a restart is every attempt after the
// first), checkpoints, effects, applied faults, its reflections' isolated
// re-runs and decisions, and the gate's decisions on one wall-clock axis,
// in time order.
func Marks(f *history.Full) []Mark {
	run := f.Run
	start := run.Record.StartedAt
	at := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return max(t.Sub(start).Milliseconds(), 0)
	}
	var marks []Mark
	for i, a := range run.Attempts {
		tone := "bad"
		if a.End == "exited" {
			tone = "ok"
		}
		end := a.EndedAt
		if end.IsZero() {
			end = a.StartedAt
		}
		label := fmt.Sprintf("attempt %d: %s", a.N, orNone(a.End))
		if i > 0 {
			label = fmt.Sprintf("restart: attempt %d (attempt %d ended %s): %s", a.N, run.Attempts[i-1].N, orNone(run.Attempts[i-1].End), orNone(a.End))
		}
		marks = append(marks, Mark{Lane: "attempts", At: at(a.StartedAt), End: at(end), Label: label, Tone: tone, Short: fmt.Sprintf("attempt %d", a.N)})
	}
	for _, c := range run.Checkpoints {
		marks = append(marks, Mark{Lane: "steps", At: at(c.Wall), Label: fmt.Sprintf("step %d (attempt %d)", c.Step, c.Attempt), Tone: "ok"})
	}
	for _, e := range run.Effects {
		tone := "ok"
		if e.Status != "done" {
			tone = "bad"
		}
		marks = append(marks, Mark{Lane: "effects", At: at(e.Wall), Label: fmt.Sprintf("%s %s: %s", history.EffectLabel(e.ID), e.Kind, e.Status), Tone: tone})
	}
	for _, fr := range run.Faults {
		if fr.Applied {
			marks = append(marks, Mark{Lane: "faults", At: at(fr.AppliedWall), Label: fr.Spec, Tone: "bad", Short: fr.Spec})
		}
	}
	for _, r := range f.Reflections {
		for _, id := range r.IsolatedRuns() {
			rec, ok := f.Isolated[id]
			if !ok {
				continue
			}
			tone := "info"
			if rec.Verdict == history.VerdictPass {
				tone = "ok"
			} else if rec.Verdict == history.VerdictFail {
				tone = "bad"
			}
			purpose := id
			if rec.Isolated != nil && rec.Isolated.Purpose != "" {
				purpose = rec.Isolated.Purpose
			}
			marks = append(marks, Mark{Lane: "reflection", At: at(rec.StartedAt), End: at(rec.EndedAt), Label: purpose + ": " + orNone(rec.Verdict), Tone: tone,
				Short: shortPurpose(purpose)})
		}
		if r.Decided() {
			tone := "bad"
			if r.Decision == history.DecisionVerify {
				tone = "ok"
			}
			marks = append(marks, Mark{Lane: "reflection", At: at(r.DecidedAt), Label: r.ID + " " + r.Decision, Tone: tone, Short: r.ID + " " + strings.ReplaceAll(r.Decision, "_", " ")})
		}
	}
	for _, g := range f.Gate {
		tone := map[string]string{history.GateHeld: "hold", history.GateDenied: "bad"}[g.Decision]
		if tone == "" {
			tone = "ok"
		}
		marks = append(marks, Mark{Lane: "gate", At: at(g.At), Label: fmt.Sprintf("%s %s: %s", history.EffectLabel(g.EffectID), g.Kind, g.Decision), Tone: tone, Short: g.Decision})
	}
	sort.SliceStable(marks, func(i, j int) bool { return marks[i].At < marks[j].At })
	return marks
}

// shortPurpose is an isolated re-run's purpose without its explanation:
// "r1 verification" of "r1 verification, redone (the real world changed)".
func shortPurpose(purpose string) string {
	if i := strings.IndexAny(purpose, ",("); i > 0 {
		return strings.TrimSpace(purpose[:i])
	}
	return purpose
}

// orNone is s, or "(none)" when it is empty.
func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
