package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/timeline"
	"github.com/overnight-dev/overnight/harness/writeup"
)

// ErrNoResult is returned by RunJSON for a run that has not ended: it has
// no verdict yet.
var ErrNoResult = errors.New("the run has no result yet")

// RunJSON writes a run's result as `overnight run --output json` prints
// it, or an error matching ErrNoResult for a run that has not ended.
func RunJSON(w io.Writer, f *history.Full) error {
	rec := f.Run.Record
	if rec.Result == nil {
		return fmt.Errorf("run %s (status %s): %w; resume it (overnight resume %s) or ask for --format html or md", rec.ID, rec.Status, ErrNoResult, rec.ID)
	}
	return writeJSON(w, rec.Result)
}

// runModel is a run as its reports show it.
type runModel struct {
	Rec     history.RunRecord
	Res     *history.Result
	Agent   string
	Verdict string // pass, fail, unknown, or "" before the end
	Reason  string
	Started string
	Wall    string
	Virtual string
	Steps   int
	Claim   string
	// Summary and Claims are what the agent sent with done: its report
	// (Claims indented JSON; "" : none).
	Summary    string
	Claims     string
	Reproduce  string
	Invariants []history.InvariantResult
	Faults     []faultRow
	Effects    []effectRow
	Counts     *history.EffectCounts
	Attempts   []attemptRow
	LLM        *history.LLMTotals
	LLMSoFar   bool // totals counted from the exchanges of a run not ended
	Marks      []timeline.Mark
	// Reflective: the run has reflections or gate decisions to show.
	Reflective  bool
	Reflections []history.ReflectionRecord
	Gate        []history.GateRecord
	// Poisoned and Rollbacks: the checkpoints the world contradicted, and
	// the ones the harness wrote instead (shown only when there are any).
	Poisoned  []history.PoisonedCheckpoint
	Rollbacks []history.Rollback
	// AgentReport is the agent's report file; nil when the scenario names
	// none or the agent has not reported done.
	AgentReport *history.AgentReport
	// MCP: the run's tools/calls and the servers they went to (none: no
	// MCP section).
	MCP        []mcpRow
	MCPServers []mcpServerRow
	// MCPRefused: the tools/calls the gateway refused before they became
	// effects (a tool an mcp-tool-gone or mcp-schema fault changed).
	MCPRefused []mcpRefusedRow
}

type faultRow struct {
	Spec, From, Applied, Healed, Met, Detail string
	Attempt                                  int
	Bad                                      bool // fired and could not be injected, or never met
}

type effectRow struct {
	Label, Kind, Status, Notes   string
	Attempt, Executions, Replays int
}

type attemptRow struct {
	N                   int
	Started, Ended, End string
	Exit, Notes         string
	Ok                  bool
}

// notes joins what is worth saying, each said when it holds.
func notes(said ...string) string {
	var out []string
	for i := 0; i+1 < len(said); i += 2 {
		if said[i] != "" {
			out = append(out, said[i+1])
		}
	}
	return strings.Join(out, "; ")
}

