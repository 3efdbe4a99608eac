package viewer

import (
	"fmt"
	"html/template"
	"net/http"
	"sync"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/writeup"
)

var reflectionsHTML = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("reflections").Funcs(funcs).Funcs(template.FuncMap{"cameBack": cameBack}).Parse(`<h1>Reflections</h1>
<p class="muted">Every reflection of every run, newest run first: the failure that opened it, the diagnosis, the lesson and the decision. A run's page has the whole write-up.</p>
{{if .}}<table><tr><th>run</th><th>scenario</th><th>agent</th><th>reflection</th><th>trigger</th><th>failure came back?</th><th>diagnosis</th><th>lesson</th><th>decision</th></tr>
{{range .}}<tr><td><a href="{{runLink .RunID}}">{{.RunID}}</a></td><td>{{.Scenario}}</td><td>{{agent .Agent}}</td><td>{{.ID}}</td><td>{{.Trigger.Kind}}: {{short .Trigger.Detail 100}}</td>
<td>{{if .Replays}}{{cameBack .Replays}}{{else}}not replayed{{end}}</td><td>{{with .Diagnosis}}<code>{{.Class}}</code>{{else}}–{{end}}</td><td>{{with .Lesson}}{{short .Text 120}}{{else}}–{{end}}</td>
<td class="{{if eq .Decision "verified"}}pass{{else if .Decision}}fail{{else}}unknown{{end}}">{{if .Decision}}{{.Decision}}{{else}}deciding ({{.Stage}}){{end}}{{if .Reason}}: {{short .Reason 100}}{{end}}</td></tr>
{{end}}</table>{{else}}<p>No run has reflected: reflection is on for scenarios with a <code>reflect:</code> block.</p>{{end}}`))
})

// cameBack says in how many of its replays a reflection's failure came
// back: "in 2 of 3 replays".
func cameBack(replays []history.ReplayRecord) string {
	n := 0
	for _, r := range replays {
		if r.Reproduced {
			n++
		}
	}
	return fmt.Sprintf("in %d of %d replays", n, len(replays))
}

// reflections lists every reflection of every run.
func (v *Viewer) reflections(w http.ResponseWriter, r *http.Request) {
	refls, err := v.src.Reflections(r.Context())
	if err != nil {
		v.fail(w, r, err)
		return
	}
	body, err := writeup.Render(reflectionsHTML(), refls)
	if err != nil {
		v.fail(w, r, err)
		return
	}
	v.write(w, r, page{Title: "Reflections", Body: body})
}
