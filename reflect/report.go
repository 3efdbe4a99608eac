package reflect

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
)

// Report is a run's reflections written up for a person deciding whether
// to trust the agent: what failed, whether it came back in isolation, why,
// the lesson, whether the lesson held where it was tried, and what the
// gate let through. Its JSON form is `overnight reflect RUN --format json`.
type Report struct {
	RunID       string                     `json:"run_id"`
	Scenario    string                     `json:"scenario"`
	Agent       string                     `json:"agent,omitempty"`
	Verdict     string                     `json:"verdict"`
	Reason      string                     `json:"reason"`
	Reflections []history.ReflectionRecord `json:"reflections"`
	Gate        []history.GateRecord       `json:"gate"`
	Timeline    []Mark                     `json:"timeline"`
}

// Load builds the report of run runID from its history.
func Load(ctx context.Context, h *harness.Harness, runID string) (*Report, error) {
	rd := h.History()
	run, err := rd.Load(ctx, runID)
	if err != nil {
		return nil, err
	}
	refls, err := rd.Reflections(runID)
	if err != nil {
		return nil, err
	}
	gate, err := rd.GateDecisions(runID)
	if err != nil {
		return nil, err
	}
	rep := &Report{RunID: runID, Scenario: run.Record.Scenario, Agent: run.Record.Agent, Verdict: run.Record.Verdict, Reason: run.Record.Reason,
		Reflections: refls, Gate: gate}
	if rep.Reflections == nil {
		rep.Reflections = []history.ReflectionRecord{}
	}
	if rep.Gate == nil {
		rep.Gate = []history.GateRecord{}
	}
	if rep.Verdict == "" {
		rep.Verdict = "(not finished)"
	}
	isolated := map[string]history.RunRecord{}
	for _, r := range refls {
		for _, id := range isolatedRuns(r) {
			if rec, err := rd.Run(id); err == nil {
				isolated[id] = rec
			}
		}
	}
	rep.Timeline = timeline(run, refls, gate, isolated)
	return rep, nil
}

// isolatedRuns lists the isolated re-runs a reflection made.
func isolatedRuns(r history.ReflectionRecord) []string {
	var ids []string
	for _, rp := range r.Replays {
		ids = append(ids, rp.RunID)
	}
	if r.Counterfactual != nil {
		ids = append(ids, r.Counterfactual.RunID)
	}
	if r.Verification != nil {
		ids = append(ids, r.Verification.RunID)
	}
	return ids
}

// Mark is one thing on the report's timeline.
type Mark struct {
	Lane  string `json:"lane"`  // attempts, steps, effects, faults, reflection, gate
	At    int64  `json:"at_ms"` // wall milliseconds since the run started
	End   int64  `json:"end_ms,omitempty"`
	Label string `json:"label"`
	Tone  string `json:"tone"` // ok, bad, hold, info
}

