package timeline

import (
	"fmt"
	"html/template"
	"sort"
	"strconv"
	"strings"
)

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
	top                = 16          // above the first lane
	rowH               = 40          // a lane's height when no two of its bars overlap
	slotH              = 16          // a bar's slot when some do: a lane stacks them
	charW              = 6.2         // the width of a character of a label, about (font-size 11)
	legendH            = 18          // a line of the legend
)

// lane is a row of the timeline: where it stands, and its bars' slots.
type lane struct {
	name   string
	top, h int // from top to top+h
	slots  int // how many bars overlap at most: stacked when more than 1
}

// mid is the lane's line: its dots are on it.
func (l lane) mid() int { return l.top + l.h/2 }

// bar is where the bar in slot i stands (y and height).
func (l lane) bar(i int) (y, h int) {
	if l.slots <= 1 {
		return l.mid() - 9, 18
	}
	return l.top + 12 + i*slotH, slotH - 3
}

// SVG renders marks as a self-contained SVG: a row per lane that has a
// mark (its name on the left), wall-clock time from left to right, a mark
// per thing — a bar for what lasted (bars that overlap in time stacked),
// a dot for an instant — with its Short label written on or beside it
// where there is room and its Label as a tooltip, then the time axis and a
// legend of the shapes and of the colours used.
func SVG(marks []Mark) template.HTML {
	var end int64 = 1
	used := map[string]bool{}
	toneUsed := map[string]bool{}
	for _, m := range marks {
		end = max(end, m.At, m.End)
		used[m.Lane] = true
		toneUsed[m.Tone] = true
	}
	slot, slots := stackBars(marks)
	var lanes []lane
	row := map[string]int{}
	y := top
	for _, name := range Lanes {
		if !used[name] {
			continue
		}
		l := lane{name: name, top: y, h: rowH, slots: slots[name]}
		if l.slots > 1 {
			l.h = 24 + l.slots*slotH
		}
		row[name] = len(lanes)
		lanes = append(lanes, l)
		y += l.h
	}
	x := func(ms int64) float64 { return left + float64(ms)*float64(plotW)/float64(end) }
	legend := legendItems(toneUsed)
	axisY := y + 14
	width, height := left+plotW+right, axisY+10+legendH*layoutLegend(legend)+6

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="timeline of the run">`, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="%s"/>`, width, height, Background)
	for _, l := range lanes {
		fmt.Fprintf(&b, `<text x="4" y="%d" font-size="12" fill="#333">%s</text><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ddd"/>`,
			l.mid()+4, l.name, left, l.mid(), left+plotW, l.mid())
	}
	if len(lanes) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" fill="#666">nothing happened yet</text>`, left, top+12)
	}
	labels := tracks{}
	for _, m := range marks {
		if r, ok := row[m.Lane]; ok {
			if m.End > m.At {
				labels.take(r, trackMiddle, x(m.At), max(x(m.End), x(m.At)+2))
			} else {
				labels.take(r, trackMiddle, x(m.At)-6, x(m.At)+6)
			}
		}
	}
	// The texts are written after every mark, so that no bar covers one.
	var text strings.Builder
	for i, m := range marks {
		r, ok := row[m.Lane]
		if !ok {
			continue
		}
		l := lanes[r]
		c := Tones[m.Tone]
		if c == "" {
			c = "#555"
		}
		title := template.HTMLEscapeString(fmt.Sprintf("%s (+%d ms)", m.Label, m.At))
		x0 := x(m.At)
		if m.End <= m.At {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%d" r="5" fill="%s"><title>%s</title></circle>`, x0, l.mid(), c, title)
			labels.place(&text, l, r, x0+8, m.Short)
			continue
		}
		w := max(x(m.End)-x0, 2)
		by, bh := l.bar(slot[i])
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" opacity="0.55"><title>%s</title></rect>`, x0, by, w, bh, c, title)
		switch {
		case m.Short == "":
		case textWidth(m.Short)+8 <= w:
			// On the bar: its slot is the bar's own.
			fmt.Fprintf(&text, `<text x="%.1f" y="%d" font-size="10" fill="#222">%s</text>`, x0+4, by+bh/2+4, template.HTMLEscapeString(m.Short))
		default:
			labels.place(&text, l, r, x0, m.Short)
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

// stackBars gives each bar (a mark that lasted) a slot of its lane, so
// that bars that overlap in time — a reflection's replays, run side by
// side — are drawn one above the other: the first slot free at its start.
// It returns the slot of each mark by index, and how many slots each lane
// needs.
func stackBars(marks []Mark) (slot []int, slots map[string]int) {
	slot, slots = make([]int, len(marks)), map[string]int{}
	order := make([]int, 0, len(marks))
	for i, m := range marks {
		if m.End > m.At {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return marks[order[a]].At < marks[order[b]].At })
	ends := map[string][]int64{} // per lane, where each slot's last bar ends
	for _, i := range order {
		m := marks[i]
		s := 0
		for s < len(ends[m.Lane]) && ends[m.Lane][s] > m.At {
			s++
		}
		if s == len(ends[m.Lane]) {
			ends[m.Lane] = append(ends[m.Lane], 0)
		}
		ends[m.Lane][s], slot[i] = m.End, s
		slots[m.Lane] = max(slots[m.Lane], s+1)
	}
	return slot, slots
}

// A label's track in a lane: beside its dot on the lane's line (where the
// lane's bars are too, when they are not stacked), above or below the
// lane's marks. A label that fits on its bar is written there.
const (
	trackMiddle = iota
	trackAbove
	trackBelow
)

// tracks are the spans of each lane's tracks that marks and labels have
// taken, so that no label is written over another or over a mark; and the
// labels written, so that one said again right there is not repeated.
type tracks map[[2]int][]span

type span struct {
	x0, x1 float64
	label  string
}

func (t tracks) free(row, track int, x0, x1 float64) bool {
	if x1 > left+plotW+right {
		return false
	}
	for _, s := range t[[2]int{row, track}] {
		if x0 < s.x1+2 && s.x0 < x1+2 {
			return false
		}
	}
	return true
}

func (t tracks) take(row, track int, x0, x1 float64) { t.takeLabel(row, track, x0, x1, "") }

func (t tracks) takeLabel(row, track int, x0, x1 float64, label string) {
	k := [2]int{row, track}
	t[k] = append(t[k], span{x0, x1, label})
}

// said reports whether label is written already where it would go again
// (three gate decisions a millisecond apart say "released" once).
func (t tracks) said(row int, x0, x1 float64, label string) bool {
	for _, track := range []int{trackMiddle, trackAbove, trackBelow} {
		for _, s := range t[[2]int{row, track}] {
			if s.label == label && x0 < s.x1+2 && s.x0 < x1+2 {
				return true
			}
		}
	}
	return false
}

// place writes label from x in the first of l's tracks with room for it —
// beside the mark on the lane's line, then above, then below the lane's
// marks; with no room, the mark keeps its tooltip only.
func (t tracks) place(b *strings.Builder, l lane, row int, x float64, label string) {
	if label == "" {
		return
	}
	w := textWidth(label)
	if t.said(row, x-8, x+w, label) {
		return
	}
	for _, tr := range []struct{ track, y int }{{trackMiddle, l.mid() + 4}, {trackAbove, l.top + 9}, {trackBelow, l.top + l.h - 1}} {
		x0 := x
		if tr.track != trackMiddle {
			x0 = x - 8
		}
		x0 = min(x0, left+plotW+right-w)
		if tr.track == trackMiddle && l.slots > 1 {
			continue // the bars stacked across the line leave no room beside a dot
		}
		if t.free(row, tr.track, x0, x0+w) {
			t.takeLabel(row, tr.track, x0, x0+w, label)
			fmt.Fprintf(b, `<text x="%.1f" y="%d" font-size="10" fill="#333">%s</text>`, x0, tr.y, template.HTMLEscapeString(label))
			return
		}
	}
}

// textWidth is about how wide label is written.
func textWidth(label string) float64 { return float64(len([]rune(label))) * charW }

// legendItem is one entry of the legend: a swatch and what it means.
type legendItem struct {
	shape, colour, text string // shape: bar, dot or swatch
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

// width is the width an item takes in the legend.
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
