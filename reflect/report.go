package reflect

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/timeline"
	"github.com/overnight-dev/overnight/harness/writeup"
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
	Timeline    []timeline.Mark            `json:"timeline"`
}

// Load builds the report of run runID from its history.
func Load(ctx context.Context, h *harness.Harness, runID string) (*Report, error) {
	full, err := h.History().Full(ctx, runID)
	if err != nil {
		return nil, err
	}
	return FromHistory(full), nil
}

// FromHistory builds the report of a run from its history.
func FromHistory(full *history.Full) *Report {
	rec := full.Run.Record
	rep := &Report{RunID: rec.ID, Scenario: rec.Scenario, Agent: rec.Agent, Verdict: rec.Verdict, Reason: rec.Reason,
		Reflections: full.Reflections, Gate: full.Gate, Timeline: timeline.Marks(full)}
	if rep.Reflections == nil {
		rep.Reflections = []history.ReflectionRecord{}
	}
	if rep.Gate == nil {
		rep.Gate = []history.GateRecord{}
	}
	if rep.Verdict == "" {
		rep.Verdict = "(not finished)"
	}
	return rep
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
	b.WriteString(writeup.ReflectionsMarkdown(rep.Reflections, rep.Gate))
	_, err := io.WriteString(w, b.String())
	return err
}
