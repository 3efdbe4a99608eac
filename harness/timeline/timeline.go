// Package timeline draws a run on one wall-clock axis as inline SVG: its
// attempts and restarts, steps (checkpoints), effects, faults, the
// reflections' isolated re-runs and decisions, and the gate's decisions.
// It is the one timeline renderer of overnight: the reflection report, the
// run report and the viewer (overnight serve) all draw with it.
//
// It reads a run through history.Full and draws; it reads no state dir
// and writes nothing.
package timeline

import (
	"fmt"
	"html/template"
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
}

// Lanes are the rows of a timeline, top to bottom.
var Lanes = []string{"attempts", "steps", "effects", "faults", "reflection", "gate"}

// Tones are the colours of marks by tone; a tone not listed is grey.
var Tones = map[string]string{"ok": "#2e7d32", "bad": "#c62828", "hold": "#ef6c00", "info": "#1565c0"}

// Background is the colour of a timeline's panel: a faint blue-grey that
// nothing else of a report uses, so a screenshot shows where it is.
const Background = "#f8f9fb"

// SVG renders marks as a self-contained SVG: one row per lane, time from
// left to right, a mark per thing (a bar where it lasted), each with its
// label as a tooltip.
func SVG(marks []Mark) template.HTML {
	const (
		left, width, rowH, top = 90, 860, 34, 24
	)
	var end int64 = 1
	for _, m := range marks {
		end = max(end, m.At, m.End)
	}
	x := func(ms int64) float64 { return left + float64(ms)*float64(width)/float64(end) }
	var b strings.Builder
	h := top + rowH*len(Lanes) + 20
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="timeline of the run">`, left+width+20, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="%s"/>`, left+width+20, h, Background)
	for i, lane := range Lanes {
		y := top + i*rowH
		fmt.Fprintf(&b, `<text x="4" y="%d" font-size="12" fill="#333">%s</text><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ddd"/>`,
			y+rowH/2+4, lane, left, y+rowH/2, left+width, y+rowH/2)
	}
	for _, m := range marks {
		row := -1
		for i, l := range Lanes {
			if l == m.Lane {
				row = i
			}
		}
		if row < 0 {
			continue
		}
		y := top + row*rowH
		c := Tones[m.Tone]
		if c == "" {
			c = "#555"
		}
		label := template.HTMLEscapeString(fmt.Sprintf("%s (+%d ms)", m.Label, m.At))
		if m.End > m.At {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" opacity="0.55"><title>%s</title></rect>`,
				x(m.At), y+8, max(x(m.End)-x(m.At), 2), rowH-16, c, label)
		} else {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%d" r="5" fill="%s"><title>%s</title></circle>`, x(m.At), y+rowH/2, c, label)
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="#666">0 ms</text><text x="%d" y="%d" font-size="11" fill="#666" text-anchor="end">%d ms (wall clock)</text></svg>`,
		left, h-4, left+width, h-4, end)
	return template.HTML(b.String())
}

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
		marks = append(marks, Mark{Lane: "attempts", At: at(a.StartedAt), End: at(end), Label: label, Tone: tone})
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
			marks = append(marks, Mark{Lane: "faults", At: at(fr.AppliedWall), Label: fr.Spec, Tone: "bad"})
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
			marks = append(marks, Mark{Lane: "reflection", At: at(rec.StartedAt), End: at(rec.EndedAt), Label: purpose + ": " + orNone(rec.Verdict), Tone: tone})
		}
		if r.Decided() {
			tone := "bad"
			if r.Decision == history.DecisionVerify {
				tone = "ok"
			}
			marks = append(marks, Mark{Lane: "reflection", At: at(r.DecidedAt), Label: r.ID + " " + r.Decision, Tone: tone})
		}
	}
	for _, g := range f.Gate {
		tone := map[string]string{history.GateHeld: "hold", history.GateDenied: "bad"}[g.Decision]
		if tone == "" {
			tone = "ok"
		}
		marks = append(marks, Mark{Lane: "gate", At: at(g.At), Label: fmt.Sprintf("%s %s: %s", history.EffectLabel(g.EffectID), g.Kind, g.Decision), Tone: tone})
	}
	sort.SliceStable(marks, func(i, j int) bool { return marks[i].At < marks[j].At })
	return marks
}

// orNone is s, or "(none)" when it is empty.
func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
