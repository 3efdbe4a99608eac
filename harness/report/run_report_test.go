package report_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	stdhtml "html"
	"html/template"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/report"
	"github.com/overnight-dev/overnight/harness/timeline"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// runFixture is the history of a deploy-v2 run as the journal would hold
// it, with fixed ids and times: a kill and a restart, an API change the
// world refused an effect on, a reflection that verified a lesson, a
// released effect and LLM calls.
func runFixture() *history.Full {
	start := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	virtual := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return start.Add(time.Duration(n) * time.Millisecond) }
	exit0, exit137 := 0, 137
	applied := virtual.Add(90 * time.Second)
	// The API changes three and a half days into the run's virtual week.
	changed := virtual.Add(83*time.Hour + 43*time.Minute)
	appliedMS, changedMS := int64(90_000), (83*time.Hour + 43*time.Minute).Milliseconds()
	res := &history.Result{RunID: "20261203-100000-abcdef", Scenario: "deploy-v2", Seed: 7, Verdict: "pass",
		Reason: "the agent reported done; all 5 invariants hold", Outcome: "success", Attempts: 3, StepsCompleted: 5,
		Effects: history.EffectCounts{Executed: 6, Deduplicated: 1},
		Invariants: []history.InvariantResult{
			{Name: "no-duplicate-effects", Kind: "always", Verdict: "pass", Detail: "every resource of a non-idempotent kind created once"},
			{Name: "goal-reached", Kind: "eventually", Verdict: "pass", Detail: "the service answers <on> prod"},
		},
		LLM: &history.LLMTotals{Provider: "scripted", Model: "scripted", TestDouble: true, Calls: 3, Answered: 2, Refused: 1, RefusedBy: map[string]int{"rate_limit_exceeded": 1}, PromptTokens: 120, CompletionTokens: 30},
		Faults: []history.FaultResult{
			{Kind: "kill", Spec: "kill@step:2", At: "step:2", Applied: true, AppliedVirtualMS: &appliedMS, Attempt: 1, Met: true, MetDetail: "the agent was killed after step 2 and a new attempt resumed"},
			{Kind: "api-version", Spec: "api-version:v2@step:3", At: "step:3", Applied: true, AppliedVirtualMS: &changedMS, Attempt: 2, Met: true, MetDetail: "an effect was refused under v2"},
			{Kind: "blackhole", Spec: "blackhole@t:1h/5m", At: "t:1h", From: "blackhole@every:1h/5m"},
		},
		Reflections: []history.Reflection{{ID: "r1", Trigger: "effect_refused: the world refused cloud.deploy_service (unauthorized)", Checkpoint: 3,
			Reproduced: history.Reproduced{Runs: 1, Failed: 1}, Decision: history.DecisionVerify, Reason: "lesson verified in isolation"}},
		Report: &history.ReportRecord{Path: "/workspace/report.md", Status: history.ReportKept, SHA256: "d0c5", Bytes: int64(len(agentReport))},
		WallMS: 7000, VirtualMS: (4*24*time.Hour + 2*time.Hour).Milliseconds(), HistoryDigest: "5ca1ab1e"}
	rec := history.RunRecord{ID: res.RunID, Scenario: "deploy-v2", Source: "builtin:deploy-v2", Seed: 7, Faults: []string{"kill@step:2", "api-version:v2@step:3"},
		Status: history.StatusFinished, Verdict: "pass", Reason: res.Reason, StartedAt: start, EndedAt: ms(7000), Attempts: 3, VirtualStart: virtual, Result: res}
	refusal := &protocol.EffectError{Code: "unauthorized", Message: "api_key is required", Status: 401}
	run := &history.Run{Record: rec, Clock: virtual.Add(4*24*time.Hour + 2*time.Hour),
		Attempts: []history.AttemptRecord{
			{N: 1, StartedAt: ms(100), EndedAt: ms(1500), End: "killed by fault", ExitCode: &exit137, KillIssuedAt: ms(1450)},
			{N: 2, StartedAt: ms(1700), EndedAt: ms(3000), End: "exited", ExitCode: &exit0, FirstResumedAt: ms(1800)},
			{N: 3, StartedAt: ms(5000), EndedAt: ms(6900), End: "exited", ExitCode: &exit0, Lessons: []protocol.Lesson{{ID: "lesson-1"}}},
		},
		Checkpoints: []history.CheckpointRecord{{Seq: 1, Step: 1, Attempt: 1, Wall: ms(600)}, {Seq: 2, Step: 2, Attempt: 1, Wall: ms(1400)},
			{Seq: 3, Step: 3, Attempt: 2, Wall: ms(2200)}, {Seq: 4, Step: 5, Attempt: 3, Wall: ms(6800)}},
		Effects: []history.EffectRecord{
			{ID: "k/step-1/0", Kind: "cloud.create_network", Status: "done", Attempt: 1, Executions: 1, Replays: 1, Wall: ms(500)},
			{ID: "k/step-4/0", Kind: "cloud.deploy_service", Status: "failed", Attempt: 2, Executions: 1, Error: refusal, Wall: ms(2600)},
			{ID: "u/1", Kind: "cloud.set_dns", Status: "done", Attempt: 3, Executions: 1, Unkeyed: true, Reconciled: true, Wall: ms(6500)},
		},
		Faults: []history.FaultRecord{
			{Index: 0, Spec: "kill@step:2", From: "kill@step:2", Kind: "kill", At: "step:2", Applied: true, AppliedAttempt: 1, AppliedVirtual: applied, AppliedWall: ms(1450), Met: true, MetDetail: "the agent was killed after step 2 and a new attempt resumed"},
			{Index: 1, Spec: "api-version:v2@step:3", From: "api-version:v2@step:3", Kind: "api-version", At: "step:3", Applied: true, AppliedAttempt: 2, AppliedVirtual: changed, AppliedWall: ms(2300), Met: true, MetDetail: "an effect was refused under v2"},
			{Index: 2, Spec: "blackhole@t:1h/5m", From: "blackhole@every:1h/5m", Kind: "blackhole", At: "t:1h"},
		},
	}
	run.Done = &history.DoneRecord{Outcome: "success", Attempt: 3, Virtual: virtual.Add(4*24*time.Hour + 2*time.Hour), Report: res.Report}
	return &history.Full{Run: run, Report: &history.AgentReport{ReportRecord: *res.Report, Content: agentReport},
		Reflections: []history.ReflectionRecord{{ID: "r1", N: 1, Stage: history.StageDecided,
			Trigger:    history.Trigger{Kind: "effect_refused", Attempt: 2, Step: 3, Detail: "the world refused cloud.deploy_service (unauthorized)"},
			Checkpoint: 3, WorldSeq: 4,
			Replays:   []history.ReplayRecord{{RunID: "20261203-100003-000001", Verdict: "fail", Reproduced: true, Detail: "refused again"}},
			Diagnosis: &history.Diagnosis{Class: "api_contract_change", Detail: "the API changed to v2", Evidence: json.RawMessage(`{"api_version":"v2"}`)},
			Lesson:    &history.Lesson{ID: "lesson-1", Text: "Send api_key under v2.", By: "the scripted model"},
			Decision:  history.DecisionVerify, Reason: "lesson verified in isolation", OpenedAt: ms(3000), DecidedAt: ms(4800)}},
		Gate: []history.GateRecord{{Seq: 1, EffectID: "k/step-4/1", Key: "step-4/1", Kind: "cloud.deploy_service", Attempt: 3, Policy: "verify",
			Decision: history.GateReleased, Reason: "released: reflection r1 verified lesson lesson-1", By: "gate", Since: ms(5600), At: ms(5600)}},
		Isolated: map[string]history.RunRecord{"20261203-100003-000001": {ID: "20261203-100003-000001", Verdict: "fail", StartedAt: ms(3100), EndedAt: ms(4200),
			Isolated: &history.Isolation{Parent: res.RunID, Purpose: "replay 1 of 1 of reflection r1"}}},
	}
}

