package writeup

import (
	"fmt"
	"strings"

	"github.com/overnight-dev/overnight/harness/history"
)

// ReflectionsMarkdown writes a run's reflections and the gate's decisions
// as Markdown sections (## headings): the part of the reflection report
// that a run's own report carries too. For each reflection: its trigger,
// where the run stood, the replays in isolation, the first divergence, the
// diagnosis, the counterfactual, the remembered lessons tried, the lesson
// and who wrote it, the verification, the reflection's own model calls and
// the decision; then every decision of the gate.
func ReflectionsMarkdown(refls []history.ReflectionRecord, gate []history.GateRecord) string {
	var b strings.Builder
	if len(refls) == 0 {
		b.WriteString("The run opened no reflection.\n\n")
	}
	for _, r := range refls {
		writeReflectionMarkdown(&b, r)
	}
	b.WriteString("## The gate\n\n")
	if len(gate) == 0 {
		b.WriteString("No effect waited at the gate or was denied by it.\n")
	} else {
		b.WriteString("| effect | kind | policy | decision | by | reason |\n| --- | --- | --- | --- | --- | --- |\n")
		for _, g := range gate {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", cell(history.EffectLabel(g.EffectID)), cell(g.Kind), g.Policy, g.Decision, cell(g.By), cell(g.Reason))
		}
	}
	return b.String()
}

func writeReflectionMarkdown(b *strings.Builder, r history.ReflectionRecord) {
	fmt.Fprintf(b, "## Reflection %s: %s\n\n", r.ID, DecisionText(r))
	fmt.Fprintf(b, "**Trigger.** %s in attempt %d, after step %d: %s\n", r.Trigger.Kind, r.Trigger.Attempt, r.Trigger.Step, r.Trigger.Detail)
	for _, j := range r.Trigger.Joined {
		fmt.Fprintf(b, "(joined: %s)\n", j)
	}
	fmt.Fprintf(b, "\n**Where the run stood.** Last good checkpoint seq %d; the failing attempt started from checkpoint %d; the real world's ledger at entry %d.\n\n", r.Checkpoint, r.StartCheckpoint, r.WorldSeq)
	if len(r.Replays) > 0 {
		fmt.Fprintf(b, "**Replays in isolation.** %s %s\n\n", replaysSummary(r.Replays), replaysExplained)
		b.WriteString("| replay | isolated run | failure came back? | the replay's own verdict | detail |\n| --- | --- | --- | --- | --- |\n")
		for i, rp := range r.Replays {
			fmt.Fprintf(b, "| %d | %s | %s | %s | %s |\n", i+1, rp.RunID, yesNo(rp.Reproduced), orNone(rp.Verdict), cell(rp.Detail))
		}
		b.WriteString("\n")
	}
	if r.ReplaysSkipped != "" {
		fmt.Fprintf(b, "**No replays.** %s.\n\n", r.ReplaysSkipped)
	}
	if r.Divergence != "" {
		fmt.Fprintf(b, "**First divergence.** %s\n\n", r.Divergence)
	}
	if d := r.Diagnosis; d != nil {
		fmt.Fprintf(b, "**Diagnosis.** `%s`: %s\n\nEvidence: `%s`\n\n", d.Class, d.Detail, d.Evidence)
	}
	if c := r.Counterfactual; c != nil {
		fmt.Fprintf(b, "**Counterfactual** (the same re-run without the run's faults, run %s): %s (its own verdict: %s).\n\n", c.RunID, cameBack(c.Reproduced), orNone(c.Verdict))
	}
	if len(r.Remembered) > 0 {
		b.WriteString("**Remembered lessons** the failing attempt was handed, verified against this run's world before any new lesson was drawn:\n\n")
		b.WriteString("| lesson | drawn in run | verification run | verdict | reason |\n| --- | --- | --- | --- | --- |\n")
		for _, t := range r.Remembered {
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", t.Lesson.ID, t.Run, t.Verification.RunID, t.Verification.Verdict, cell(t.Verification.Reason))
		}
		b.WriteString("\n")
	}
	if l := r.Lesson; l != nil {
		from := ""
		if r.FromMemory {
			from = ", remembered from an earlier run"
		}
		fmt.Fprintf(b, "**Lesson** %s%s, %s:\n\n> %s\n\n", l.ID, from, lessonAuthor(l.By), l.Text)
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

// DecisionText is where a reflection stands, in a few words: "verified",
// "gave up", or "deciding (stage replayed)" while it runs.
func DecisionText(r history.ReflectionRecord) string {
	switch r.Decision {
	case history.DecisionVerify:
		return "verified"
	case history.DecisionGaveUp:
		return "gave up"
	}
	return "deciding (stage " + r.Stage + ")"
}

// replaysExplained says what a replay's two answers are.
const replaysExplained = "Each replay re-runs the failing attempt in isolation: from its checkpoint, on a copy of the world as it stood then, with the same faults. " +
	"\"Failure came back?\" is whether the failure that opened the reflection happened again; " +
	"the replay's own verdict is the isolated run judged as any run is (it can pass when the agent got past the failure within it)."

// replaysSummary says how often the failure came back in replays, and
// what that makes it: "The failure came back in 3 of 3 (deterministic)."
func replaysSummary(replays []history.ReplayRecord) string {
	back := 0
	for _, rp := range replays {
		if rp.Reproduced {
			back++
		}
	}
	word := "flaky"
	switch back {
	case len(replays):
		word = "deterministic"
	case 0:
		word = "not reproduced"
	}
	return fmt.Sprintf("The failure came back in %d of %d (%s).", back, len(replays), word)
}

// cameBack says whether a re-run brought the failure back.
func cameBack(reproduced bool) string {
	if reproduced {
		return "the failure came back"
	}
	return "the failure did not come back"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// orNone is s, or "(none)" when it is empty.
func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// lessonAuthor says who wrote a lesson, in plain words, from its By as
// the reflection recorded it: "drawn from the diagnosis (no model)",
// "written by the scripted model (a test double, not a real model)",
// "written by model openai:gpt-4o-mini".
func lessonAuthor(by string) string {
	switch {
	case by == "":
		return "its author not recorded"
	case by == "deterministic":
		return "drawn from the diagnosis (no model)"
	case strings.HasPrefix(by, "deterministic ("):
		// "deterministic (the model could not write it: ...)"
		return "drawn from the diagnosis " + strings.TrimPrefix(by, "deterministic ")
	case strings.HasPrefix(by, "the scripted model"):
		return "written by the scripted model (a test double, not a real model)"
	case strings.HasPrefix(by, "model "), strings.HasPrefix(by, "model:"):
		return "written by model " + by[len("model "):]
	}
	return "written by " + by
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
