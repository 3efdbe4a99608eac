package reflect_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/timeline"
	"github.com/overnight-dev/overnight/reflect"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden files of the report formats")

// fixture is a report as a deploy-v2 run's would read, with fixed ids and
// times, for the golden files.
func fixture() *reflect.Report {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	refusal := &protocol.EffectError{Code: "unauthorized", Message: "cloud.deploy_service in API v2: api_key is required", Status: 401,
		Details: json.RawMessage(`{"field":"api_key","obtain":"cloud.issue_api_key"}`)}
	return &reflect.Report{
		RunID: "20261201-120000-abcdef", Scenario: "deploy-v2", Verdict: "pass", Reason: "the agent reported done; all 5 invariants hold",
		Reflections: []history.ReflectionRecord{{
			ID: "r1", N: 1, Stage: history.StageDecided,
			Trigger: history.Trigger{Kind: "effect_refused", Attempt: 1, Step: 3, Detail: "the world refused cloud.deploy_service (unauthorized)",
				Effect: &history.EffectRecord{ID: "k/step-4/0", Kind: "cloud.deploy_service", Error: refusal}, Joined: []string{"done_failure: step 4: refused"}},
			Checkpoint: 3, WorldSeq: 5,
			Replays: []history.ReplayRecord{
				{RunID: "20261201-120001-000001", Verdict: "fail", Reproduced: true, Detail: "cloud.deploy_service refused again (unauthorized)"},
				{RunID: "20261201-120001-000002", Verdict: "pass", Reproduced: true, Detail: "cloud.deploy_service refused again (unauthorized); the agent got past it"},
				{RunID: "20261201-120001-000003", Verdict: "fail", Reproduced: true, Detail: "cloud.deploy_service refused again (unauthorized) | a pipe"},
			},
			Diagnosis: &history.Diagnosis{Class: "api_contract_change", Detail: "the world's API changed to v2 (at +3d11h43m virtual) before cloud.deploy_service, which it refused: api_key is required (unauthorized)",
				Evidence: json.RawMessage(`{"api_version":"v2","error":{"code":"unauthorized"}}`)},
			Counterfactual: &history.ReplayRecord{RunID: "20261201-120002-000004", Verdict: "pass"},
			Lesson:         &history.Lesson{ID: "lesson-20261201-120000-abcdef-r1", Text: "Read each refusal's details <and> correct the request.", Class: "api_contract_change", By: "the scripted model"},
			Verification: &history.Verification{RunID: "20261201-120003-000005", Verdict: "pass", Reason: "the agent reported done; all 4 invariants hold",
				WorldHash: "0123", WorldSeq: 5},
			Decision: history.DecisionVerify, Reason: "lesson verified in isolation",
			LLM:      &history.LLMTotals{Provider: "scripted", Model: "scripted", TestDouble: true, Calls: 1, Answered: 1, PromptTokens: 288, CompletionTokens: 58},
			OpenedAt: at, DecidedAt: at.Add(4 * time.Second), Consumed: 2,
		}, {
			// A later run's reflection would read so: its attempt held the
			// lesson from memory, verified again here.
			ID: "r2", N: 2, Stage: history.StageDecided,
			Trigger:    history.Trigger{Kind: "effect_refused", Attempt: 2, Step: 3, Detail: "the world refused cloud.deploy_service (unauthorized)"},
			Checkpoint: 3, WorldSeq: 5,
			ReplaysSkipped: "attempt 2 holds remembered lessons to verify first, and the journal alone shows the diagnosis: the world's API changed to v2",
			Diagnosis:      &history.Diagnosis{Class: "api_contract_change", Detail: "the world's API changed to v2 before cloud.deploy_service, which it refused", Evidence: json.RawMessage(`{"api_version":"v2"}`)},
			Remembered: []history.RememberedTry{{Lesson: history.Lesson{ID: "lesson-20261130-090000-fedcba-r1", Class: "api_contract_change", Text: "Correct from the refusals."},
				Run: "20261130-090000-fedcba", Verification: history.Verification{RunID: "20261201-120004-000006", Verdict: "pass", Reason: "the agent reported done"}}},
			FromMemory:   true,
			Lesson:       &history.Lesson{ID: "lesson-20261130-090000-fedcba-r1", Class: "api_contract_change", Text: "Correct from the refusals.", By: "the scripted model"},
			Verification: &history.Verification{RunID: "20261201-120004-000006", Verdict: "pass", Reason: "the agent reported done", WorldHash: "0123", WorldSeq: 5},
			Decision:     history.DecisionVerify, Reason: "remembered lesson lesson-20261130-090000-fedcba-r1 verified in isolation against this run's world",
			OpenedAt: at.Add(10 * time.Second), DecidedAt: at.Add(11 * time.Second),
		}},
		Gate: []history.GateRecord{
			{Seq: 1, EffectID: "k/step-4/3", Key: "step-4/3", Kind: "cloud.deploy_service", Attempt: 2, Policy: "verify", Decision: "released",
				Reason: "released: reflection r1 verified lesson lesson-20261201-120000-abcdef-r1", Reflection: "r1", By: "gate", Since: at, At: at},
		},
		Timeline: []timeline.Mark{
			{Lane: "attempts", At: 0, End: 1800, Label: "attempt 1: exited", Tone: "ok", Short: "attempt 1"},
			{Lane: "faults", At: 900, Label: "api-version:v2@step:3", Tone: "bad", Short: "api-version:v2@step:3"},
			{Lane: "effects", At: 1000, Label: "step-4/0 cloud.deploy_service: failed", Tone: "bad"},
			{Lane: "reflection", At: 1100, End: 3500, Label: "r1 replay 1/3: fail", Tone: "bad", Short: "r1 replay 1/3"},
			{Lane: "reflection", At: 4900, Label: "r1 verified", Tone: "ok", Short: "r1 verified"},
			{Lane: "attempts", At: 5000, End: 6500, Label: "attempt 2: exited", Tone: "ok", Short: "attempt 2"},
			{Lane: "gate", At: 5600, Label: "step-4/3 cloud.deploy_service: released", Tone: "ok", Short: "released"},
			{Lane: "steps", At: 6400, Label: "step 5 (attempt 2)", Tone: "ok"},
		},
	}
}

