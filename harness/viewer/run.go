package viewer

import (
	"errors"
	"html/template"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/report"
	"github.com/overnight-dev/overnight/harness/writeup"
)

// maxEvents bounds the trajectory a run page shows (its newest events).
const maxEvents = 500

var runHTML = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("run").Funcs(funcs).Parse(`<p class="muted">Reports of this run: <a href="{{.Base}}/report.html">HTML</a> · <a href="{{.Base}}/report.md">Markdown</a>{{if .HasResult}} · <a href="{{.Base}}/result.json">result (JSON)</a>{{end}}{{if .AgentReport}} · <a href="{{.Base}}/agent-report">the agent's report file</a>{{end}}{{if .Parent}} · re-run of <a href="{{runLink .Parent}}">{{.Parent}}</a>{{end}}</p>
{{.Report}}
{{if .Isolated}}<h2>Isolated re-runs of its reflections</h2>
<table><tr><th>run</th><th>purpose</th><th>verdict</th><th>reason</th></tr>
{{range .Isolated}}<tr><td><a href="{{runLink .ID}}">{{.ID}}</a></td><td>{{with .Isolated}}{{.Purpose}}{{end}}</td><td class="{{.Verdict}}">{{.Verdict}}</td><td>{{short .Reason 120}}</td></tr>
{{end}}</table>{{end}}
<h2>LLM exchanges ({{len .LLM}})</h2>
{{if .LLM}}<table><tr><th class="n">call</th><th class="n">attempt</th><th>status</th><th>model</th><th class="n">tokens</th><th class="n">cost</th><th>fault</th><th>request and answer</th></tr>
{{range .LLM}}<tr><td class="n">{{.Call}}</td><td class="n">{{.Attempt}}</td><td class="{{if eq .Status 200}}ok{{else}}bad{{end}}">{{.Status}}{{if .Code}} {{.Code}}{{end}}</td><td>{{.Provider}}:{{.Model}}</td><td class="n">{{with .Usage}}{{.PromptTokens}} + {{.CompletionTokens}}{{end}}</td><td class="n">{{printf "$%.5f" .CostUSD}}</td><td>{{.Fault}}</td>
<td><details><summary>{{if .Error}}{{short .Error 80}}{{else}}show{{end}}</summary><p>Request:</p><pre>{{pretty .Request}}</pre>{{if .Response}}<p>Answer:</p><pre>{{pretty .Response}}</pre>{{end}}</details></td></tr>
{{end}}</table>{{else}}<p>No LLM call.</p>{{end}}
<h2>Events{{if .EventsCut}} (the newest {{len .Events}} of {{.EventsCut}}){{end}}</h2>
{{if .Events}}<table><tr><th class="n">seq</th><th class="n">attempt</th><th>type</th><th>message</th><th>virtual time</th></tr>
{{range .Events}}<tr><td class="n">{{.Seq}}</td><td class="n">{{.Attempt}}</td><td>{{.Type}}</td><td>{{.Message}}{{if .Data}} <code>{{short (printf "%s" .Data) 200}}</code>{{end}}</td><td>{{virtual $.VirtualStart .Virtual}}</td></tr>
{{end}}</table>{{else}}<p>No event.</p>{{end}}
<h2>Logs</h2>
{{range .Logs}}<h3>Attempt {{.Attempt}}: {{if .End}}{{.End}}{{else}}running{{end}}{{with .ExitCode}}, exit code {{.}}{{end}}</h3>
{{if or .Stdout .Stderr}}<details open><summary>stdout ({{len .Stdout}} bytes)</summary><pre>{{.Stdout}}</pre></details>
<details{{if .Stderr}} open{{end}}><summary>stderr ({{len .Stderr}} bytes)</summary><pre>{{.Stderr}}</pre></details>
{{else}}<p class="muted">{{if .End}}It wrote nothing.{{else}}Its output is kept when it ends.{{end}}</p>{{end}}
{{else}}<p>No attempt started.</p>{{end}}`))
})

// run is a run's page: its report (timeline, invariants, faults, effects,
// attempts, LLM totals, reflections, gate) and what only the viewer shows —
// its LLM exchanges, events and each attempt's logs.
func (v *Viewer) run(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	full, err := v.src.Full(r.Context(), id)
	if err != nil {
		v.fail(w, r, err)
		return
	}
	rep, err := report.RunBody(full, report.RunOptions{})
	if err != nil {
		v.fail(w, r, err)
		return
	}
	run := full.Run
	data := struct {
		Base, Parent string
		HasResult    bool
		AgentReport  bool
		VirtualStart time.Time
		Report       template.HTML
		Isolated     []history.RunRecord
		LLM          []history.LLMRecord
		Events       []history.EventRecord
		EventsCut    int
		Logs         []history.AttemptLog
	}{Base: runPath(id), HasResult: run.Record.Result != nil, AgentReport: full.Report != nil && full.Report.Status == history.ReportKept, VirtualStart: run.Record.VirtualStart, Report: rep, LLM: run.LLM, Events: run.Events, Logs: full.Logs}
	if iso := run.Record.Isolated; iso != nil {
		data.Parent = iso.Parent
	}
	for _, rec := range full.Isolated {
		data.Isolated = append(data.Isolated, rec)
	}
	sort.Slice(data.Isolated, func(i, k int) bool { return data.Isolated[i].ID < data.Isolated[k].ID })
	if n := len(data.Events); n > maxEvents {
		data.Events, data.EventsCut = data.Events[n-maxEvents:], n
	}
	body, err := writeup.Render(runHTML(), data)
	if err != nil {
		v.fail(w, r, err)
		return
	}
	v.write(w, r, page{Title: title("Run "+id, run.Record.Scenario), Body: body, Refresh: v.refreshFor(run.Record.Status == history.StatusRunning)})
}

// runReport is a run's report as `overnight report` writes it: HTML,
// Markdown, or its result as JSON.
func (v *Viewer) runReport(w http.ResponseWriter, r *http.Request) {
	full, err := v.src.Full(r.Context(), r.PathValue("id"))
	if err != nil {
		v.fail(w, r, err)
		return
	}
	var write func(*strings.Builder) error
	switch {
	case strings.HasSuffix(r.URL.Path, ".html"):
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		write = func(b *strings.Builder) error { return report.RunHTML(b, full, report.RunOptions{}) }
	case strings.HasSuffix(r.URL.Path, ".md"):
		w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
		write = func(b *strings.Builder) error { return report.RunMarkdown(b, full) }
	default:
		w.Header().Set("Content-Type", "application/json")
		write = func(b *strings.Builder) error { return report.RunJSON(b, full) }
	}
	var b strings.Builder
	if err := write(&b); err != nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		status := http.StatusInternalServerError
		if errors.Is(err, report.ErrNoResult) {
			status = http.StatusNotFound
		}
		http.Error(w, err.Error(), status)
		return
	}
	_, _ = w.Write([]byte(b.String()))
}

// agentReport is the agent's own report file, as it wrote it (plain text:
// the viewer renders nothing the agent wrote).
func (v *Viewer) agentReport(w http.ResponseWriter, r *http.Request) {
	full, err := v.src.Full(r.Context(), r.PathValue("id"))
	if err != nil {
		v.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rep := full.Report
	if rep == nil || rep.Status != history.ReportKept {
		why := "the run has no report file: its scenario names none, or its agent has not reported done"
		if rep != nil {
			why = "the agent's report " + rep.Describe()
		}
		http.Error(w, why, http.StatusNotFound)
		return
	}
	_, _ = w.Write([]byte(rep.Content))
}