// agentReport is what the fixture's agent wrote to /workspace/report.md:
// Markdown with a fence of its own and a tag that must stay text.
const agentReport = "# Deployed\n\nThe service answers <on> prod.\n\n~~~\nstep 5 done\n~~~\n"

// liveFixture is a run still going: no result, one attempt running.
func liveFixture() *history.Full {
	start := time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC)
	virtual := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := history.RunRecord{ID: "20261203-110000-fedcba", Scenario: "week", Source: "builtin:week", Agent: "naive", Seed: 3, Faults: []string{},
		Status: history.StatusRunning, StartedAt: start, Attempts: 1, VirtualStart: virtual}
	usage := &protocol.ChatUsage{PromptTokens: 40, CompletionTokens: 10}
	return &history.Full{Run: &history.Run{Record: rec, Clock: virtual.Add(36 * time.Hour),
		Attempts:    []history.AttemptRecord{{N: 1, StartedAt: start.Add(50 * time.Millisecond)}},
		Checkpoints: []history.CheckpointRecord{{Seq: 1, Step: 2, Attempt: 1, Wall: start.Add(900 * time.Millisecond)}},
		LLM:         []history.LLMRecord{{Seq: 1, Attempt: 1, Call: 1, Status: 200, Provider: "openai", Model: "gpt-4o-mini", Usage: usage, CostUSD: 0.00002}},
	}}
}

