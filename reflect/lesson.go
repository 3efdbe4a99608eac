package reflect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/llm"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// LessonPrompt opens the request a reflection sends the run's model for a
// lesson; a scripted model's rule can match on it (prompt_contains).
const LessonPrompt = "Write the lesson."

// diagnose diagnoses the failure deterministically, from the journal, both
// ledgers, the replays and the counterfactual; a failure that never came
// back is given up on.
func (rf *reflector) diagnose(r *history.ReflectionRecord) error {
	run, err := rf.h.History().Load(rf.ctx, rf.rec.ID)
	if err != nil {
		return err
	}
	reproduced := false
	for _, rp := range r.Replays {
		reproduced = reproduced || rp.Reproduced
	}
	cf := r.Counterfactual
	if !reproduced {
		cf = nil // it tells nothing about a failure that did not come back
	}
	var tail string
	if r.Trigger.Kind == harness.FailureCrashLoop {
		tail = rf.lastOutput(r.Trigger.Attempt)
	}
	d := diagnose(r.Trigger, run, r.Replays, cf, tail)
	r.Diagnosis = &d
	switch {
	case d.Class == ClassGateDenied:
		rf.decide(r, history.DecisionGaveUp, d.Detail+": the gate's own decision, not the world's or the infrastructure's — "+
			"no lesson can be verified past it (isolated runs have no gate)")
	case !reproduced && r.ReplaysSkipped == "":
		rf.decide(r, history.DecisionGaveUp, "not reproduced: the failure did not come back in "+history.Count(len(r.Replays), "isolated replay"))
	}
	return nil
}

// journalShows says why the replays may be skipped ("" : they run): a
// failure that rests on a denial by the gate (an isolated re-run has no
// gate, so it cannot show one); or, when the failing attempt holds
// remembered lessons to verify first, a world event (an API version
// change, a dependency update) in the world's ledger before the refusal.
// Never for a class the replays decide.
func (rf *reflector) journalShows(r *history.ReflectionRecord, remembered bool) (string, error) {
	run, err := rf.h.History().Load(rf.ctx, rf.rec.ID)
	if err != nil {
		return "", err
	}
	return skipReplays(diagnose(r.Trigger, run, nil, nil, ""), r.Trigger.Attempt, remembered), nil
}

// skipReplays decides from the diagnosis the journal alone gives (no
// replays) whether the replays may be skipped, and says why ("": they
// run).
func skipReplays(d history.Diagnosis, attempt int, remembered bool) string {
	switch {
	case d.Class == ClassGateDenied:
		return "the journal shows the gate denied the attempt's effect, which an isolated re-run (no gate) cannot reproduce"
	case (d.Class == ClassAPIContract || d.Class == ClassWorldChange) && remembered:
		return fmt.Sprintf("attempt %d holds remembered lessons to verify first, and the journal alone shows the diagnosis: %s", attempt, d.Detail)
	}
	return ""
}

// tryRemembered verifies, newest first, the remembered lessons the failing
// attempt was handed that answer the diagnosis, against this run's world;
// the first that passes becomes the reflection's lesson. It reports
// whether one did.
func (rf *reflector) tryRemembered(r *history.ReflectionRecord, remembered []history.LessonRecord) (bool, error) {
	if r.Decided() || r.Diagnosis == nil {
		return false, nil
	}
	r.Remembered = nil // a resumed reflection tries them again
	for _, m := range remembered {
		if m.Class != r.Diagnosis.Class {
			continue // about another failure
		}
		rf.h.Progressf("reflection %s: verifying remembered lesson %s (drawn in run %s) against this run's world", r.ID, m.ID, m.Run)
		v, err := Verify(rf.ctx, rf.h, rf.rec.ID, m.Lesson, r.ID+" verification of remembered lesson "+m.ID)
		if err != nil {
			return false, err
		}
		r.Remembered = append(r.Remembered, history.RememberedTry{Lesson: m.Lesson, Run: m.Run, Verification: v})
		if v.Verdict == history.VerdictPass {
			l := m.Lesson
			r.Lesson, r.Verification, r.FromMemory = &l, &v, true
			return true, nil
		}
	}
	return false, nil
}

// lastOutput is the last lines (at most 5, 600 bytes) of attempt n's
// stderr, else its stdout.
func (rf *reflector) lastOutput(n int) string {
	logs, err := rf.h.History().Logs(rf.rec.ID)
	if err != nil {
		return ""
	}
	for _, l := range logs {
		if l.Attempt != n {
			continue
		}
		out := strings.TrimSpace(l.Stderr)
		if out == "" {
			out = strings.TrimSpace(l.Stdout)
		}
		lines := strings.Split(out, "\n")
		out = strings.Join(lines[max(0, len(lines)-5):], " | ")
		if len(out) > 600 {
			out = "..." + out[len(out)-600:]
		}
		return out
	}
	return ""
}

