package report

import (
	"html/template"
	"io"
	"sync"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/suite"
	"github.com/overnight-dev/overnight/harness/writeup"
)

// maxHTMLRuns bounds the table of runs that did not pass in a suite's HTML
// report (the JSON and JUnit keep every run).
const maxHTMLRuns = 500

// SuiteOptions change what a suite's HTML report shows.
type SuiteOptions struct {
	// RunLink, if set, gives the link to a run's own report ("" for none):
	// the run reports written beside the suite's (`suite --html`), or the
	// viewer's run pages.
	RunLink func(runID string) string
}

type suiteRow struct {
	Scenario, Agent        string
	N, Passes, Fails, Unkn int
	PassK                  []string
	PassAtK                string
	All                    bool
}

type failedRow struct {
	suite.RunResult
	Link, Corpus string
	Faults       []faultItem
}

// The groups table shows pass^k for k up to 5 and pass@k for the largest
// of those k only, as the Markdown does: a table as wide as the page. The
// runs that did not pass take two rows each: what happened, then the
// command that reproduces it on a line of its own, which scrolls inside
// its box rather than wrap (a command broken inside a flag cannot be
// read, nor copied).
var suiteHTML = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("suite").Parse(`<h1>Suite {{.Res.Suite.ID}}: <span class="{{.Class}}">{{.Headline}}</span></h1>
{{with .Res.Requirement}}<p>Requirement <code>{{.Expression}}</code>: <b class="{{$.Class}}">{{.Outcome}}</b>. {{.Detail}}</p>
{{end}}<p>{{.Sum.Runs}} runs in {{.Sum.Groups}} groups: {{.Sum.Passes}} passed, {{.Sum.Fails}} failed, {{.Sum.Unknown}} unknown{{if .Res.Suite.Interrupted}} (<b>interrupted</b>: not every run ran; those stopped are resumable){{end}}.
Started {{.Started}}, {{.Wall}} s, parallel {{.Res.Suite.Parallel}}{{with .Res.Suite.Shard}}, shard {{.}}{{end}}{{if .Res.Merged}}, merged from {{len .Res.Merged}} shards{{end}}.</p>
<h2>Groups</h2>
<p class="muted">Each scenario and agent is a group whose seeds are its trials. pass^k is the chance that k trials drawn from the group all pass (tau-bench's estimator){{with .AtK}}; pass@{{.}} that at least one of {{.}} does{{end}}. An unknown run is never a pass. The JSON report has every k.</p>
<table><tr><th>scenario</th><th>agent</th><th class="n">runs</th><th class="n">pass</th><th class="n">fail</th><th class="n">unknown</th>{{range .Ks}}<th class="n">pass^{{.}}</th>{{end}}{{with .AtK}}<th class="n">pass@{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr><td class="name">{{if .All}}<b>all</b>{{else}}{{.Scenario}}{{end}}</td><td class="name">{{.Agent}}</td><td class="n">{{.N}}</td><td class="n">{{.Passes}}</td><td class="n">{{.Fails}}</td><td class="n">{{.Unkn}}</td>{{range .PassK}}<td class="n">{{.}}</td>{{end}}{{if $.AtK}}<td class="n">{{.PassAtK}}</td>{{end}}</tr>
{{end}}</table>
{{if .Failed}}<h2>Runs that did not pass ({{len .Failed}})</h2>
<table><tr><th>scenario</th><th>agent</th><th class="n">seed</th><th>verdict</th><th>faults</th><th>reason</th><th>run</th></tr>
{{range .Failed}}<tr><td class="name">{{.Scenario}}</td><td class="name">{{.Agent}}</td><td class="n">{{.Seed}}</td><td class="{{.Verdict}}">{{.Verdict}}{{with .Corpus}}<br><small class="muted">{{.}}</small>{{end}}</td><td>{{range $i, $f := .Faults}}{{if $i}}<br>{{end}}<code class="spec{{if not .Fired}} muted{{end}}">{{.Spec}}</code>{{if not .Fired}} <small class="muted">never fired</small>{{end}}{{else}}{{if .Error}}–{{else}}none{{end}}{{end}}</td><td>{{.Reason}}</td><td class="id">{{if .Link}}<a href="{{.Link}}">{{.RunID}}</a>{{else}}{{.RunID}}{{end}}</td></tr>
<tr class="cmd"><td colspan="7"><div class="cmd"><span class="muted">reproduce</span><code>{{.Reproduce}}</code></div></td></tr>
{{end}}</table>{{if .More}}<p>… and {{.More}} more: see the JSON or JUnit report.</p>{{end}}
{{if .CorpusNote}}<p class="muted"><small>† {{.CorpusNote}}</small></p>{{end}}
{{else}}<p>Every run passed.</p>{{end}}
{{with .Res.Corpus}}{{if or .Rerun .Added}}<p>Failing-seed corpus: {{.Rerun}} re-run first ({{.Fixed}} fixed, {{.StillFail}} still failing), {{.Added}} added.</p>{{end}}{{end}}
{{if .Res.Errors}}<h2>Harness errors ({{len .Res.Errors}})</h2><ul>{{range .Res.Errors}}<li>{{.}}</li>{{end}}</ul>{{end}}`))
})

