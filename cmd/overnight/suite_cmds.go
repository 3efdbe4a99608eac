package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/overnight-dev/overnight/harness/history"
	reports "github.com/overnight-dev/overnight/harness/report"
	"github.com/overnight-dev/overnight/harness/suite"
	"github.com/overnight-dev/overnight/reflect"
	"github.com/overnight-dev/overnight/scenarios"
)

// suiteOutputs are where a suite's result goes: files for CI, and the
// requirement it is judged by.
type suiteOutputs struct {
	require              []string
	json, junit, md      string
	html                 string
	output               string
	requirement          *suite.Requirement
	stdoutTaken, jsonOut bool
}

func (o *suiteOutputs) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&o.require, "require", nil, "the CI gate: a requirement over the result, e.g. 'pass^3>=0.9 && unknown==0' (metrics pass^K, pass@K, runs, passes, fails, unknown; repeatable, all must hold); exit 1 when it fails, 2 when it cannot be judged. Without it: exit 1 if any run failed, 2 if any was unknown")
	f.StringVar(&o.json, "json", "", "write the result as JSON to this file (- for stdout)")
	f.StringVar(&o.junit, "junit", "", "write the result as JUnit XML to this file (- for stdout)")
	f.StringVar(&o.md, "md", "", "write a Markdown summary to this file (- for stdout), e.g. $GITHUB_STEP_SUMMARY")
	f.StringVar(&o.html, "html", "", "write a self-contained HTML report to this file (- for stdout); a suite (not a merge) also writes the report of each run that did not pass into FILE's name without .html plus -runs/, linked from it")
	outputFlag(cmd, &o.output)
}

// check parses the requirement and makes sure at most one thing writes to
// stdout.
func (o *suiteOutputs) check() error {
	q, err := suite.Requirements(o.require)
	if err != nil {
		return usagef("--require: %w", err)
	}
	o.requirement = q
	n := 0
	for _, f := range []string{o.json, o.junit, o.md, o.html} {
		if f == "-" {
			n++
		}
	}
	if o.output == "json" {
		n++
	}
	if n > 1 {
		return usagef("--json -, --junit -, --md -, --html - and --output json all write to stdout: choose one")
	}
	o.stdoutTaken = n > 0
	o.jsonOut = o.output == "json"
	return nil
}

// write judges res and writes it everywhere asked; it returns the exit
// code's error. runs, when the suite's runs are at hand (not for a merge),
// reads a run's history for the run reports beside the HTML report.
func (o *suiteOutputs) write(g *globals, res *suite.Result, runs func(runID string) (*history.Full, error)) error {
	if o.requirement != nil {
		j := o.requirement.Judge(res)
		res.Requirement = &j
	}
	var errs []error
	if o.html != "" {
		opts := reports.SuiteOptions{}
		if runs != nil && o.html != "-" {
			links, err := writeRunReports(o.html, res, runs)
			errs = append(errs, err)
			opts.RunLink = func(id string) string { return links[id] }
		}
		errs = append(errs, writeTo(g, o.html, func(w io.Writer) error { return reports.SuiteHTML(w, res, opts) }))
	}
	for _, out := range []struct {
		path  string
		write func(io.Writer, *suite.Result) error
	}{{o.json, reports.JSON}, {o.junit, reports.JUnit}, {o.md, reports.Markdown}} {
		if out.path != "" {
			errs = append(errs, writeTo(g, out.path, func(w io.Writer) error { return out.write(w, res) }))
		}
	}
	switch {
	case o.jsonOut:
		errs = append(errs, reports.JSON(g.stdout, res))
	case !o.stdoutTaken:
		errs = append(errs, suiteText(g.stdout, res))
	}
	if err := errors.Join(errs...); err != nil {
		return &codeError{exitError, err}
	}
	if res.Suite.Interrupted {
		return &codeError{exitError, errors.New("the suite was interrupted before every run ended: the runs it stopped are resumable (overnight runs), and the result above covers the runs that ended")}
	}
	if code := suiteCode(res); code != exitPass {
		return &codeError{code: code}
	}
	return nil
}

// suiteCode is a judged suite's exit code: by its requirement when it has
// one, else 1 when a run failed and 2 when one was unknown.
func suiteCode(res *suite.Result) int {
	if q := res.Requirement; q != nil {
		switch q.Outcome {
		case suite.Met:
			return exitPass
		case suite.Failed:
			return exitFail
		default:
			return exitUnknown
		}
	}
	switch s := res.Summary; {
	case s.Fails > 0:
		return exitFail
	case s.Runs == 0 && res.Suite.Shard != nil:
		return exitPass // a shard the hash gave no case: nothing failed
	case s.Unknown > 0 || s.Runs == 0:
		return exitUnknown
	}
	return exitPass
}