// when is "yes" when b holds, for notes.
func when(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

// newRunModel reads what the reports show out of a run's history.
func newRunModel(f *history.Full) *runModel {
	run := f.Run
	rec := run.Record
	m := &runModel{Rec: rec, Res: rec.Result, Agent: history.AgentLabel(rec.Agent), Verdict: rec.Verdict, Reason: rec.Reason,
		Started: rec.StartedAt.UTC().Format(time.RFC3339), Reproduce: harness.ReproduceCommand(rec),
		Marks: timeline.Marks(f), Reflections: f.Reflections, Gate: f.Gate,
		Reflective: len(f.Reflections) > 0 || len(f.Gate) > 0, AgentReport: f.Report}
	since := func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return "+" + seconds(max(t.Sub(rec.StartedAt).Milliseconds(), 0)) + " s"
	}
	virtual := func(t time.Time) string { return history.VirtualSince(rec.VirtualStart, t) }
	if res := rec.Result; res != nil {
		m.Wall = seconds(res.WallMS) + " s"
		m.Virtual = history.VirtualSpan(time.Duration(res.VirtualMS)*time.Millisecond) + " virtual"
		m.Steps = res.StepsCompleted
		m.Claim = res.Outcome
		m.Invariants = res.Invariants
		m.Counts = &res.Effects
		m.LLM = res.LLM
	} else {
		m.Virtual = history.VirtualSpan(run.Clock.Sub(rec.VirtualStart)) + " virtual so far"
		m.Steps = run.LastCheckpoint().Step
		if run.Done != nil {
			m.Claim = run.Done.Outcome
		}
		m.LLM, m.LLMSoFar = llmSoFar(run.LLM), len(run.LLM) > 0
	}
	if m.Claim == "" {
		m.Claim = history.OutcomeNone
	}
	if d := run.Done; d != nil {
		m.Summary = d.Summary
		var buf bytes.Buffer
		if len(d.Claims) > 0 && json.Indent(&buf, d.Claims, "", "  ") == nil {
			m.Claims = buf.String()
		}
	}
	m.Poisoned, m.Rollbacks = history.PoisonOf(run.Checkpoints)
	m.MCP, m.MCPServers = mcpCalls(run.Effects, f.Gate)
	m.MCPRefused = mcpRefused(history.MCPRefusals(run.Events), virtual)
	for _, fr := range run.Faults {
		row := faultRow{Spec: fr.Spec, From: fr.From, Applied: "never fired", Healed: "–", Met: "no", Detail: fr.MetDetail, Attempt: fr.AppliedAttempt}
		if fr.From == fr.Spec {
			row.From = ""
		}
		if fr.Applied {
			row.Applied = virtual(fr.AppliedVirtual) + " virtual"
			row.Healed = virtual(fr.HealedVirtual)
		}
		if fr.Met {
			row.Met = "yes"
		}
		if fr.Error != "" {
			row.Detail = "could not be injected: " + fr.Error
		}
		row.Bad = fr.Error != "" || !fr.Met
		m.Faults = append(m.Faults, row)
	}
	for _, e := range run.Effects {
		failure := ""
		if e.Error != nil {
			failure = e.Error.Code + ": " + e.Error.Message
		}
		m.Effects = append(m.Effects, effectRow{Label: history.EffectLabel(e.ID), Kind: e.Kind, Status: e.Status, Attempt: e.Attempt,
			Executions: e.Executions, Replays: e.Replays,
			Notes: notes(when(e.Replays > 0), replayNote(e.Replays), when(e.Reconciled), "reconciled after a crash", when(e.Unkeyed), "unkeyed", failure, failure)})
	}
	for i, a := range run.Attempts {
		killed, resumed := since(a.KillIssuedAt), since(a.FirstResumedAt)
		row := attemptRow{N: a.N, Started: since(a.StartedAt), Ended: since(a.EndedAt), End: a.End, Exit: "–", Ok: a.End == "exited",
			Notes: notes(when(i > 0), "a restart", when(a.Renewed), "renewed by a verified lesson",
				when(len(a.Lessons) > 0), fmt.Sprintf("%d lesson(s) handed", len(a.Lessons)),
				when(!a.KillIssuedAt.IsZero()), "kill issued "+killed, when(!a.FirstResumedAt.IsZero()), "resumed its checkpoint "+resumed)}
		if row.End == "" {
			row.End = "(still running, or its harness died)"
		}
		if a.ExitCode != nil {
			row.Exit = fmt.Sprint(*a.ExitCode)
		}
		m.Attempts = append(m.Attempts, row)
	}
	return m
}

// replayNote says why an effect shows replays: its key was sent again
// and the journal answered, the world did not act again.
func replayNote(n int) string {
	times := "once"
	if n > 1 {
		times = fmt.Sprintf("%d times", n)
	}
	return "replayed " + times + ": the same key was sent again (say, after a network cut lost the first reply) and answered from the journal, not executed again"
}

// llmSoFar counts a live run's LLM exchanges, for a report before its
// result has the totals.
func llmSoFar(exchanges []history.LLMRecord) *history.LLMTotals {
	if len(exchanges) == 0 {
		return nil
	}
	t := &history.LLMTotals{Provider: exchanges[0].Provider, Model: exchanges[0].Model}
	for _, x := range exchanges {
		t.Count(x.Status, x.Code)
		if x.Usage != nil {
			t.PromptTokens += x.Usage.PromptTokens
			t.CompletionTokens += x.Usage.CompletionTokens
		}
		t.CostUSD += x.CostUSD
	}
	return t
}

