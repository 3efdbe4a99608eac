package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	reports "github.com/overnight-dev/overnight/harness/report"
)

// reportCmd writes one run's report.
func reportCmd(g *globals) *cobra.Command {
	var format string
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

It reads the state dir while another process owns it (through its control
socket), so a live run can be reported as it stands.`,
		Example: `  overnight report 20261201-120000-abcdef --format html > run.html
  overnight report 20261201-120000-abcdef --format md >> "$GITHUB_STEP_SUMMARY"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var write func(f *history.Full) error
			switch format {
			case "html":
				write = func(f *history.Full) error { return reports.RunHTML(g.stdout, f, reports.RunOptions{}) }
			case "md":
				write = func(f *history.Full) error { return reports.RunMarkdown(g.stdout, f) }
			case "json":
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
	return cmd
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
