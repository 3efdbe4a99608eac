// Package timeline draws a run on one wall-clock axis as inline SVG: its
// attempts and restarts, steps (checkpoints), effects, faults, the
// reflections' isolated re-runs and decisions, and the gate's decisions —
// a row per lane that has something, the attempts, faults and decisions
// written on it, and a legend of its shapes and colours.
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
	"strconv"
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

// Tones are the colours of marks by tone; a tone not listed is grey.
var Tones = map[string]string{"ok": "#2e7d32", "bad": "#c62828", "hold": "#ef6c00", "info": "#1565c0"}

// ToneMeanings say what each tone means, in the timeline's legend.
var ToneMeanings = map[string]string{
	"ok":   "went well (exited, step durable, done, released, verified)",
	"bad":  "went wrong, or a fault (killed, failed, fault fired, denied)",
	"hold": "held at the gate",
	"info": "no verdict",
}

// tones are the tones in the legend's order.
var tones = []string{"ok", "bad", "hold", "info"}

// Background is the colour of a timeline's panel: a faint blue-grey that
// nothing else of a report uses, so a screenshot shows where it is.
const Background = "#f8f9fb"

// The timeline's geometry, in the SVG's own units (it scales to its box).
const (
	left, plotW, right = 90, 860, 20 // the lane names, the plot, a margin
	top, rowH          = 16, 40      // a lane's row; its marks on its middle
	charW              = 6.2         // the width of a character of a label, about (font-size 11)
	legendH            = 18          // a line of the legend
)

// SVG renders marks as a self-contained SVG: a row per lane that has a
// mark (its name on the left), wall-clock time from left to right, a mark
// per thing — a bar for what lasted, a dot for an instant — with its Short
// label written beside it where there is room and its Label as a tooltip,
// then the time axis and a legend of the shapes and of the colours used.
func SVG(marks []Mark) template.HTML {
	var end int64 = 1
	used := map[string]bool{}
	toneUsed := map[string]bool{}
	for _, m := range marks {
		end = max(end, m.At, m.End)
		used[m.Lane] = true
		toneUsed[m.Tone] = true
	}
	var lanes []string
	row := map[string]int{}
	for _, l := range Lanes {
		if used[l] {
			row[l] = len(lanes)
			lanes = append(lanes, l)
		}
	}
	x := func(ms int64) float64 { return left + float64(ms)*float64(plotW)/float64(end) }
	legend := legendItems(toneUsed)
	axisY := top + rowH*len(lanes) + 14
	legendLines := layoutLegend(legend)
	width, height := left+plotW+right, axisY+10+legendH*legendLines+6

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="timeline of the run">`, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="%s"/>`, width, height, Background)
	for i, lane := range lanes {
		mid := top + i*rowH + rowH/2
		fmt.Fprintf(&b, `<text x="4" y="%d" font-size="12" fill="#333">%s</text><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ddd"/>`,
			mid+4, lane, left, mid, left+plotW, mid)
	}
	if len(lanes) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" fill="#666">nothing happened yet</text>`, left, top+12)
	}
	labels := newTracks()
	for _, m := range marks {
		r, ok := row[m.Lane]
		if !ok {
			continue
		}
		if m.End > m.At {
			labels.take(r, trackMiddle, x(m.At), max(x(m.End), x(m.At)+2))
		} else {
			labels.take(r, trackMiddle, x(m.At)-6, x(m.At)+6)
		}
	}
	var text strings.Builder
	for _, m := range marks {
		r, ok := row[m.Lane]
		if !ok {
			continue
		}
		mid := top + r*rowH + rowH/2
		c := Tones[m.Tone]
		if c == "" {
			c = "#555"
		}
		title := template.HTMLEscapeString(fmt.Sprintf("%s (+%d ms)", m.Label, m.At))
		x0 := x(m.At)
		if m.End > m.At {
			w := max(x(m.End)-x0, 2)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" opacity="0.55"><title>%s</title></rect>`, x0, mid-9, w, 18, c, title)
			if m.Short != "" {
				if tw := textWidth(m.Short); tw+8 <= w {
					fmt.Fprintf(&text, `<text x="%.1f" y="%d" font-size="11" fill="#222">%s</text>`, x0+4, mid+4, template.HTMLEscapeString(m.Short))
				} else {
					labels.place(&text, r, x0, m.Short)
				}
			}
			continue
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%d" r="5" fill="%s"><title>%s</title></circle>`, x0, mid, c, title)
		if m.Short != "" {
			labels.place(&text, r, x0+8, m.Short)
		}
	}
	b.WriteString(text.String())
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>`, left, axisY-10, left+plotW, axisY-10)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="#666">0 s</text><text x="%d" y="%d" font-size="11" fill="#666" text-anchor="middle">wall-clock time since the run started</text><text x="%d" y="%d" font-size="11" fill="#666" text-anchor="end">%s s</text>`,
		left, axisY+2, left+plotW/2, axisY+2, left+plotW, axisY+2, strconv.FormatFloat(float64(end)/1000, 'f', -1, 64))
	writeLegend(&b, legend, axisY+10)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// A label's track in a lane's row: beside its mark, or above or below