// liveSpec is the run's live model spec ("" : the scenario's), never its
// replay.
func liveSpec(rec history.RunRecord) string {
	if strings.HasPrefix(rec.LLM, llm.ProviderReplay+":") {
		return ""
	}
	return rec.LLM
}

// lesson draws the lesson: its text written by the run's model when it has
// one (the scripted test double offline), else from the diagnosis; its
// evidence is the diagnosis's.
func (rf *reflector) lesson(r *history.ReflectionRecord) error {
	d := r.Diagnosis
	l := history.Lesson{ID: history.LessonID(rf.rec.ID, r.ID), Class: d.Class, Evidence: d.Evidence, By: "deterministic"}
	model, err := rf.h.Model(rf.scen, liveSpec(rf.rec))
	if err != nil {
		return err
	}
	if model != nil {
		text, totals, err := askLesson(rf.ctx, model, liveSpec(rf.rec), *d, r.Trigger)
		r.LLM = &totals
		switch {
		case err != nil:
			l.By = "deterministic (the model could not write it: " + err.Error() + ")"
		case text != "" && model.Provider() == llm.ProviderScripted:
			l.Text, l.By = text, "the scripted model (a deterministic test double driven by the scenario's rules, not a real model)"
		case text != "":
			l.Text, l.By = text, "model "+model.Provider()+":"+model.Name()
		}
	}
	if l.Text == "" {
		l.Text = deterministicLesson(*d)
	}
	r.Lesson = &l
	return nil
}

// askLesson asks the model for the lesson's text.
func askLesson(ctx context.Context, model llm.Model, spec string, d history.Diagnosis, t history.Trigger) (string, history.LLMTotals, error) {
	totals := history.LLMTotals{Provider: model.Provider(), Model: model.Name(), TestDouble: model.Provider() == llm.ProviderScripted}
	brief, _ := json.Marshal(map[string]any{"diagnosis": d.Class, "detail": d.Detail, "evidence": d.Evidence, "trigger": t.Kind, "step": t.Step})
	req := protocol.ChatRequest{Model: model.Name(), Messages: []protocol.ChatMessage{
		{Role: "system", Content: protocol.MessageContent{Text: "You review a failed attempt of an AI agent for a reflection loop. " +
			"From the diagnosis, write the lesson the agent must follow on its next attempt: one or two imperative sentences about what to do differently. Answer with the lesson only."}},
		{Role: "user", Content: protocol.MessageContent{Text: LessonPrompt + "\n" + string(brief)}},
	}}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	resp, err := model.Complete(cctx, req)
	if err != nil {
		code := "error"
		if pe := (*llm.ProviderError)(nil); errors.As(err, &pe) {
			code = pe.Code
		}
		totals.Count(0, code)
		return "", totals, err
	}
	totals.Count(200, "")
	if resp.Usage != nil {
		totals.PromptTokens, totals.CompletionTokens = resp.Usage.PromptTokens, resp.Usage.CompletionTokens
		if s, err := llm.ParseSpec(specOr(spec, model)); err == nil {
			totals.CostUSD = llm.Cost(*resp.Usage, llm.DefaultPrices(s))
		}
	}
	if len(resp.Choices) == 0 {
		return "", totals, fmt.Errorf("the model answered no choice")
	}
	return strings.TrimSpace(resp.Choices[0].Message.Content.Text), totals, nil
}

func specOr(spec string, m llm.Model) string {
	if spec != "" {
		return spec
	}
	if m.Provider() == llm.ProviderScripted {
		return llm.ProviderScripted
	}
	return m.Provider() + ":" + m.Name()
}

// verify tries the lesson where the next attempt will stand.
func (rf *reflector) verify(r *history.ReflectionRecord, sb *harness.IsolatedStandby) error {
	v, err := verify(rf.ctx, rf.h, rf.rec.ID, *r.Lesson, r.ID+" verification", sb)
	if err != nil {
		return err
	}
	r.Verification = &v
	return nil
}

// Verify tries a lesson where run runID's next attempt will stand: its
// agent, from the run's latest durable checkpoint, in a fresh isolated
// sandbox against a shadow copy of the real world as it is now, handed the
// lesson and answered by the run's live model. It passes only if the
// scenario's invariants hold in the shadow world at the end. The result is
// bound to the real world's state it copied (WorldHash).
func Verify(ctx context.Context, h *harness.Harness, runID string, lesson history.Lesson, purpose string) (history.Verification, error) {
	return verify(ctx, h, runID, lesson, purpose, nil)
}

