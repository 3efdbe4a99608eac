package reflect

import (
	"html/template"
	"io"
	"sync"

	"github.com/overnight-dev/overnight/harness/timeline"
	"github.com/overnight-dev/overnight/harness/writeup"
)

// reportHTML is the reflection report's body: the run, its timeline, then
// the reflections and the gate's decisions as a run's own report shows
// them.
var reportHTML = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Parse(`<h1>Reflections of run {{.RunID}}</h1>
<p>Scenario <b>{{.Scenario}}</b>{{if .Agent}} (agent {{.Agent}}){{end}}. Verdict: <b class="{{.Verdict}}">{{.Verdict}}</b> — {{.Reason}}</p>
<h2>Timeline</h2>
{{.SVG}}
{{.Sections}}`))
})

// WriteHTML writes the report as one self-contained HTML page (no external
// assets), with an SVG timeline of the run's attempts, steps, effects,
// faults, the reflections' replays and verifications, and the gate's
// decisions.
func (rep *Report) WriteHTML(w io.Writer) error {
	sections, err := writeup.ReflectionsHTML(rep.Reflections, rep.Gate)
	if err != nil {
		return err
	}
	body, err := writeup.Render(reportHTML(), struct {
		*Report
		SVG, Sections template.HTML
	}{rep, timeline.SVG(rep.Timeline), sections})
	if err != nil {
		return err
	}
	return writeup.WritePage(w, writeup.Page{Title: "Reflections of run " + rep.RunID, Body: body})
}