// the lane's line when the middle is taken.
const (
	trackMiddle = iota
	trackAbove
	trackBelow
)

// tracks are the spans of each lane's tracks that marks and labels have
// taken, so that no label is written over another or over a mark.
type tracks map[[2]int][][2]float64

func newTracks() tracks { return tracks{} }

func (t tracks) free(row, track int, x0, x1 float64) bool {
	if x1 > left+plotW+right {
		return false
	}
	for _, s := range t[[2]int{row, track}] {
		if x0 < s[1]+2 && s[0] < x1+2 {
			return false
		}
	}
	return true
}

func (t tracks) take(row, track int, x0, x1 float64) {
	k := [2]int{row, track}
	t[k] = append(t[k], [2]float64{x0, x1})
}

// place writes label from x in the first track of row with room for it
// (beside the mark, then above, then below the line); with no room, the
// mark keeps its tooltip only.
func (t tracks) place(b *strings.Builder, row int, x float64, label string) {
	w := textWidth(label)
	mid := top + row*rowH + rowH/2
	for _, tr := range []struct{ track, y int }{{trackMiddle, mid + 4}, {trackAbove, mid - 8}, {trackBelow, mid + 17}} {
		x0 := x
		if tr.track != trackMiddle {
			x0 = x - 8
		}
		if x0+w > left+plotW+right {
			x0 = left + plotW + right - w
		}
		if t.free(row, tr.track, x0, x0+w) {
			t.take(row, tr.track, x0, x0+w)
			fmt.Fprintf(b, `<text x="%.1f" y="%d" font-size="10" fill="#333">%s</text>`, x0, tr.y, template.HTMLEscapeString(label))
			return
		}
	}
}

// textWidth is about how wide label is written.
func textWidth(label string) float64 { return float64(len([]rune(label))) * charW }

// legendItem is one entry of the legend: a swatch and what it means.
type legendItem struct {
	shape, colour, text string // shape: bar or dot
}

// legendItems are the shapes, then the colours the marks use.
func legendItems(toneUsed map[string]bool) []legendItem {
	items := []legendItem{{"bar", "#888", "lasted (an attempt, an isolated re-run)"}, {"dot", "#888", "an instant"}}
	for _, t := range tones {
		if toneUsed[t] {
			items = append(items, legendItem{"swatch", Tones[t], ToneMeanings[t]})
		}
	}
	return items
}

// legendWidth is the width an item takes in the legend.
func (it legendItem) width() float64 { return 22 + textWidth(it.text) + 18 }

// layoutLegend counts the lines the legend takes.
func layoutLegend(items []legendItem) int {
	lines, x := 1, float64(left)
	for _, it := range items {
		if x+it.width() > left+plotW+right && x > left {
			lines, x = lines+1, left
		}
		x += it.width()
	}
	return lines
}

// writeLegend writes the legend's lines from y down.
func writeLegend(b *strings.Builder, items []legendItem, y int) {
	x := float64(left)
	y += legendH - 4
	fmt.Fprintf(b, `<text x="4" y="%d" font-size="11" fill="#666">legend</text>`, y)
	for _, it := range items {
		if x+it.width() > left+plotW+right && x > left {
			x, y = left, y+legendH
		}
		switch it.shape {
		case "bar":
			fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="16" height="9" fill="%s" opacity="0.55"/>`, x, y-8, it.colour)
		case "dot":
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%d" r="4" fill="%s"/>`, x+8, y-4, it.colour)
		default:
			fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="12" height="12" fill="%s"/>`, x+2, y-10, it.colour)
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%d" font-size="11" fill="#333">%s</text>`, x+22, y, template.HTMLEscapeString(it.text))
		x += it.width()
	}
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
