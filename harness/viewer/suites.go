package viewer

import (
	"html/template"
	"net/http"
	"net/url"
	"sync"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/report"
	"github.com/overnight-dev/overnight/harness/suite"
	"github.com/overnight-dev/overnight/harness/writeup"
)

var suitesHTML = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("suites").Funcs(funcs).Parse(`<h1>Suites</h1>
{{if .}}<table><tr><th>suite</th><th>started (UTC)</th><th>duration</th><th class="n">runs</th><th class="n">pass</th><th class="n">fail</th><th class="n">unknown</th><th>pass^1</th><th>requirement</th></tr>
{{range .}}<tr><td><a href="{{.Link}}">{{.Rec.ID}}</a></td><td>{{when .Rec.StartedAt}}</td><td>{{if .Res}}{{dur .Rec.StartedAt .Rec.EndedAt}}{{else}}running, or its process died{{end}}</td>
{{with .Res}}<td class="n">{{.Summary.Runs}}</td><td class="n">{{.Summary.Passes}}</td><td class="n">{{.Summary.Fails}}</td><td class="n">{{.Summary.Unknown}}</td><td>{{with .Summary.PassK}}{{printf "%.4f" (index . 0)}}{{else}}–{{end}}</td><td>{{with .Requirement}}<code>{{.Expression}}</code>: <span class="{{if eq .Outcome "met"}}pass{{else if eq .Outcome "failed"}}fail{{else}}unknown{{end}}">{{.Outcome}}</span>{{else}}–{{end}}</td>{{else}}<td colspan="6" class="muted">no result yet</td>{{end}}</tr>
{{end}}</table>{{else}}<p>No suite has run in this state dir (<code>overnight suite</code>).</p>{{end}}`))
})

type suiteItem struct {
	Rec  history.SuiteRecord
	Res  *suite.Result
	Link string
}

// suites lists the suites run in the state dir, newest first.
func (v *Viewer) suites(w http.ResponseWriter, r *http.Request) {
	recs, err := v.src.Suites(r.Context())
	if err != nil {
		v.fail(w, r, err)
		return
	}
	items := make([]suiteItem, 0, len(recs))
	for _, rec := range recs {
		res, err := decodeSuite(rec)
		if err != nil {
			v.log.Warn("viewer", "err", err)
		}
		items = append(items, suiteItem{Rec: rec, Res: res, Link: "/suites/" + url.PathEscape(rec.ID)})
	}
	body, err := writeup.Render(suitesHTML(), items)
	if err != nil {
		v.fail(w, r, err)
		return
	}
	v.write(w, r, page{Title: "Suites", Body: body})
}

// suite is one suite's report, its runs linked to their pages.
func (v *Viewer) suite(w http.ResponseWriter, r *http.Request) {
	rec, err := v.src.Suite(r.Context(), r.PathValue("id"))
	if err != nil {
		v.fail(w, r, err)
		return
	}
	res, err := decodeSuite(rec)
	if err != nil {
		v.fail(w, r, err)
		return
	}
	var body template.HTML
	if res == nil {
		body = template.HTML("<h1>Suite " + template.HTMLEscapeString(rec.ID) + "</h1><p>No result yet: the suite is running, or its process died before the end (its runs are in <a href=\"/runs\">Runs</a>).</p>")
	} else if body, err = report.SuiteBody(res, report.SuiteOptions{RunLink: runPath}); err != nil {
		v.fail(w, r, err)
		return
	}
	v.write(w, r, page{Title: title("Suite " + rec.ID), Body: body})
}