// writeRunReports writes the HTML report of each run of res that did not
// pass into a directory beside the suite's HTML report (report.html:
// report-runs/), and returns each one's link relative to that report.
func writeRunReports(suiteHTML string, res *suite.Result, runs func(runID string) (*history.Full, error)) (map[string]string, error) {
	name := strings.TrimSuffix(filepath.Base(suiteHTML), ".html") + "-runs"
	dir := filepath.Join(filepath.Dir(suiteHTML), name)
	links := map[string]string{}
	var errs []error
	for _, r := range res.Failed() {
		if r.RunID == "" {
			continue
		}
		if len(links) == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return links, fmt.Errorf("run reports beside %s: %w", suiteHTML, err)
			}
		}
		full, err := runs(r.RunID)
		if err == nil {
			err = writeFile(filepath.Join(dir, r.RunID+".html"), func(w io.Writer) error { return reports.RunHTML(w, full, reports.RunOptions{}) })
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("report of run %s: %w", r.RunID, err))
			continue
		}
		links[r.RunID] = name + "/" + r.RunID + ".html"
	}
	return links, errors.Join(errs...)
}

func writeTo(g *globals, path string, write func(io.Writer) error) error {
	if path == "-" {
		return write(g.stdout)
	}
	return writeFile(path, write)
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// suiteText is the result for a person on a terminal.
func suiteText(w io.Writer, res *suite.Result) error {
	var b strings.Builder
	s := res.Summary
	fmt.Fprintf(&b, "suite %s: %d runs in %d groups: %d pass, %d fail, %d unknown (%.1fs)\n", res.Suite.ID, s.Runs, s.Groups, s.Passes, s.Fails, s.Unknown, float64(res.Suite.WallMS)/1000)
	for _, g := range res.Groups {
		fmt.Fprintf(&b, "  %-30s n=%-3d pass=%-3d fail=%-3d unknown=%-3d", g.Scenario+"/"+g.Agent, g.N, g.Passes, g.Fails, g.Unknown)
		for k, v := range g.PassK {
			if k == 5 {
				break
			}
			fmt.Fprintf(&b, " pass^%d=%.3f", k+1, v)
		}
		b.WriteString("\n")
	}
	if len(s.PassK) > 0 {
		b.WriteString("  suite:")
		for k, v := range s.PassK {
			if k == 5 {
				break
			}
			fmt.Fprintf(&b, " pass^%d=%.3f", k+1, v)
		}
		b.WriteString("\n")
	}
	for _, r := range res.Failed() {
		fmt.Fprintf(&b, "%s %s/%s seed %d: %s\n    %s\n", r.Verdict, r.Scenario, r.Agent, r.Seed, r.Reason, r.Reproduce)
	}
	if q := res.Requirement; q != nil {
		fmt.Fprintf(&b, "requirement %s: %s: %s\n", q.Expression, q.Outcome, q.Detail)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func suiteCmd(g *globals) *cobra.Command {
	var (
		seeds, agents, shard string
		parallel             int
		noCorpus             bool
		rf                   runFlags
		out                  suiteOutputs
	)
	cmd := &cobra.Command{
		Use:   "suite SCENARIO|FILE|DIR...",
		Short: "Run scenarios × agents × seeds and judge them as a CI gate (pass^k)",
		Long: `Run a suite: every scenario (a built-in name, a scenario file, or a
directory of them) × agent variant × seed, under a worker pool, with the run
flags applied to every run; group the runs by scenario and agent (the seeds
are the trials) and judge them by pass^k (tau-bench's estimator: the chance
that k trials all pass) against --require.

Exit codes: 0 the requirement holds (without --require: every run passed),
1 it fails (a run failed), 2 it cannot be judged (a run was unknown), 3 an
error or Ctrl-C (the runs stopped are resumable).

Runs of a suite do not share lessons (--lessons none) unless asked. Cases a
suite saw fail are kept in the state dir (the failing-seed corpus) and re-run
first by the next suite of the same run flags (--no-corpus: neither).`,
		Example: `  overnight suite deploy week --seeds 5 --require 'pass^3>=0.9'
  overnight suite ./scenarios/ --seeds 1-20 --agents all --chaos random --parallel 8 \
      --require 'pass^3>=0.9 && unknown==0' --junit out.xml --json out.json --md summary.md
  overnight suite deploy --seeds 40 --shard 2/4 --json part2.json
  overnight suite merge part*.json --require 'pass^3>=0.9' --junit out.xml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			texts, _, random, err := rf.schedule(cmd, 0)
			if err != nil {
				return err
			}
			if err := out.check(); err != nil {
				return err
			}
			seedList, err := suite.ParseSeeds(seeds)
			if err != nil {
				return usagef("%w", err)
			}
			var sh *suite.Shard
			if shard != "" {
				if sh, err = suite.ParseShard(shard); err != nil {
					return usagef("--shard: %w", err)
				}
			}
			if parallel < 0 || parallel > suite.MaxParallel {
				return usagef("--parallel %d: want 1..%d (0: %d, two per CPU)", parallel, suite.MaxParallel, suite.DefaultParallel())
			}
			var agentList []string
			for _, a := range strings.Split(agents, ",") {
				if a = strings.TrimSpace(a); a != "" {
					agentList = append(agentList, a)
				}
			}
			spec := suite.Spec{Scenarios: args, Agents: agentList, Seeds: seedList, Config: suite.Config{
				Faults: texts, RandomFaults: random, RandomKinds: rf.kinds, LLM: rf.llmSpec, World: rf.world, HTTPReplay: rf.httpReplay, MCPReplay: rf.mcpReplay, Timeout: rf.timeout, MaxAttempts: rf.maxAttempts,
				Extras: map[string]string{reflect.ExtraLessons: rf.lessons}}}
			backend, err := g.sandboxType()
			if err != nil {
				return err
			}
			plan, err := suite.Build(spec, func(arg string) (*scenarios.Scenario, error) { return loadScenario(arg, backend) })
			if err != nil {
				if errors.Is(err, suite.ErrPlan) {
					return usagef("%w", err)
				}
				return &codeError{exitError, err}
			}
			plan.Split(sh)

			ctx, stop := g.interruptible()
			defer stop()
			h, err := g.open(ctx, false)
			if err != nil {
				return &codeError{exitError, err}
			}
			defer h.Close()
			for _, s := range plan.Scenarios {
				// loadScenario has checked each against the harness already.
				if random > 0 {
					if err := h.CheckRandom(plan.Scenario(s.Name), rf.kinds); err != nil {
						return &codeError{exitError, err}
					}
				}
			}
			opts := suite.Options{Parallel: parallel, Corpus: !noCorpus, Command: suite.Command(g.state)}
			if !g.quiet {
				tty := isTerminal(g.stderr)
				opts.Progress = suite.NewProgress(g.stderr, tty, os.Getenv("NO_COLOR") == "", 0)
			}
			res, err := suite.Run(ctx, h, plan, opts)
			if err != nil && res == nil {
				return &codeError{exitError, err}
			}
			if err != nil {
				fmt.Fprintln(g.stderr, "overnight:", err)
			}
			return out.write(g, res, func(id string) (*history.Full, error) { return h.Full(ctx, id) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&seeds, "seeds", "5", "the seeds, each a trial of every scenario and agent: N for 1..N, or a list such as 1-5,9")
	f.StringVar(&agents, "agents", "", "agent variants, comma-separated: default (each scenario's own agent), a variant's name, or all (default: each scenario's own)")
	f.IntVar(&parallel, "parallel", 0, fmt.Sprintf("runs at once (default %d: two per CPU, at most 32)", suite.DefaultParallel()))
	f.StringVar(&shard, "shard", "", "run only share i of n (i/n), split by a stable hash of each case, for the jobs of a CI matrix; merge the shards' --json with `suite merge`")
	f.BoolVar(&noCorpus, "no-corpus", false, "neither re-run the cases earlier suites saw fail first, nor record this suite's")
	rf.register(f, reflect.LessonsNone, "lessons a scenario with reflection hands its agent: none (each run's own: trials stay independent) or memory (shared across the suite's runs)")
	out.register(cmd)
	cmd.AddCommand(suiteMergeCmd(g))
	return cmd
}

func suiteMergeCmd(g *globals) *cobra.Command {
	var out suiteOutputs
	cmd := &cobra.Command{
		Use:   "merge RESULT.json...",
		Short: "Merge the --json results of a suite's shards and judge them as one",
		Long: `Merge the JSON results of every shard of one suite (suite --shard i/n
--json FILE) and judge the whole by --require: the results must share their
plan (scenarios, agents, seeds, run flags), and every shard must be there
once. Exit codes as for suite.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			var parts []*suite.Result
			for _, path := range args {
				r, err := suite.ReadResult(path)
				if err != nil {
					return &codeError{exitError, err}
				}
				parts = append(parts, r)
			}
			res, err := suite.Merge(parts, args)
			if err != nil {
				return &codeError{exitError, err}
			}
			return out.write(g, res, nil)
		},
	}
	out.register(cmd)
	return cmd
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