// VerdictText is a verdict for a person: the verdict, or the status of a
// run that has none yet.
func (m *runModel) VerdictText() string {
	if m.Verdict == "" {
		return "no verdict yet (" + m.Rec.Status + ")"
	}
	return strings.ToUpper(m.Verdict)
}

// LLMText is the LLM totals in a sentence.
func (m *runModel) LLMText() string {
	l := m.LLM
	if l == nil {
		return "The run made no LLM call."
	}
	what := l.Provider + ":" + l.Model
	if l.TestDouble {
		what = "scripted (a deterministic test double driven by the scenario's rules, not a real model)"
	}
	if l.ReplayOf != "" {
		what += ", replayed from run " + l.ReplayOf
	}
	refused := ""
	for _, code := range slices.Sorted(maps.Keys(l.RefusedBy)) {
		refused += fmt.Sprintf(", %d %s", l.RefusedBy[code], code)
	}
	soFar := ""
	if m.LLMSoFar {
		soFar = " so far"
	}
	return fmt.Sprintf("%s: %s%s (%d answered, %d refused%s), %d prompt + %d completion tokens, $%.4f.",
		what, history.Count(l.Calls, "call"), soFar, l.Answered, l.Refused, refused, l.PromptTokens, l.CompletionTokens, l.CostUSD)
}

// EffectsText is the effect counts in a sentence.
func (m *runModel) EffectsText() string {
	if e := m.Counts; e != nil {
		return fmt.Sprintf("%d executed, %d deduplicated, %s, %d unknown, %d unkeyed.", e.Executed, e.Deduplicated, history.Count(e.Duplicates, "duplicate"), e.Unknown, e.Unkeyed)
	}
	return fmt.Sprintf("%s so far (the counts come with the verdict).", history.Count(len(m.Effects), "effect"))
}