func golden(name string, got []byte) {
	GinkgoHelper()
	path := filepath.Join("testdata", name)
	if *update {
		Expect(os.WriteFile(path, got, 0o644)).To(Succeed())
	}
	want, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred(), "no golden file: run go test ./reflect -run TestReflect -update")
	Expect(string(got)).To(Equal(string(want)), "the %s format changed: if on purpose, rewrite it with -update", name)
}

var _ = Describe("the reflection report", func() {
	It("is pinned in Markdown, JSON and self-contained HTML", func() {
		rep := fixture()
		var md, html bytes.Buffer
		Expect(rep.WriteMarkdown(&md)).To(Succeed())
		golden("report.md", md.Bytes())
		js, err := json.MarshalIndent(rep, "", "  ")
		Expect(err).NotTo(HaveOccurred())
		golden("report.json", append(js, '\n'))
		Expect(rep.WriteHTML(&html)).To(Succeed())
		golden("report.html", html.Bytes())
		Expect(html.String()).NotTo(MatchRegexp(`(src|href)="https?:`), "self-contained: no external assets")
		Expect(html.String()).To(ContainSubstring("&lt;and&gt;"), "text is escaped")
		Expect(html.String()).To(ContainSubstring("<svg"))
	})

	It("says who wrote the lesson in plain words", func() {
		for by, want := range map[string]string{
			"deterministic": "drawn from the diagnosis (no model)",
			"deterministic (the model could not write it: timeout)":                                             "drawn from the diagnosis (the model could not write it: timeout)",
			"the scripted model (a deterministic test double driven by the scenario's rules, not a real model)": "written by the scripted model (a test double, not a real model)",
			"model openai:gpt-4o-mini": "written by model openai:gpt-4o-mini",
		} {
			rep := fixture()
			rep.Reflections[0].Lesson.By = by
			var md, html bytes.Buffer
			Expect(rep.WriteMarkdown(&md)).To(Succeed())
			Expect(rep.WriteHTML(&html)).To(Succeed())
			Expect(md.String()).To(ContainSubstring("**Lesson** lesson-20261201-120000-abcdef-r1, "+want+":"), by)
			Expect(html.String()).To(ContainSubstring("<b>Lesson</b> lesson-20261201-120000-abcdef-r1, "+want+":"), by)
			Expect(md.String() + html.String()).NotTo(ContainSubstring("written by deterministic"))
		}
	})

	It("labels what each replay answers: whether the failure came back, and the replay's own verdict", func() {
		var md, html bytes.Buffer
		Expect(fixture().WriteMarkdown(&md)).To(Succeed())
		Expect(fixture().WriteHTML(&html)).To(Succeed())
		Expect(md.String()).To(ContainSubstring("| replay | isolated run | failure came back? | the replay's own verdict | detail |"))
		Expect(md.String()).To(ContainSubstring("| 2 | 20261201-120001-000002 | yes | pass |"), "the failure came back, and the replay passed on its own")
		Expect(html.String()).To(ContainSubstring(`<tr><td class="n">2</td><td>20261201-120001-000002</td><td class="fail">yes</td><td class="pass">pass</td>`))
		Expect(md.String()).To(ContainSubstring("The failure came back in 3 of 3 (deterministic)."))
		Expect(md.String()+html.String()).NotTo(MatchRegexp(`reproduced: (true|false)|\| (true|false) \|`), "no bare booleans")
	})
})
