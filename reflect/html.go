package reflect

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"strings"
)

// lanes are the rows of the timeline, top to bottom.
var lanes = []string{"attempts", "steps", "effects", "faults", "reflection", "gate"}

// Timeline renders marks as a self-contained SVG: one row per lane, time
// from left to right, a mark per thing (a bar where it lasted), each with
// its label as a tooltip. It is the one timeline renderer of the project.
func Timeline(marks []Mark) template.HTML {
	const (
		left, width, rowH, top = 90, 860, 34, 24
	)
	var end int64 = 1
	for _, m := range marks {
		end = max(end, m.At, m.End)
	}
	x := func(ms int64) float64 { return left + float64(ms)*float64(width)/float64(end) }
	colour := map[string]string{"ok": "#2e7d32", "bad": "#c62828", "hold": "#ef6c00", "info": "#1565c0"}
	var b strings.Builder
	h := top + rowH*len(lanes) + 20
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="timeline of the run">`, left+width+20, h)
	for i, lane := range lanes {
		y := top + i*rowH
		fmt.Fprintf(&b, `<text x="4" y="%d" font-size="12" fill="#333">%s</text><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ddd"/>`,
			y+rowH/2+4, lane, left, y+rowH/2, left+width, y+rowH/2)
	}
	for _, m := range marks {
		row := -1
		for i, l := range lanes {
			if l == m.Lane {
				row = i
			}
		}
		if row < 0 {
			continue
		}
		y := top + row*rowH
		c := colour[m.Tone]
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

var reportHTML = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Reflections of run {{.RunID}}</title>
<style>
body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
code,pre{background:#f4f4f4;padding:.1em .3em;white-space:pre-wrap;word-break:break-word}
blockquote{border-left:4px solid #1565c0;margin:.5em 0;padding:.2em .8em;background:#f3f7fc}
.pass{color:#2e7d32}.fail{color:#c62828}.unknown{color:#ef6c00}
</style></head><body>
<h1>Reflections of run {{.RunID}}</h1>
<p>Scenario <b>{{.Scenario}}</b>{{if .Agent}} (agent {{.Agent}}){{end}}. Verdict: <b class="{{.Verdict}}">{{.Verdict}}</b> — {{.Reason}}</p>
<h2>Timeline</h2>
{{.SVG}}
{{if not .Reflections}}<p>The run opened no reflection.</p>{{end}}
{{range .Reflections}}<section>
<h2>Reflection {{.ID}}: {{.Decision}}</h2>
<p><b>Trigger.</b> {{.Trigger.Kind}} in attempt {{.Trigger.Attempt}}, after step {{.Trigger.Step}}: {{.Trigger.Detail}}</p>
<p><b>Where the run stood.</b> Last good checkpoint seq {{.Checkpoint}}; the failing attempt started from checkpoint {{.StartCheckpoint}}; the real world's ledger at entry {{.WorldSeq}}.</p>
{{if .Replays}}<p><b>Replays in isolation.</b></p><table><tr><th>run</th><th>verdict</th><th>reproduced</th><th>detail</th></tr>
{{range .Replays}}<tr><td>{{.RunID}}</td><td>{{.Verdict}}</td><td>{{.Reproduced}}</td><td>{{.Detail}}</td></tr>{{end}}</table>{{end}}
{{if .Divergence}}<p><b>First divergence.</b> {{.Divergence}}</p>{{end}}
{{with .Diagnosis}}<p><b>Diagnosis.</b> <code>{{.Class}}</code>: {{.Detail}}</p><p>Evidence: <code>{{printf "%s" .Evidence}}</code></p>{{end}}
{{with .Counterfactual}}<p><b>Counterfactual</b> (without the run's faults, run {{.RunID}}): {{.Verdict}}; reproduced: {{.Reproduced}}.</p>{{end}}
{{with .Lesson}}<p><b>Lesson</b> {{.ID}} (written by {{.By}}):</p><blockquote>{{.Text}}</blockquote>{{end}}
{{with .Verification}}<p><b>Verification</b> in isolation (run {{.RunID}}, on the real world at ledger entry {{.WorldSeq}}): {{.Verdict}} — {{.Reason}}{{if .Stale}} (went stale; redone {{.Redone}} time(s)){{end}}</p>{{end}}
<p><b>Decision.</b> {{.Decision}}: {{.Reason}}</p>
</section>{{end}}
<h2>The gate</h2>
{{if .Gate}}<table><tr><th>effect</th><th>kind</th><th>policy</th><th>decision</th><th>by</th><th>reason</th></tr>
{{range .Gate}}<tr><td>{{.Key}}</td><td>{{.Kind}}</td><td>{{.Policy}}</td><td>{{.Decision}}</td><td>{{.By}}</td><td>{{.Reason}}</td></tr>{{end}}</table>
{{else}}<p>No effect waited at the gate or was denied by it.</p>{{end}}
</body></html>
`))

// WriteHTML writes the report as one self-contained HTML page (no external
// assets), with an SVG timeline of the run's attempts, steps, effects,
// faults, the reflections' replays and verifications, and the gate's
// decisions.
func (rep *Report) WriteHTML(w io.Writer) error {
	var buf bytes.Buffer
	err := reportHTML.Execute(&buf, struct {
		*Report
		SVG template.HTML
	}{rep, Timeline(rep.Timeline)})
	if err != nil {
		return err
	}
	_, err = w.Write(buf.Bytes())
	return err
}