var _ = Describe("a run's reports", func() {
	It("are pinned: self-contained HTML with the SVG timeline, Markdown, and the result as JSON", func() {
		f := runFixture()
		var html, md, js bytes.Buffer
		Expect(report.RunHTML(&html, f, report.RunOptions{})).To(Succeed())
		Expect(report.RunMarkdown(&md, f)).To(Succeed())
		Expect(report.RunJSON(&js, f)).To(Succeed())
		golden("run.html", html.Bytes())
		golden("run.md", md.Bytes())
		golden("run.json", js.Bytes())

		page := html.String()
		Expect(page).To(ContainSubstring(`<svg xmlns="http://www.w3.org/2000/svg"`))
		Expect(page).NotTo(MatchRegexp(`(?i)(src|href)\s*=\s*["']?\s*(https?:)?//`), "self-contained: no external assets")
		Expect(page).NotTo(ContainSubstring("<script"))
		Expect(page).To(ContainSubstring("&lt;on&gt;"), "text is escaped")
		for _, want := range []string{"restart: attempt 2", "kill@step:2", "cloud.deploy_service", "Reflection r1", "The gate", "rate_limit_exceeded", "overnight run deploy-v2 --seed 7 --fault kill@step:2 --fault api-version:v2@step:3",
			"replayed once: the same key was sent again (say, after a network cut lost the first reply) and answered from the journal, not executed again"} {
			Expect(page).To(ContainSubstring(want))
		}
		var decoded history.Result
		Expect(json.Unmarshal(js.Bytes(), &decoded)).To(Succeed())
		Expect(decoded).To(Equal(*f.Run.Record.Result), "the JSON is the run's result as `run --output json` prints it")
	})

	It("write a virtual instant one way everywhere: +3d11h43m since the run's virtual start, as a fault spec's t:3d11h43m", func() {
		f := runFixture()
		var text, html, md bytes.Buffer
		Expect(f.Run.Record.Result.WriteText(&text)).To(Succeed())
		golden("run.txt", text.Bytes())
		Expect(report.RunHTML(&html, f, report.RunOptions{})).To(Succeed())
		Expect(report.RunMarkdown(&md, f)).To(Succeed())
		Expect(text.String()).To(ContainSubstring("(the failure came back in 1 of 1 replays)"))
		for name, out := range map[string]string{"text": text.String(), "html": stdhtml.UnescapeString(html.String()), "markdown": md.String()} {
			Expect(out).To(ContainSubstring("+3d11h43m virtual"), "%s: the API change's instant", name)
			Expect(out).To(ContainSubstring("4d2h virtual"), "%s: the run's virtual length", name)
			Expect(out).NotTo(MatchRegexp(`\+\d+h\d+m\d+s`), "%s: no Go duration (+83h43m0s) for an instant", name)
		}
	})

	It("show a run that has not ended, and refuse it a JSON result", func() {
		f := liveFixture()
		var html, md, js bytes.Buffer
		Expect(report.RunHTML(&html, f, report.RunOptions{})).To(Succeed())
		Expect(report.RunMarkdown(&md, f)).To(Succeed())
		golden("run-live.md", md.Bytes())
		Expect(html.String()).To(ContainSubstring("no verdict yet (running)"))
		Expect(html.String()).To(ContainSubstring("1 call so far"))
		Expect(html.String()).NotTo(ContainSubstring("The gate"), "no reflection sections for a run without any")
		Expect(report.RunJSON(&js, f)).To(MatchError(report.ErrNoResult))
	})
})

// laneNames are the lanes a timeline draws, top to bottom.
var laneNames = regexp.MustCompile(`<text x="4" y="\d+" font-size="12" fill="#333">([a-z]+)</text>`)

// svgOf is the timeline of a page.
func svgOf(page string) string {
	GinkgoHelper()
	from, to := strings.Index(page, "<svg"), strings.Index(page, "</svg>")
	Expect(from).To(BeNumerically(">=", 0), "the page has a timeline")
	return page[from:to]
}