// timeline places the run's attempts, checkpoints, effects, faults, the
// reflections' isolated re-runs and the gate's decisions on one wall-clock
// axis.
func timeline(run *history.Run, refls []history.ReflectionRecord, gate []history.GateRecord, isolated map[string]history.RunRecord) []Mark {
	start := run.Record.StartedAt
	at := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return max(t.Sub(start).Milliseconds(), 0)
	}
	var marks []Mark
	for _, a := range run.Attempts {
		tone := "bad"
		if a.End == "exited" {
			tone = "ok"
		}
		end := a.EndedAt
		if end.IsZero() {
			end = a.StartedAt
		}
		marks = append(marks, Mark{Lane: "attempts", At: at(a.StartedAt), End: at(end), Label: fmt.Sprintf("attempt %d: %s", a.N, orNone(a.End)), Tone: tone})
	}
	for _, c := range run.Checkpoints {
		marks = append(marks, Mark{Lane: "steps", At: at(c.Wall), Label: fmt.Sprintf("step %d (attempt %d)", c.Step, c.Attempt), Tone: "ok"})
	}
	for _, e := range run.Effects {
		tone := "ok"
		if e.Status != "done" {
			tone = "bad"
		}
		marks = append(marks, Mark{Lane: "effects", At: at(e.Wall), Label: fmt.Sprintf("%s %s: %s", history.EffectLabel(e.ID), e.Kind, e.Status), Tone: tone})
	}
	for _, f := range run.Faults {
		if f.Applied {
			marks = append(marks, Mark{Lane: "faults", At: at(f.AppliedWall), Label: f.Spec, Tone: "bad"})
		}
	}
	for _, r := range refls {
		for _, id := range isolatedRuns(r) {
			rec, ok := isolated[id]
			if !ok {
				continue
			}
			tone := "info"
			if rec.Verdict == history.VerdictPass {
				tone = "ok"
			} else if rec.Verdict == history.VerdictFail {
				tone = "bad"
			}
			purpose := id
			if rec.Isolated != nil && rec.Isolated.Purpose != "" {
				purpose = rec.Isolated.Purpose
			}
			marks = append(marks, Mark{Lane: "reflection", At: at(rec.StartedAt), End: at(rec.EndedAt), Label: purpose + ": " + orNone(rec.Verdict), Tone: tone})
		}
		if r.Decided() {
			tone := "bad"
			if r.Decision == history.DecisionVerify {
				tone = "ok"
			}
			marks = append(marks, Mark{Lane: "reflection", At: at(r.DecidedAt), Label: r.ID + " " + r.Decision, Tone: tone})
		}
	}
	for _, g := range gate {
		tone := map[string]string{history.GateHeld: "hold", history.GateDenied: "bad"}[g.Decision]
		if tone == "" {
			tone = "ok"
		}
		marks = append(marks, Mark{Lane: "gate", At: at(g.At), Label: fmt.Sprintf("%s %s: %s", history.EffectLabel(g.EffectID), g.Kind, g.Decision), Tone: tone})
	}
	sort.SliceStable(marks, func(i, j int) bool { return marks[i].At < marks[j].At })
	return marks
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// WriteMarkdown writes the report as Markdown.
func (rep *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	agent := ""
	if rep.Agent != "" {
		agent = " (agent " + rep.Agent + ")"
	}
	fmt.Fprintf(&b, "# Reflections of run %s\n\n", rep.RunID)
	fmt.Fprintf(&b, "Scenario %s%s. Verdict: **%s** — %s\n\n", rep.Scenario, agent, rep.Verdict, rep.Reason)
	if len(rep.Reflections) == 0 {
		b.WriteString("The run opened no reflection.\n\n")
	}
	for _, r := range rep.Reflections {
		writeReflectionMarkdown(&b, r)
	}
	b.WriteString("## The gate\n\n")
	if len(rep.Gate) == 0 {
		b.WriteString("No effect waited at the gate or was denied by it.\n")
	} else {
		b.WriteString("| effect | kind | policy | decision | by | reason |\n| --- | --- | --- | --- | --- | --- |\n")
		for _, g := range rep.Gate {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", cell(history.EffectLabel(g.EffectID)), cell(g.Kind), g.Policy, g.Decision, cell(g.By), cell(g.Reason))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeReflectionMarkdown(b *strings.Builder, r history.ReflectionRecord) {
	fmt.Fprintf(b, "## Reflection %s: %s\n\n", r.ID, decisionText(r))
	fmt.Fprintf(b, "**Trigger.** %s in attempt %d, after step %d: %s\n", r.Trigger.Kind, r.Trigger.Attempt, r.Trigger.Step, r.Trigger.Detail)
	for _, j := range r.Trigger.Joined {
		fmt.Fprintf(b, "(joined: %s)\n", j)
	}
	fmt.Fprintf(b, "\n**Where the run stood.** Last good checkpoint seq %d; the failing attempt started from checkpoint %d; the real world's ledger at entry %d.\n\n", r.Checkpoint, r.StartCheckpoint, r.WorldSeq)
	if len(r.Replays) > 0 {
		failed := 0
		for _, rp := range r.Replays {
			if rp.Reproduced {
				failed++
			}
		}
		fmt.Fprintf(b, "**Replays in isolation.** %d of %d reproduced the failure (%s).\n\n", failed, len(r.Replays), reproducedWord(failed, len(r.Replays)))
		b.WriteString("| replay | run | verdict | reproduced | detail |\n| --- | --- | --- | --- | --- |\n")
		for i, rp := range r.Replays {
			fmt.Fprintf(b, "| %d | %s | %s | %v | %s |\n", i+1, rp.RunID, rp.Verdict, rp.Reproduced, cell(rp.Detail))
		}
		b.WriteString("\n")
	}
	if r.Divergence != "" {
		fmt.Fprintf(b, "**First divergence.** %s\n\n", r.Divergence)
	}
	if d := r.Diagnosis; d != nil {
		fmt.Fprintf(b, "**Diagnosis.** `%s`: %s\n\nEvidence: `%s`\n\n", d.Class, d.Detail, d.Evidence)
	}
	if c := r.Counterfactual; c != nil {
		fmt.Fprintf(b, "**Counterfactual** (the same re-run without the run's faults, run %s): %s; the failure %s.\n\n", c.RunID, c.Verdict, map[bool]string{true: "came back", false: "did not come back"}[c.Reproduced])
	}
	if l := r.Lesson; l != nil {
		fmt.Fprintf(b, "**Lesson** %s (written by %s):\n\n> %s\n\n", l.ID, l.By, l.Text)
	}
	if v := r.Verification; v != nil {
		stale := ""
		if v.Stale {
			stale = fmt.Sprintf(" It went stale (the real world changed) and was redone %d time(s).", v.Redone)
		}
		fmt.Fprintf(b, "**Verification** in isolation (run %s, from the latest checkpoint, on the real world's state at ledger entry %d): %s — %s.%s\n\n", v.RunID, v.WorldSeq, v.Verdict, v.Reason, stale)
	}
	if l := r.LLM; l != nil {
		fmt.Fprintf(b, "The reflection's own model calls: %d (%s:%s), %d prompt + %d completion tokens, apart from the agent's budget.\n\n", l.Calls, l.Provider, l.Model, l.PromptTokens, l.CompletionTokens)
	}
	fmt.Fprintf(b, "**Decision.** %s: %s\n\n", orNone(r.Decision), r.Reason)
}

func decisionText(r history.ReflectionRecord) string {
	switch r.Decision {
	case history.DecisionVerify:
		return "verified"
	case history.DecisionGaveUp:
		return "gave up"
	}
	return "deciding (stage " + r.Stage + ")"
}

func reproducedWord(failed, runs int) string {
	switch {
	case failed == runs:
		return "deterministic"
	case failed == 0:
		return "not reproduced"
	}
	return "flaky"
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