var runHTML = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("run").Parse(`<h1>Run {{.Rec.ID}}</h1>
<p>Verdict: <b class="{{.Verdict}}">{{.VerdictText}}</b>{{if .Reason}} — {{.Reason}}{{end}}</p>
<dl class="facts">
<dt>scenario</dt><dd>{{.Rec.Scenario}} <span class="muted">({{.Rec.Source}})</span></dd>
<dt>agent</dt><dd>{{.Agent}}</dd>
<dt>seed</dt><dd>{{.Rec.Seed}}</dd>
<dt>status</dt><dd>{{.Rec.Status}}</dd>
<dt>started</dt><dd>{{.Started}}</dd>
<dt>time</dt><dd>{{if .Wall}}{{.Wall}} wall, {{end}}{{.Virtual}}</dd>
<dt>attempts</dt><dd>{{len .Attempts}}; steps completed: {{.Steps}}; the agent's claim: {{.Claim}}</dd>
{{with .Rec.Isolated}}<dt>isolated re-run</dt><dd>{{.Purpose}} of run {{.Parent}}, from checkpoint {{.FromCheckpoint}}</dd>
{{end}}{{with .Res}}<dt>history digest</dt><dd><code>{{.HistoryDigest}}</code></dd>
{{end}}<dt>reproduce</dt><dd><div class="cmd"><code>{{.Reproduce}}</code></div></dd>
</dl>
<h2>Timeline</h2>
{{.SVG}}
<h2>Invariants</h2>
{{if .Invariants}}<table><tr><th>verdict</th><th>invariant</th><th>kind</th><th>detail</th></tr>
{{range .Invariants}}<tr><td class="{{.Verdict}}">{{.Verdict}}</td><td>{{.Name}}</td><td>{{.Kind}}</td><td>{{.Detail}}</td></tr>
{{end}}</table>{{else}}<p class="muted">Not judged yet: invariants are judged when the run ends.</p>{{end}}
{{with .AgentReport}}<h2>The agent's report</h2>
<p>{{.Describe}}</p>
{{if .Content}}<pre>{{.Content}}</pre>
{{end}}{{end}}<h2>Faults</h2>
{{if .Faults}}<table><tr><th>fault</th><th>applied</th><th class="n">attempt</th><th>healed</th><th>met</th><th>detail</th></tr>
{{range .Faults}}<tr><td><code>{{.Spec}}</code>{{if .From}} <span class="muted">from {{.From}}</span>{{end}}</td><td>{{.Applied}}</td><td class="n">{{if .Attempt}}{{.Attempt}}{{end}}</td><td>{{.Healed}}</td><td class="{{if .Bad}}bad{{else}}ok{{end}}">{{.Met}}</td><td>{{.Detail}}</td></tr>
{{end}}</table>{{else}}<p>No fault was scheduled.</p>{{end}}
<h2>Effects</h2>
<p>{{.EffectsText}}</p>
{{if .Effects}}<table><tr><th>effect</th><th>kind</th><th>status</th><th class="n">attempt</th><th class="n">executions</th><th class="n">replays</th><th>notes</th></tr>
{{range .Effects}}<tr><td>{{.Label}}</td><td>{{.Kind}}</td><td class="{{if eq .Status "done"}}ok{{else}}bad{{end}}">{{.Status}}</td><td class="n">{{.Attempt}}</td><td class="n">{{.Executions}}</td><td class="n">{{.Replays}}</td><td>{{.Notes}}</td></tr>
{{end}}</table>{{end}}
{{if or .MCP .MCPRefused}}<h2>MCP tool calls</h2>
{{if .MCP}}<table><tr><th>server</th><th>tools called</th></tr>
{{range .MCPServers}}<tr><td>{{.Server}}</td><td>{{.Tools}}</td></tr>
{{end}}</table>
<table><tr><th>call</th><th>tool</th><th>key</th><th>key by</th><th>status</th><th>replayed</th><th>gate</th></tr>
{{range .MCP}}<tr><td>{{.Call}}</td><td><code>{{.Tool}}</code></td><td>{{.Key}}</td><td>{{.KeyBy}}</td><td class="{{if eq .Status "done"}}ok{{else}}bad{{end}}">{{.StatusText}}</td><td>{{.Replayed}}</td><td>{{.Gate}}</td></tr>
{{end}}</table>
{{else}}<p>No tools/call became an effect.</p>
{{end}}{{if .MCPRefused}}<h2>MCP calls refused</h2>
<p>{{.MCPRefusedText}}</p>
<table><tr><th>when</th><th>tool</th><th class="n">attempt</th><th>key</th><th>fault</th><th>what the agent was told</th></tr>
{{range .MCPRefused}}<tr><td>{{.When}}</td><td><code>{{.Tool}}</code></td><td class="n">{{.Attempt}}</td><td>{{.Key}}</td><td><code>{{.Fault}}</code></td><td class="bad">{{.Told}}</td></tr>
{{end}}</table>
{{end}}{{end}}<h2>Attempts</h2>
{{if .Attempts}}<table><tr><th class="n">attempt</th><th>started</th><th>ended</th><th>how it ended</th><th class="n">exit code</th><th>notes</th></tr>
{{range .Attempts}}<tr><td class="n">{{.N}}</td><td>{{.Started}}</td><td>{{.Ended}}</td><td class="{{if .Ok}}ok{{else}}bad{{end}}">{{.End}}</td><td class="n">{{.Exit}}</td><td>{{.Notes}}</td></tr>
{{end}}</table>{{else}}<p>No attempt started.</p>{{end}}
{{if or .Poisoned .Rollbacks}}<h2>Poisoned state</h2>
{{if .Poisoned}}<table><tr><th class="n">checkpoint</th><th class="n">step</th><th class="n">attempt</th><th>why the world contradicts it</th><th>rolled back</th></tr>
{{range .Poisoned}}<tr><td class="n">{{.Seq}}</td><td class="n">{{.Step}}</td><td class="n">{{.Attempt}}</td><td class="bad">{{.Reason}}</td><td>{{if .RolledBackBy}}by checkpoint {{.RolledBackBy}}{{else}}no{{end}}</td></tr>
{{end}}</table>{{end}}
{{if .Rollbacks}}<table><tr><th class="n">rollback</th><th class="n">attempt</th><th class="n">replaced</th><th>back to</th><th>effects since then (kept by the world)</th></tr>
{{range .Rollbacks}}<tr><td class="n">{{.Seq}}</td><td class="n">{{.Attempt}}</td><td class="n">{{.Of}}</td><td>{{.FromText}}</td><td>{{range $i, $e := .RolledPast}}{{if $i}}, {{end}}{{$e}}{{end}}</td></tr>
{{end}}</table>{{end}}
{{end}}{{if or .Summary .Claims}}<h2>What the agent claimed</h2>
{{with .Summary}}<p>{{.}}</p>
{{end}}{{with .Claims}}<p class="muted">Its claims, sent with done (a world that judges claims holds them to what it shows: goal-reached):</p>
<pre><code>{{.}}</code></pre>
{{end}}{{end}}<h2>LLM</h2>
<p>{{.LLMText}}</p>
{{.Sections}}`))
})