// SuiteBody renders a suite's report as HTML to put inside a page: the
// requirement and its outcome, the groups with pass^k and pass@k, and the
// runs that did not pass with the command that reproduces each (and a link
// to each run's report when opts.RunLink gives one).
func SuiteBody(res *suite.Result, opts SuiteOptions) (template.HTML, error) {
	maxK := 0
	for _, g := range res.Groups {
		maxK = max(maxK, len(g.PassK))
	}
	ks := make([]int, min(maxK, 5))
	for i := range ks {
		ks[i] = i + 1
	}
	atK := len(ks)
	row := func(r suiteRow, passK, passAtK suite.KValues) suiteRow {
		for _, k := range ks {
			r.PassK = append(r.PassK, kValue(passK, k))
		}
		r.PassAtK = kValue(passAtK, atK)
		return r
	}
	var rows []suiteRow
	for _, g := range res.Groups {
		rows = append(rows, row(suiteRow{Scenario: g.Scenario, Agent: g.Agent, N: g.N, Passes: g.Passes, Fails: g.Fails, Unkn: g.Unknown}, g.PassK, g.PassAtK))
	}
	s := res.Summary
	if len(res.Groups) > 1 {
		rows = append(rows, row(suiteRow{All: true, N: s.Runs, Passes: s.Passes, Fails: s.Fails, Unkn: s.Unknown}, s.PassK, s.PassAtK))
	}
	var failed []failedRow
	all := res.Failed()
	for i, r := range all {
		if i == maxHTMLRuns {
			break
		}
		fr := failedRow{RunResult: r, Corpus: corpusMark(r), Faults: faultItems(r)}
		if opts.RunLink != nil && r.RunID != "" {
			fr.Link = opts.RunLink(r.RunID)
		}
		failed = append(failed, fr)
	}
	note := ""
	if anyFromCorpus(all[:len(failed)]) {
		note = corpusNote
	}
	return writeup.Render(suiteHTML(), struct {
		Res                            *suite.Result
		Sum                            suite.Summary
		Headline, Class, Started, Wall string
		Ks                             []int
		AtK                            int
		Rows                           []suiteRow
		Failed                         []failedRow
		More                           int
		CorpusNote                     string
	}{res, s, headline(res), headlineClass(res), res.Suite.StartedAt.UTC().Format("2006-01-02 15:04:05 UTC"), seconds(res.Suite.WallMS),
		ks, atK, rows, failed, len(all) - len(failed), note})
}

// SuiteHTML writes a suite's report as one self-contained HTML page (see
// SuiteBody for what it shows).
func SuiteHTML(w io.Writer, res *suite.Result, opts SuiteOptions) error {
	body, err := SuiteBody(res, opts)
	if err != nil {
		return err
	}
	return writeup.WritePage(w, writeup.Page{Title: "overnight suite " + res.Suite.ID, Body: body})
}

// headlineClass is the style class of a suite's outcome.
func headlineClass(res *suite.Result) string {
	switch h := headline(res); {
	case h[0] == 'P':
		return history.VerdictPass
	case h[0] == 'F':
		return history.VerdictFail
	}
	return history.VerdictUnknown
}

func kValue(v suite.KValues, k int) string {
	if x, ok := v.At(k); ok {
		return ratio(x)
	}
	return "–"
}
