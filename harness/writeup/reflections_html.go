package writeup

import (
	"html/template"
	"sync"

	"github.com/overnight-dev/overnight/harness/history"
)

// reflectionsHTML renders a run's reflections and the gate's decisions:
// what ReflectionsMarkdown writes, as HTML.
var reflectionsHTML = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("reflections").Funcs(template.FuncMap{
		"decision": DecisionText, "author": lessonAuthor, "yesno": yesNo, "cameBack": cameBack, "replays": replaysSummary, "orNone": orNone,
		"replaysExplained": func() string { return replaysExplained }, "inc": func(i int) int { return i + 1 },
	}).Parse(`{{if not .Reflections}}<p>The run opened no reflection.</p>{{end}}
{{range $refl := .Reflections}}<section>
<h2>Reflection {{.ID}}: {{decision .}}</h2>
<p><b>Trigger.</b> {{.Trigger.Kind}} in attempt {{.Trigger.Attempt}}, after step {{.Trigger.Step}}: {{.Trigger.Detail}}</p>
<p><b>Where the run stood.</b> Last good checkpoint seq {{.Checkpoint}}; the failing attempt started from checkpoint {{.StartCheckpoint}}; the real world's ledger at entry {{.WorldSeq}}.</p>
{{if .Replays}}<p><b>Replays in isolation.</b> {{replays .Replays}} <span class="muted">{{replaysExplained}}</span></p>
<table><tr><th class="n">replay</th><th>isolated run</th><th>failure came back?</th><th>the replay's own verdict</th><th>detail</th></tr>
{{range $i, $r := .Replays}}<tr><td class="n">{{inc $i}}</td><td>{{.RunID}}</td><td class="{{if .Reproduced}}fail{{else}}pass{{end}}">{{yesno .Reproduced}}</td><td class="{{.Verdict}}">{{orNone .Verdict}}</td><td>{{.Detail}}</td></tr>
{{end}}</table>{{end}}
{{if .ReplaysSkipped}}<p><b>No replays.</b> {{.ReplaysSkipped}}.</p>{{end}}
{{if .Divergence}}<p><b>First divergence.</b> {{.Divergence}}</p>{{end}}
{{with .Diagnosis}}<p><b>Diagnosis.</b> <code>{{.Class}}</code>: {{.Detail}}</p><p>Evidence: <code>{{printf "%s" .Evidence}}</code></p>{{end}}
{{with .Counterfactual}}<p><b>Counterfactual</b> (the same re-run without the run's faults, run {{.RunID}}): {{cameBack .Reproduced}} (its own verdict: {{orNone .Verdict}}).</p>{{end}}
{{if .Remembered}}<p><b>Remembered lessons</b> the failing attempt was handed, verified against this run's world before any new lesson was drawn:</p><table><tr><th>lesson</th><th>drawn in run</th><th>verification run</th><th>verdict</th><th>reason</th></tr>
{{range .Remembered}}<tr><td>{{.Lesson.ID}}</td><td>{{.Run}}</td><td>{{.Verification.RunID}}</td><td class="{{.Verification.Verdict}}">{{.Verification.Verdict}}</td><td>{{.Verification.Reason}}</td></tr>{{end}}</table>{{end}}
{{with .Lesson}}<p><b>Lesson</b> {{.ID}}{{if $refl.FromMemory}}, remembered from an earlier run{{end}}, {{author .By}}:</p><blockquote>{{.Text}}</blockquote>{{end}}
{{with .Verification}}<p><b>Verification</b> in isolation (run {{.RunID}}, on the real world at ledger entry {{.WorldSeq}}): {{.Verdict}} — {{.Reason}}{{if .Stale}} (went stale; redone {{.Redone}} time(s)){{end}}</p>{{end}}
<p><b>Decision.</b> {{.Decision}}: {{.Reason}}</p>
</section>{{end}}
<h2>The gate</h2>
{{if .Gate}}<table><tr><th>effect</th><th>kind</th><th>policy</th><th>decision</th><th>by</th><th>reason</th></tr>
{{range .Gate}}<tr><td>{{.Key}}</td><td>{{.Kind}}</td><td>{{.Policy}}</td><td>{{.Decision}}</td><td>{{.By}}</td><td>{{.Reason}}</td></tr>{{end}}</table>
{{else}}<p>No effect waited at the gate or was denied by it.</p>{{end}}`))
})

// ReflectionsHTML renders a run's reflections and the gate's decisions as
// HTML sections (h2 headings, tables; no styles of their own beyond
// Style's classes): the part of the reflection report that a run's own
// report, and so the viewer's run page, carry too.
func ReflectionsHTML(refls []history.ReflectionRecord, gate []history.GateRecord) (template.HTML, error) {
	return Render(reflectionsHTML(), struct {
		Reflections []history.ReflectionRecord
		Gate        []history.GateRecord
	}{refls, gate})
}
