package viewer

import (
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/writeup"
)

var runsHTML = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("runs").Funcs(funcs).Parse(`<h1>Runs</h1>
<form class="filters" method="get" action="/runs">
<label>scenario<select name="scenario"><option value="">all</option>{{range .Page.Scenarios}}<option{{if eq . $.Q.Scenario}} selected{{end}}>{{.}}</option>{{end}}</select></label>
<label>agent<select name="agent"><option value="">all</option>{{range .Page.Agents}}<option{{if eq . $.Q.Agent}} selected{{end}}>{{.}}</option>{{end}}</select></label>
<label>verdict<select name="verdict"><option value="">all</option>{{range .Verdicts}}<option{{if eq . $.Q.Verdict}} selected{{end}}>{{.}}</option>{{end}}</select></label>
<label>status<select name="status"><option value="">all</option>{{range .Statuses}}<option{{if eq . $.Q.Status}} selected{{end}}>{{.}}</option>{{end}}</select></label>
<label>seed<input name="seed" size="6" value="{{.Seed}}"></label>
<label>isolated re-runs<input type="checkbox" name="isolated" value="1"{{if .Q.Isolated}} checked{{end}}></label>
<button type="submit">Filter</button> <a href="/runs">clear</a>
</form>
<p>{{if .Page.Runs}}Runs {{plus .Page.Offset 1}}–{{plus .Page.Offset (len .Page.Runs)}} of {{.Page.Matched}} matching{{else}}No run matches{{end}} ({{.Page.Total}} in the state dir), newest first.
{{with .Prev}}<a href="{{.}}">← newer</a>{{end}} {{with .Next}}<a href="{{.}}">older →</a>{{end}}</p>
{{if .Page.Runs}}<table><tr><th>run</th><th>scenario</th><th>agent</th><th class="n">seed</th><th>status</th><th>verdict</th><th class="n">attempts</th><th>started (UTC)</th><th>duration</th><th>reason</th></tr>
{{range .Page.Runs}}<tr><td><a href="{{runLink .ID}}">{{.ID}}</a>{{with .Isolated}}<br><span class="muted">{{.Purpose}} of {{.Parent}}</span>{{end}}</td><td>{{.Scenario}}</td><td>{{agent .Agent}}</td><td class="n">{{.Seed}}</td><td>{{.Status}}</td><td class="{{.Verdict}}">{{if .Verdict}}{{.Verdict}}{{else}}–{{end}}</td><td class="n">{{.Attempts}}</td><td>{{when .StartedAt}}</td><td>{{dur .StartedAt .EndedAt}}</td><td>{{short .Reason 90}}</td></tr>
{{end}}</table>{{end}}`))
})

// runs is the list of runs, with filters and paging.
func (v *Viewer) runs(w http.ResponseWriter, r *http.Request) {
	q, err := history.ParseRunQuery(r.URL.Query())
	if err != nil {
		v.fail(w, r, &badQuery{err})
		return
	}
	pg, err := v.src.QueryRuns(r.Context(), q)
	if err != nil {
		v.fail(w, r, err)
		return
	}
	link := func(offset int) string {
		q := q
		q.Offset = offset
		return "/runs?" + q.Values().Encode()
	}
	data := struct {
		Q                  history.RunQuery
		Page               history.RunPage
		Seed, Prev, Next   string
		Verdicts, Statuses []string
	}{Q: q, Page: pg, Verdicts: []string{history.VerdictPass, history.VerdictFail, history.VerdictUnknown, history.VerdictNone},
		Statuses: []string{history.StatusRunning, history.StatusInterrupted, history.StatusFinished}}
	if q.Seed != nil {
		data.Seed = strconv.FormatInt(*q.Seed, 10)
	}
	if pg.Offset > 0 {
		data.Prev = link(max(pg.Offset-pg.Limit, 0))
	}
	if pg.Offset+len(pg.Runs) < pg.Matched {
		data.Next = link(pg.Offset + pg.Limit)
	}
	live := false
	for _, h := range pg.Runs {
		live = live || h.Status == history.StatusRunning
	}
	body, err := writeup.Render(runsHTML(), data)
	if err != nil {
		v.fail(w, r, err)
		return
	}
	v.write(w, r, page{Title: "Runs", Body: body, Refresh: v.refreshFor(live)})
}

// runPath is a run's page.
func runPath(id string) string { return "/runs/" + url.PathEscape(id) }