// RunOptions change what a run's HTML report shows. The zero value is the
// report as `overnight report` writes it.
type RunOptions struct{}

// RunBody renders a run's report as HTML to put inside a page: its verdict
// and reason, the SVG timeline, invariants, faults (applied, met), effects,
// attempts and how each ended, LLM totals, and its reflections and the
// gate's decisions when it has any. The viewer (overnight serve) shows it
// in its run page.
func RunBody(f *history.Full, _ RunOptions) (template.HTML, error) {
	m := newRunModel(f)
	var sections template.HTML
	if m.Reflective {
		var err error
		if sections, err = writeup.ReflectionsHTML(m.Reflections, m.Gate); err != nil {
			return "", err
		}
	}
	return writeup.Render(runHTML(), struct {
		*runModel
		SVG, Sections template.HTML
	}{m, timeline.SVG(m.Marks), sections})
}

// RunHTML writes a run's report as one self-contained HTML page: inline
// CSS and SVG, no script, no external asset (see RunBody for what it
// shows).
func RunHTML(w io.Writer, f *history.Full, opts RunOptions) error {
	body, err := RunBody(f, opts)
	if err != nil {
		return err
	}
	return writeup.WritePage(w, writeup.Page{Title: "overnight run " + f.Run.Record.ID, Body: body})
}

