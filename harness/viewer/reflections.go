package viewer

import (
	"html/template"
	"net/http"
	"sync"
)

var reflectionsHTML = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("reflections").Funcs(funcs).Parse(`<h1>Reflections</h1>
<p class="muted">Every reflection of every run, newest run first: the failure that opened it, the diagnosis, the lesson and the decision. A run's page has the whole write-up.</p>
{{if .}}<table><tr><th>run</th><th>scenario</th><th>agent</th><th>reflection</th><th>trigger</th><th>reproduced</th><th>diagnosis</th><th>lesson</th><th>decision</th></tr>
{{range .}}<tr><td><a href="{{runLink .RunID}}">{{.RunID}}</a></td><td>{{.Scenario}}</td><td>{{agent .Agent}}</td><td>{{.ID}}</td><td>{{.Trigger.Kind}}: {{short .Trigger.Detail 100}}</td>
<td>{{if .Replays}}{{len .Replays}} replay(s){{else}}–{{end}}</td><td>{{with .Diagnosis}}<code>{{.Class}}</code>{{else}}–{{end}}</td><td>{{with .Lesson}}{{short .Text 120}}{{else}}–{{end}}</td>
<td class="{{if eq .Decision "verified"}}pass{{else if .Decision}}fail{{else}}unknown{{end}}">{{if .Decision}}{{.Decision}}{{else}}deciding ({{.Stage}}){{end}}{{if .Reason}}: {{short .Reason 100}}{{end}}</td></tr>
{{end}}</table>{{else}}<p>No run has reflected: reflection is on for scenarios with a <code>reflect:</code> block.</p>{{end}}`))
})

// reflections lists every reflection of every run.
func (v *Viewer) reflections(w http.ResponseWriter, r *http.Request) {
	refls, err := v.src.Reflections(r.Context())
	if err != nil {
		v.fail(w, r, err)
		return
	}
	body, err := render(reflectionsHTML(), refls)
	if err != nil {
		v.fail(w, r, err)
		return
	}
	v.write(w, r, page{Title: "Reflections", Body: body})
}