// verify is Verify in the isolated run reserved ahead as sb (nil: a new
// one).
func verify(ctx context.Context, h *harness.Harness, runID string, lesson history.Lesson, purpose string, sb *harness.IsolatedStandby) (history.Verification, error) {
	rd := h.History()
	rec, err := rd.Run(runID)
	if err != nil {
		return history.Verification{}, err
	}
	scen, err := rd.Scenario(rec)
	if err != nil {
		return history.Verification{}, err
	}
	cp, err := rd.LastCheckpoint(runID)
	if err != nil {
		return history.Verification{}, err
	}
	snap, seq, err := worldNow(ctx, h, rec, scen)
	if err != nil {
		return history.Verification{}, err
	}
	started := time.Now()
	res, err := h.Isolated(ctx, harness.IsolatedRequest{Parent: runID, FromCheckpoint: cp.Seq, WorldSeq: &seq, Faults: nil,
		LLM: liveSpec(rec), Lessons: []protocol.Lesson{lesson.Protocol()}, Purpose: purpose, Standby: sb})
	if err != nil {
		return history.Verification{}, fmt.Errorf("%s: %w", purpose, err)
	}
	return history.Verification{RunID: res.RunID, Verdict: res.Verdict, Reason: res.Reason, Invariants: res.Invariants,
		WorldHash: worldHash(snap), WorldSeq: seq, WallMS: time.Since(started).Milliseconds()}, nil
}

// remember keeps a decided reflection's lesson in memory for the scenario
// and agent: a verified lesson is added; the lessons the failing attempt
// was handed are charged with its failure, and one that keeps failing is
// retired.
func (rf *reflector) remember(r *history.ReflectionRecord) error {
	if !r.Decided() {
		return nil
	}
	rd, w := rf.h.History(), rf.h.Writer()
	mem, err := rd.Lessons(rf.scen.Name, rf.rec.Agent)
	if err != nil {
		return err
	}
	var entries []history.Entry
	handed := map[string]bool{}
	if run, err := rd.Attempts(rf.rec.ID); err == nil && r.Trigger.Attempt >= 1 && r.Trigger.Attempt <= len(run) {
		for _, l := range run[r.Trigger.Attempt-1].Lessons {
			handed[l.ID] = true
		}
	}
	tried := map[string]string{} // remembered lesson -> its verification's verdict
	for _, t := range r.Remembered {
		tried[t.Lesson.ID] = t.Verification.Verdict
	}
	if r.FromMemory && r.Verification != nil {
		tried[r.Lesson.ID] = r.Verification.Verdict // redone on a changed world
	}
	for _, m := range mem {
		if !handed[m.ID] || m.Run == rf.rec.ID && m.Reflection == r.ID {
			continue
		}
		verdict, ok := tried[m.ID]
		switch {
		case ok:
		case r.FromMemory:
			continue // a remembered lesson met the failure: the others are not charged with it
		default:
			verdict = history.VerdictFail // charged with the attempt's failure
		}
		m.Verifications = outcome(m.Verifications, history.LessonOutcome{Run: rf.rec.ID, Reflection: r.ID, Verdict: verdict})
		m.Retired = keepsFailing(m.Verifications)
		entries = append(entries, history.LessonEntry(m))
	}
	if r.Decision == history.DecisionVerify && r.Lesson != nil && !r.FromMemory {
		entries = append(entries, history.LessonEntry(history.LessonRecord{Lesson: *r.Lesson, Scenario: rf.scen.Name, Agent: rf.rec.Agent,
			Run: rf.rec.ID, Reflection: r.ID, CreatedAt: time.Now().UTC(),
			Verifications: []history.LessonOutcome{{Run: rf.rec.ID, Reflection: r.ID, Verdict: r.Verification.Verdict}}}))
	}
	if len(entries) == 0 {
		return nil
	}
	return w.Put(context.WithoutCancel(rf.ctx), entries...)
}

// outcome records o in outcomes, in place of an earlier one of the same
// run and reflection (a verification redone).
func outcome(outcomes []history.LessonOutcome, o history.LessonOutcome) []history.LessonOutcome {
	for i, x := range outcomes {
		if x.Run == o.Run && x.Reflection == o.Reflection {
			outcomes[i] = o
			return outcomes
		}
	}
	return append(outcomes, o)
}

// keepsFailing: at least two failures, and more failures than passes.
func keepsFailing(outcomes []history.LessonOutcome) bool {
	fails, passes := 0, 0
	for _, o := range outcomes {
		if o.Verdict == history.VerdictPass {
			passes++
		} else {
			fails++
		}
	}
	return fails >= 2 && fails > passes
}

// rememberedLessons are the newest keep lessons in memory for a scenario
// and agent that are not retired.
func rememberedLessons(h *harness.Harness, scenario, agent string, keep int) ([]history.LessonRecord, error) {
	all, err := h.History().Lessons(scenario, agent)
	if err != nil {
		return nil, err
	}
	var live []history.LessonRecord
	for _, l := range all {
		if !l.Retired {
			live = append(live, l)
		}
	}
	sort.SliceStable(live, func(i, j int) bool { return live[i].CreatedAt.After(live[j].CreatedAt) })
	if len(live) > keep {
		live = live[:keep]
	}
	return live, nil
}