// RunMarkdown writes a run's report as Markdown: what RunHTML shows but
// the timeline.
func RunMarkdown(w io.Writer, f *history.Full) error {
	m := newRunModel(f)
	var b strings.Builder
	rec := m.Rec
	fmt.Fprintf(&b, "# Run %s\n\n", rec.ID)
	fmt.Fprintf(&b, "Verdict: **%s**", m.VerdictText())
	if m.Reason != "" {
		fmt.Fprintf(&b, " — %s", mdEscape(m.Reason))
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "- scenario: %s (%s)\n- agent: %s\n- seed: %d\n- status: %s\n- started: %s\n", rec.Scenario, rec.Source, m.Agent, rec.Seed, rec.Status, m.Started)
	fmt.Fprintf(&b, "- time: ")
	if m.Wall != "" {
		fmt.Fprintf(&b, "%s wall, ", m.Wall)
	}
	fmt.Fprintf(&b, "%s\n", m.Virtual)
	fmt.Fprintf(&b, "- attempts: %d; steps completed: %d; the agent's claim: %s\n", len(m.Attempts), m.Steps, m.Claim)
	if iso := rec.Isolated; iso != nil {
		fmt.Fprintf(&b, "- isolated re-run: %s of run %s, from checkpoint %d\n", iso.Purpose, iso.Parent, iso.FromCheckpoint)
	}
	if m.Res != nil {
		fmt.Fprintf(&b, "- history digest: `%s`\n", m.Res.HistoryDigest)
	}
	fmt.Fprintf(&b, "- reproduce: `%s`\n\n", m.Reproduce)

	var rows [][]string
	for _, inv := range m.Invariants {
		rows = append(rows, []string{inv.Verdict, inv.Name, inv.Kind, inv.Detail})
	}
	mdSection(&b, "Invariants", "", "Not judged yet: invariants are judged when the run ends.", "| verdict | invariant | kind | detail |\n|---|---|---|---|", rows)
	if r := m.AgentReport; r != nil {
		fmt.Fprintf(&b, "## The agent's report\n\n%s\n\n", mdEscape(r.Describe()))
		if r.Content != "" {
			fence := mdFence(r.Content)
			fmt.Fprintf(&b, "%s\n%s", fence, r.Content)
			if !strings.HasSuffix(r.Content, "\n") {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "%s\n\n", fence)
		}
	}
	rows = nil
	for _, fr := range m.Faults {
		spec := "`" + fr.Spec + "`"
		if fr.From != "" {
			spec += " (from `" + fr.From + "`)"
		}
		attempt := ""
		if fr.Attempt > 0 {
			attempt = fmt.Sprint(fr.Attempt)
		}
		rows = append(rows, []string{spec, fr.Applied, attempt, fr.Healed, fr.Met, fr.Detail})
	}
	mdSection(&b, "Faults", "", "No fault was scheduled.", "| fault | applied | attempt | healed | met | detail |\n|---|---|--:|---|---|---|", rows)
	rows = nil
	for _, e := range m.Effects {
		rows = append(rows, []string{e.Label, e.Kind, e.Status, fmt.Sprint(e.Attempt), fmt.Sprint(e.Executions), fmt.Sprint(e.Replays), e.Notes})
	}
	mdSection(&b, "Effects", m.EffectsText(), "", "| effect | kind | status | attempt | executions | replays | notes |\n|---|---|---|--:|--:|--:|---|", rows)
	mcpMarkdown(&b, m)
	rows = nil
	for _, a := range m.Attempts {
		rows = append(rows, []string{fmt.Sprint(a.N), a.Started, a.Ended, a.End, a.Exit, a.Notes})
	}
	mdSection(&b, "Attempts", "", "No attempt started.", "| attempt | started | ended | how it ended | exit code | notes |\n|--:|---|---|---|--:|---|", rows)
	if len(m.Poisoned) > 0 || len(m.Rollbacks) > 0 {
		rows = nil
		for _, p := range m.Poisoned {
			by := "no"
			if p.RolledBackBy > 0 {
				by = fmt.Sprintf("by checkpoint %d", p.RolledBackBy)
			}
			rows = append(rows, []string{fmt.Sprint(p.Seq), fmt.Sprint(p.Step), fmt.Sprint(p.Attempt), p.Reason, by})
		}
		mdSection(&b, "Poisoned state", "Checkpoints whose claims the world contradicted as they were written.", "No checkpoint is poisoned.",
			"| checkpoint | step | attempt | why the world contradicts it | rolled back |\n|--:|--:|--:|---|---|", rows)
		rows = nil
		for _, r := range m.Rollbacks {
			rows = append(rows, []string{fmt.Sprint(r.Seq), fmt.Sprint(r.Attempt), fmt.Sprint(r.Of), r.FromText(), strings.Join(r.RolledPast, ", ")})
		}
		if len(rows) > 0 {
			mdTable(&b, "| rollback | attempt | replaced | back to | effects since then (kept by the world) |\n|--:|--:|--:|---|---|", rows)
		}
	}
	if m.Summary != "" || m.Claims != "" {
		b.WriteString("## What the agent claimed\n\n")
		if m.Summary != "" {
			fmt.Fprintf(&b, "%s\n\n", mdEscape(m.Summary))
		}
		if m.Claims != "" {
			fmt.Fprintf(&b, "Its claims, sent with done (a world that judges claims holds them to what it shows: goal-reached):\n\n```json\n%s\n```\n\n", m.Claims)
		}
	}
	fmt.Fprintf(&b, "## LLM\n\n%s\n\n", m.LLMText())
	if m.Reflective {
		b.WriteString(writeup.ReflectionsMarkdown(m.Reflections, m.Gate))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdFence is a code fence no line of text can close: tildes, one more
// than the longest run of them text starts a line with (at least three).
func mdFence(text string) string {
	n := 3
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimLeft(line, " ")
		if k := len(line) - len(strings.TrimLeft(line, "~")); k >= n {
			n = k + 1
		}
	}
	return strings.Repeat("~", n)
}

// mdSection writes a Markdown section: its title, a line of text (if
// any), then its table — or, without rows, the line that says so.
func mdSection(b *strings.Builder, title, text, empty, head string, rows [][]string) {
	fmt.Fprintf(b, "## %s\n\n", title)
	if text != "" {
		fmt.Fprintf(b, "%s\n\n", text)
	}
	if len(rows) == 0 {
		if empty != "" {
			fmt.Fprintf(b, "%s\n\n", empty)
		}
		return
	}
	mdTable(b, head, rows)
}

// mdTable writes a Markdown table: its head, then a line per row.
func mdTable(b *strings.Builder, head string, rows [][]string) {
	b.WriteString(head + "\n")
	for _, r := range rows {
		b.WriteString("|")
		for _, c := range r {
			fmt.Fprintf(b, " %s |", mdEscape(c))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}