var _ = Describe("a run's timeline", func() {
	It("names its lanes, writes the attempts and faults on it, and has a legend of its shapes and colours", func() {
		var html bytes.Buffer
		Expect(report.RunHTML(&html, runFixture(), report.RunOptions{})).To(Succeed())
		svg := svgOf(html.String())
		var lanes []string
		for _, m := range laneNames.FindAllStringSubmatch(svg, -1) {
			lanes = append(lanes, m[1])
		}
		Expect(lanes).To(Equal([]string{"attempts", "steps", "effects", "faults", "reflection", "gate"}))
		for _, label := range []string{"attempt 1", "attempt 2", "attempt 3", "kill@step:2", "api-version:v2@step:3", "r1 verified", "released"} {
			Expect(svg).To(MatchRegexp(`<text [^>]*>`+regexp.QuoteMeta(label)+`</text>`), "%q is written on the timeline, not only in a tooltip", label)
		}
		Expect(svg).NotTo(MatchRegexp(`<text [^>]*>blackhole@`), "a fault that never fired is not on it")
		Expect(svg).To(ContainSubstring(">legend<"))
		for _, tone := range []string{"ok", "bad"} {
			Expect(svg).To(ContainSubstring(`fill="`+timeline.Tones[tone]+`"/><text x="`), "a swatch of the %s colour", tone)
			Expect(svg).To(ContainSubstring(">"+template.HTMLEscapeString(timeline.ToneMeanings[tone])+"<"), "what the %s colour means", tone)
		}
		Expect(svg).NotTo(ContainSubstring(timeline.ToneMeanings["hold"]), "the legend names only the colours the timeline uses")
		Expect(svg).To(ContainSubstring("wall-clock time since the run started"))
	})

	It("stacks the bars that overlap in time, a reflection's replays run side by side, each with its label on it", func() {
		var marks []timeline.Mark
		for i := range 3 {
			marks = append(marks, timeline.Mark{Lane: "reflection", At: int64(1000 + 10*i), End: int64(4000 - 100*i), Label: fmt.Sprintf("r1 replay %d/3: fail", i+1), Tone: "bad", Short: fmt.Sprintf("r1 replay %d/3", i+1)})
		}
		marks = append(marks, timeline.Mark{Lane: "reflection", At: 4500, End: 6000, Label: "r1 verification: pass", Tone: "ok", Short: "r1 verification"})
		svg := string(timeline.SVG(marks))
		bars := regexp.MustCompile(`<rect x="[\d.]+" y="(\d+)" width="[\d.]+" height="(\d+)" fill="#[0-9a-f]+" opacity="0.55"><title>`).FindAllStringSubmatch(svg, -1)
		Expect(bars).To(HaveLen(4))
		ys := map[string]bool{}
		for _, b := range bars[:3] {
			ys[b[1]] = true
		}
		Expect(ys).To(HaveLen(3), "the three replays overlap in time: each on a line of its own")
		Expect(bars[3][1]).To(Equal(bars[0][1]), "the verification, after them, takes the first line again")
		for _, label := range []string{"r1 replay 1/3", "r1 replay 2/3", "r1 replay 3/3", "r1 verification"} {
			Expect(svg).To(MatchRegexp(`<text [^>]*>`+regexp.QuoteMeta(label)+`</text>`), label)
		}
	})

	It("draws only the lanes that have something: no reflection or gate rows for a run without either", func() {
		var html bytes.Buffer
		Expect(report.RunHTML(&html, liveFixture(), report.RunOptions{})).To(Succeed())
		var lanes []string
		for _, m := range laneNames.FindAllStringSubmatch(svgOf(html.String()), -1) {
			lanes = append(lanes, m[1])
		}
		Expect(lanes).To(Equal([]string{"attempts", "steps"}))
	})
})

var _ = Describe("a suite's HTML report", func() {
	It("is pinned, self-contained, and links the runs that did not pass to their reports", func() {
		var html bytes.Buffer
		Expect(report.SuiteHTML(&html, fixture(), report.SuiteOptions{RunLink: func(id string) string { return "runs/" + id + ".html" }})).To(Succeed())
		golden("suite.html", html.Bytes())
		page := html.String()
		Expect(page).NotTo(MatchRegexp(`(?i)(src|href)\s*=\s*["']?\s*(https?:)?//`))
		Expect(regexp.MustCompile(`<a href="runs/[^"]+\.html">`).FindAllString(page, -1)).To(HaveLen(3), "a link for every run that did not pass and has a run id")
		Expect(page).To(ContainSubstring("pass^2"))
		Expect(page).To(ContainSubstring("pass@3"))
		Expect(page).To(ContainSubstring("overnight run deploy --seed 1 --agent naive --fault kill@step:3"))
	})
})
