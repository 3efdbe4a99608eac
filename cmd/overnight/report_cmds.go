package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	reports "github.com/overnight-dev/overnight/harness/report"
)

// reportCmd writes one run's report.
func reportCmd(g *globals) *cobra.Command {
	var format string
	var file bool
	cmd := &cobra.Command{
		Use:   "report RUN",
		Short: "Write a run's report to stdout: self-contained HTML with an SVG timeline, Markdown, or its result as JSON",
		Long: `Write a run's report to stdout: its verdict and reason, invariants, faults
(applied, met), effects, attempts and how each ended, LLM totals, its
reflections and the gate's decisions when it has any, and (in HTML) an SVG
timeline of its attempts and restarts, steps, effects, faults, reflections
and gate decisions. The HTML page is self-contained: inline CSS and SVG, no
script, nothing fetched — it opens offline and can be kept as a CI artifact.
--format json prints the run's result exactly as run --output json does (a
run that has not ended has none: exit 3).

--file prints the agent's own report file instead (the scenario's report:,
copied out of its sandbox when it reported done), as the agent wrote it;
a run without one — no report: in its scenario, no claim yet, a file the
agent never wrote — says why on stderr and exits 3.

It reads the state dir while another process owns it (through its control
socket), so a live run can be reported as it stands.`,
		Example: `  overnight report 20261201-120000-abcdef --format html > run.html
  overnight report 20261201-120000-abcdef --format md >> "$GITHUB_STEP_SUMMARY"
  overnight report 20261201-120000-abcdef --file > report.md`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var write func(f *history.Full) error
			switch {
			case file:
				write = func(f *history.Full) error { return writeAgentReport(g, f) }
			case format == "html":
				write = func(f *history.Full) error { return reports.RunHTML(g.stdout, f, reports.RunOptions{}) }
			case format == "md":
				write = func(f *history.Full) error { return reports.RunMarkdown(g.stdout, f) }
			case format == "json":
				write = func(f *history.Full) error { return reports.RunJSON(g.stdout, f) }
			default:
				return usagef("--format %q: want html, md or json", format)
			}
			full, err := g.full(cmd.Context(), args[0])
			if err != nil {
				return &codeError{exitError, err}
			}
			if err := write(full); err != nil {
				return &codeError{exitError, err}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "html", "html (self-contained, with an SVG timeline), md or json (the run's result)")
	cmd.Flags().BoolVar(&file, "file", false, "print the agent's own report file (the scenario's report:) as it wrote it, instead")
	return cmd
}

// writeAgentReport prints the agent's report file of a run, or says why
// there is none.
func writeAgentReport(g *globals, f *history.Full) error {
	rec := f.Run.Record
	r := f.Report
	switch {
	case r == nil && f.Run.Done == nil:
		return fmt.Errorf("run %s (status %s) has no report file: its agent has not reported done", rec.ID, rec.Status)
	case r == nil:
		return fmt.Errorf("run %s has no report file: its scenario names none (report: {path: /workspace/report.md}, docs/scenarios.md)", rec.ID)
	case r.Status != history.ReportKept:
		return fmt.Errorf("run %s: the agent's report %s", rec.ID, r.Describe())
	}
	_, err := io.WriteString(g.stdout, r.Content)
	return err
}

// full reads a run's history for its report, whoever owns the state dir
// (through a View: it never blocks a run that starts meanwhile).
func (g *globals) full(ctx context.Context, runID string) (*history.Full, error) {
	v, err := harness.OpenView(harness.ViewOptions{StateDir: g.state, Logger: g.logger()})
	if err != nil {
		return nil, err
	}
	return v.Full(ctx, runID)
}
