package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/cmd/internal/sandboxcmd"
	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/reflect"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/agents"
	"github.com/overnight-dev/overnight/scenarios/builtin"
)

// Exit codes.
const (
	exitPass    = 0
	exitFail    = 1
	exitUnknown = 2
	exitError   = 3
)

// exitError carries an exit code out of a command.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string { return e.err.Error() }
func (e *codeError) Unwrap() error { return e.err }

// verdictCode maps a verdict to its exit code.
func verdictCode(v string) int {
	switch v {
	case harness.VerdictPass:
		return exitPass
	case harness.VerdictFail:
		return exitFail
	default:
		return exitUnknown
	}
}

type globals struct {
	state      string
	initBinary string
	backend    string
	verbose    bool
	quiet      bool
	logFormat  string
	stdout     io.Writer
	stderr     io.Writer
	tracing    *tracing
}

func (g *globals) logger() *slog.Logger {
	level := slog.LevelWarn
	if g.verbose {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	if g.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(g.stderr, opts))
	}
	return slog.New(slog.NewTextHandler(g.stderr, opts))
}

func (g *globals) open(ctx context.Context, progress bool) (*harness.Harness, error) {
	return g.openWith(ctx, harness.Options{}, progress)
}

// openExisting opens a state dir that must already hold a journal.
func (g *globals) openExisting(ctx context.Context, progress bool) (*harness.Harness, error) {
	return g.openWith(ctx, harness.Options{Existing: true}, progress)
}

// sandboxType is the sandbox backend --backend names.
func (g *globals) sandboxType() (sandbox.Type, error) {
	t, err := harness.DefaultBackends().Lookup(g.backend)
	if err != nil {
		return sandbox.Type{}, usagef("--backend: %v", err)
	}
	return t, nil
}

func (g *globals) openWith(ctx context.Context, opts harness.Options, progress bool) (*harness.Harness, error) {
	t, err := g.sandboxType()
	if err != nil {
		return nil, err
	}
	opts.StateDir, opts.InitBinary, opts.BuildID, opts.Logger, opts.Sandbox = g.state, g.initBinary, buildID, g.logger(), t
	opts.TracerProvider = g.tracing.provider()
	opts.BuiltinAgents = agents.Names()
	ext, err := reflect.New(reflect.Options{Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	opts.Extension = ext
	if progress {
		opts.Progress = g.stderr
	}
	return harness.Open(ctx, opts)
}

// remote reaches the live process that owns the state dir, when err says
// another process has it; nil otherwise (err then stands as it is: it says
// which pid owns the dir).
func (g *globals) remote(ctx context.Context, err error) *harness.Remote {
	if !errors.Is(err, journal.ErrLocked) {
		return nil
	}
	rm, derr := harness.DialControl(ctx, g.state)
	if derr != nil {
		g.logger().Debug("the state dir's owner does not answer on its control socket", "err", derr)
		return nil
	}
	return rm
}

func execute(args []string) int {
	return executeWith(args, os.Stdout, os.Stderr)
}

func executeWith(args []string, stdout, stderr io.Writer) int {
	// The sandbox side of the binary: PID 1 and the built-in agents, as
	// in overnight-sandbox. They bypass cobra so that their argv reaches
	// them untouched.
	if code, ok := sandboxcmd.Run(args, stdout, stderr); ok {
		return code
	}

	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "overnight",
		Short: "Prove whether long-lived AI agents survive restarts, crashes and outages",
		Long: `overnight runs an agent inside a Docker sandbox with its state in Badger,
injects faults (kills, harness crashes, ...), and judges from the world's own
ledger what really happened.

Exit codes: 0 pass, 1 fail, 2 unknown, 3 error.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.state, "state", envOr("OVERNIGHT_STATE", harness.DefaultStateDir), "state dir holding the journal ($OVERNIGHT_STATE)")
	root.PersistentFlags().StringVar(&g.initBinary, "init-binary", os.Getenv("OVERNIGHT_INIT_BINARY"), "static binary to inject into sandboxes as PID 1: overnight-sandbox or overnight (default: the overnight-sandbox built beside this executable, else this executable; $OVERNIGHT_INIT_BINARY)")
	root.PersistentFlags().StringVar(&g.backend, "backend", envOr("OVERNIGHT_BACKEND", "docker"), "sandbox backend the agents run on (overnight backends lists them; $OVERNIGHT_BACKEND)")
	root.PersistentFlags().BoolVarP(&g.verbose, "verbose", "v", false, "log diagnostics to stderr")
	root.PersistentFlags().BoolVarP(&g.quiet, "quiet", "q", false, "no progress lines on stderr (attempts, faults)")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", envOr("OVERNIGHT_LOG_FORMAT", "text"), "diagnostics on stderr (with -v, and warnings) as text or json, one object per line ($OVERNIGHT_LOG_FORMAT)")
	root.Version = version
	if buildNonce != "" {
		root.Version += " (test build " + buildNonce + ")"
	}
	// Cobra parses the flags and checks the arguments before this runs:
	// an error before it is one of the command line.
	parsed := false
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		parsed = true
		if g.logFormat != "text" && g.logFormat != "json" {
			return usagef("--log-format %q: want text or json", g.logFormat)
		}
		g.logger().Debug("overnight", "version", root.Version, "gomaxprocs", runtime.GOMAXPROCS(0), "command", cmd.Name())
		t, err := newTracing(cmd.Context())
		if err != nil {
			return &codeError{exitError, err}
		}
		g.tracing = t
		return nil
	}
	defer func() {
		if err := g.tracing.shutdown(); err != nil {
			fmt.Fprintln(stderr, "overnight: send the last spans:", err)
		}
	}()
	root.AddCommand(runCmd(g), shrinkCmd(g), resumeCmd(g), runsCmd(g), logsCmd(g), gcCmd(g), faultsCmd(g), backendsCmd(g), scenariosCmd(g), worldsCmd(g), worldCmd(g),
		reflectCmd(g), gateCmd(g), decideCmd(g, true), decideCmd(g, false), validateCmd(g), schemaCmd(g), suiteCmd(g), reportCmd(g), serveCmd(g))

	cmd, err := root.ExecuteC()
	if err == nil {
		return exitPass
	}
	code := exitError
	var ce *codeError
	if errors.As(err, &ce) {
		code, err = ce.code, ce.err
	}
	if err == nil {
		return code // a verdict: the result is printed already
	}
	// Scripts read stdout: with JSON asked for, an error is one JSON
	// object there too; the message stays on stderr for people.
	if wantsJSON(root, cmd, args, parsed) {
		if werr := writeErrorJSON(stdout, err, !parsed); werr != nil {
			fmt.Fprintln(stderr, "overnight: print the error as JSON:", werr)
		}
	}
	fmt.Fprintln(stderr, "overnight:", err)
	return code
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// outputFlag adds --output (text or json) to cmd and checks it before the command runs.
func outputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "text", "output format: text or json")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if *output != "text" && *output != "json" {
			return usagef("--output %q: want text or json", *output)
		}
		return nil
	}
}

// interruptible returns a context cancelled by the first SIGINT or
// SIGTERM; the harness then cleans up. A second one is not caught: it ends
// the process at once, for when cleanup hangs.
func (g *globals) interruptible() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-sigs:
			signal.Stop(sigs) // a second signal gets the default action
			fmt.Fprintf(g.stderr, "overnight: %s: cleaning up (interrupt again to quit at once)\n", sig)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(sigs); cancel() }
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// report prints a result and turns its verdict into the exit code.
func report(g *globals, res *harness.Result, output string) error {
	var err error
	if output == "json" {
		err = writeJSON(g.stdout, res)
	} else {
		err = res.WriteText(g.stdout)
	}
	if err != nil {
		return &codeError{exitError, err}
	}
	if code := verdictCode(res.Verdict); code != exitPass {
		return &codeError{code: code}
	}
	return nil
}

// runError maps a harness error to exit code 3 with advice.
func runError(err error, runID string) error {
	if errors.Is(err, harness.ErrInterrupted) && runID != "" {
		return &codeError{exitError, &interruptedError{runID, err}}
	}
	return &codeError{exitError, err}
}

func resolveScenario(arg string) (*scenarios.Scenario, error) {
	scen, err := scenarios.Resolve(arg, builtin.Lookup, builtin.Names())
	if err != nil {
		return nil, &scenarioLoadError{err}
	}
	return scen, nil
}

// runFlags are the flags every run of `run` and `suite` takes: the fault
// schedule (--fault or --chaos random), the model, the limits and the
// lessons.
type runFlags struct {
	faultTexts  []string
	chaosMode   string
	chaosCount  int
	chaosKinds  string
	kinds       []string // chaosKinds as a list, set by schedule; nil: not given
	llmSpec     string
	timeout     time.Duration
	maxAttempts int
	lessons     string
	world       string
	httpReplay  string
	mcpReplay   string
}

func (rf *runFlags) register(f *pflag.FlagSet, lessons, lessonsHelp string) {
	f.StringArrayVarP(&rf.faultTexts, "fault", "f", nil, "fault KIND[:ARG]@TRIGGER[/DURATION], repeatable; replaces the scenario's list (catalog: overnight faults)")
	f.StringVar(&rf.chaosMode, "chaos", "", "random: draw the schedule from the seed (kinds the run can reach, never harness-crash); replaces the scenario's faults")
	f.IntVar(&rf.chaosCount, "chaos-faults", 5, "how many faults --chaos random draws")
	f.StringVar(&rf.chaosKinds, "chaos-kinds", "", "KIND,...: the only fault kinds --chaos random draws (catalog: overnight faults); overrides the scenario's reach.kinds")
	f.StringVar(&rf.llmSpec, "llm", "", "the model behind the gateway's LLM endpoint: scripted (the test double), openai:MODEL, anthropic:MODEL, ollama:MODEL, replay:RUN (default: the scenario's llm.model)")
	f.DurationVar(&rf.timeout, "timeout", 0, "wall-clock limit (default: the scenario's)")
	f.IntVar(&rf.maxAttempts, "max-attempts", 0, "attempts before the run fails as a crash loop (default: the scenario's)")
	f.StringVar(&rf.lessons, "lessons", lessons, lessonsHelp)
	f.StringVar(&rf.world, "world", "", "URL: act on the world served over the world protocol at this base URL instead of the scenario's (it must describe itself with the scenario's world name; docs/worlds.md)")
	f.StringVar(&rf.httpReplay, "http-replay", "", "RUN: answer every request to the scenario's HTTP APIs from that run's exchanges, sending nothing upstream (docs/http-apis.md)")
	f.StringVar(&rf.mcpReplay, "mcp-replay", "", "RUN: answer the scenario's MCP servers' tools/list and every tools/call from that run's recording, starting no server; overrides the scenario's mcp.replay (docs/mcp.md)")
}

// schedule checks the flags and returns the fault list (nil: each
// scenario's own; empty: none) and how many faults --chaos random draws;
// others counts the schedule's other sources already given
// (--replay-faults).
func (rf *runFlags) schedule(cmd *cobra.Command, others int) (texts []string, specs []chaos.Spec, random int, err error) {
	if rf.lessons != reflect.LessonsMemory && rf.lessons != reflect.LessonsNone {
		return nil, nil, 0, usagef("--lessons %q: want %s or %s", rf.lessons, reflect.LessonsMemory, reflect.LessonsNone)
	}
	sources := others
	if cmd.Flags().Changed("fault") {
		sources++
		texts, specs = []string{}, []chaos.Spec{}
		for _, t := range rf.faultTexts {
			if t == "" {
				continue // --fault '' : explicitly no faults
			}
			s, err := chaos.ParseSpec(t)
			if err != nil {
				return nil, nil, 0, usagef("--fault: %w", err)
			}
			texts, specs = append(texts, s.String()), append(specs, s)
		}
	}
	if rf.chaosMode != "" {
		sources++
		if rf.chaosMode != "random" {
			return nil, nil, 0, usagef("--chaos %q: the only mode is random", rf.chaosMode)
		}
		if rf.chaosCount < 1 || rf.chaosCount > 100 {
			return nil, nil, 0, usagef("--chaos-faults %d: want 1..100", rf.chaosCount)
		}
		random = rf.chaosCount
	}
	if cmd.Flags().Changed("chaos-kinds") {
		if rf.chaosMode != "random" {
			return nil, nil, 0, usagef("--chaos-kinds limits what --chaos random draws: give --chaos random too")
		}
		if rf.kinds, err = kindList(rf.chaosKinds); err != nil {
			return nil, nil, 0, usagef("--chaos-kinds: %w", err)
		}
	}
	if sources > 1 {
		return nil, nil, 0, usagef("--fault, --chaos and --replay-faults each give the whole schedule: use one")
	}
	if rf.timeout < 0 {
		return nil, nil, 0, usagef("--timeout %s: want a positive duration", rf.timeout)
	}
	if rf.maxAttempts < 0 {
		return nil, nil, 0, usagef("--max-attempts %d: want at least 1", rf.maxAttempts)
	}
	return texts, specs, random, nil
}

// kindList splits --chaos-kinds: fault kind names separated by commas.
// Whether each is a kind random chaos can draw for a scenario is the
// harness's to say (Harness.CheckRandom), with the scenario's reach.
func kindList(text string) ([]string, error) {
	var kinds []string
	for _, k := range strings.Split(text, ",") {
		k = strings.TrimSpace(k)
		if k == "" {
			return nil, fmt.Errorf("%q: want fault kind names separated by commas, such as kill,restart,netdrop (see `overnight faults`)", text)
		}
		if strings.ContainsAny(k, ":@/ ") {
			return nil, fmt.Errorf("%q is not a fault kind's name: random chaos draws each kind's argument, trigger and duration itself (e.g. api-version, not api-version:v2)", k)
		}
		kinds = append(kinds, k)
	}
	return kinds, nil
}

func runCmd(g *globals) *cobra.Command {
	var (
		seed      int64
		agentName string
		output    string
		replay    string
		rf        runFlags
	)
	cmd := &cobra.Command{
		Use:   "run SCENARIO",
		Short: "Run a scenario (a built-in name or a scenario file) and judge it",
		Example: `  overnight run deploy --seed 1 --fault kill@step:3 --output json
  overnight run deploy --agent naive --fault kill@step:3
  overnight run week --seed 42
  overnight run deploy --chaos random --seed 7
  overnight run deploy --chaos random --chaos-kinds kill,restart,netdrop --seed 7
  overnight run deploy --replay-faults <run-id>
  overnight run deploy --llm openai:gpt-4o-mini          # OPENAI_API_KEY (and OPENAI_BASE_URL) from this environment
  overnight run deploy --llm replay:<run-id> --replay-faults <run-id>   # offline, from the recording
  overnight run ./my-scenario.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			backend, err := g.sandboxType()
			if err != nil {
				return err
			}
			scen, err := loadScenario(args[0], backend)
			if err != nil {
				return &codeError{exitError, err}
			}
			others := 0
			if replay != "" {
				others++
			}
			_, faults, random, err := rf.schedule(cmd, others)
			if err != nil {
				return err
			}
			req := harness.RunRequest{Scenario: scen, Agent: agentName, Timeout: rf.timeout, MaxAttempts: rf.maxAttempts, LLM: rf.llmSpec, World: rf.world, HTTPReplay: rf.httpReplay, MCPReplay: rf.mcpReplay,
				Faults: faults, RandomFaults: random, RandomKinds: rf.kinds, ReplayFaults: replay,
				Extras: map[string]string{reflect.ExtraLessons: rf.lessons}}
			if cmd.Flags().Changed("seed") {
				req.Seed = &seed
			}
			ctx, stop := g.interruptible()
			defer stop()
			h, err := g.open(ctx, !g.quiet)
			if err != nil {
				return &codeError{exitError, err}
			}
			defer h.Close()
			var runID string
			req.Started = func(id string) {
				runID = id
				fmt.Fprintf(g.stderr, "run %s\n", id)
			}
			res, err := h.Run(ctx, req)
			if err != nil {
				return runError(err, runID)
			}
			return report(g, res, output)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&seed, "seed", 0, "seed for every random choice; without it, the scenario's seed, else 1")
	rf.register(f, reflect.LessonsMemory, "lessons a scenario with reflection hands its agent: memory (those kept from earlier runs of the scenario and agent, and this run's) or none (this run's only)")
	f.StringVar(&replay, "replay-faults", "", "re-apply the fault log of an earlier run exactly, instead of drawing again")
	f.StringVar(&agentName, "agent", "", "agent variant from the scenario's agents (default: its agent)")
	outputFlag(cmd, &output)
	return cmd
}

func resumeCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "resume RUN",
		Short: "Continue a run from the journal alone (after Ctrl-C or a harness crash)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := g.interruptible()
			defer stop()
			h, err := g.openExisting(ctx, !g.quiet)
			if err != nil {
				return &codeError{exitError, err}
			}
			defer h.Close()
			if _, err := h.Lookup(args[0]); err != nil {
				return &codeError{exitError, err}
			}
			fmt.Fprintf(g.stderr, "run %s\n", args[0])
			res, err := h.Resume(ctx, args[0])
			if err != nil {
				return runError(err, args[0])
			}
			return report(g, res, output)
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func runsCmd(g *globals) *cobra.Command {
	var output string
	var all bool
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List the runs in the state dir, newest first (--all: with the isolated re-runs of reflections)",
		Long: `runs lists the runs in the state dir, newest first. The isolated re-runs a
reflection makes (its replays, counterfactual and verification) are left out,
in the table and in --output json: --all lists them too, each with the run
it re-ran (parent) and why (purpose). overnight reflect RUN writes them up.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var runs []harness.RunSummary
			h, err := g.openExisting(cmd.Context(), false)
			if rm := g.remote(cmd.Context(), err); rm != nil {
				runs, err = rm.Runs(cmd.Context())
			} else if err == nil {
				defer h.Close()
				runs, err = h.Runs()
			}
			if err != nil {
				return &codeError{exitError, err}
			}
			hidden := 0
			if !all {
				listed := len(runs)
				runs = slices.DeleteFunc(runs, func(r harness.RunSummary) bool { return r.Parent != "" })
				hidden = listed - len(runs)
			}
			if output == "json" {
				return writeJSON(g.stdout, map[string]any{"runs": runs})
			}
			if len(runs) == 0 {
				dir, _ := filepath.Abs(g.state)
				fmt.Fprintf(g.stdout, "no runs in %s\n", dir)
				return nil
			}
			writeRuns(g.stdout, runs, all)
			if hidden > 0 {
				fmt.Fprintf(g.stdout, "(%s of reflections not listed; --all lists them)\n", history.Count(hidden, "isolated re-run"))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "list the isolated re-runs of reflections too (replays, counterfactuals, verifications), with the run each re-ran")
	outputFlag(cmd, &output)
	return cmd
}

// writeRuns prints runs as a table; all adds a column naming each isolated
// re-run's purpose and parent.
func writeRuns(w io.Writer, runs []harness.RunSummary, all bool) {
	line := func(id, scenario string, seed any, status, verdict, started, isolated string) {
		if all {
			fmt.Fprintf(w, "%-23s  %-12s  %6v  %-11s  %-7s  %-19s  %s\n", id, scenario, seed, status, verdict, started, isolated)
		} else {
			fmt.Fprintf(w, "%-23s  %-12s  %6v  %-11s  %-7s  %s\n", id, scenario, seed, status, verdict, started)
		}
	}
	line("RUN", "SCENARIO", "SEED", "STATUS", "VERDICT", "STARTED", "ISOLATED RE-RUN")
	for _, r := range runs {
		v := r.Verdict
		if v == "" {
			v = "-"
		}
		isolated := "-"
		if r.Parent != "" {
			isolated = strings.TrimSpace(r.Purpose + " of " + r.Parent)
		}
		line(r.RunID, r.Scenario, r.Seed, r.Status, v, r.StartedAt.Local().Format(time.DateTime), isolated)
	}
}

func logsCmd(g *globals) *cobra.Command {
	var attempt int
	var output string
	cmd := &cobra.Command{
		Use:   "logs RUN",
		Short: "Print each attempt's stdout and stderr, kept before its container was removed",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var logs []harness.AttemptLog
			h, err := g.openExisting(cmd.Context(), false)
			if rm := g.remote(cmd.Context(), err); rm != nil {
				logs, err = rm.Logs(cmd.Context(), args[0])
			} else if err == nil {
				defer h.Close()
				logs, err = h.Logs(args[0])
			}
			if err != nil {
				return &codeError{exitError, err}
			}
			if attempt > 0 {
				var keep []harness.AttemptLog
				for _, l := range logs {
					if l.Attempt == attempt {
						keep = append(keep, l)
					}
				}
				if len(keep) == 0 {
					return usagef("--attempt %d: run %s has no attempt %d (it has %d)", attempt, args[0], attempt, len(logs))
				}
				logs = keep
			}
			if output == "json" {
				return writeJSON(g.stdout, map[string]any{"attempts": logs})
			}
			for _, l := range logs {
				code := "none"
				if l.ExitCode != nil {
					code = fmt.Sprint(*l.ExitCode)
				}
				end := l.End
				if end == "" {
					end = "no end recorded (still running, or its harness died: the output is kept when it ends or is reaped)"
				}
				fmt.Fprintf(g.stdout, "=== attempt %d (container %.12s): %s, exit code %s\n", l.Attempt, l.Container, end, code)
				fmt.Fprintf(g.stdout, "--- stdout\n%s", l.Stdout)
				if l.Stdout != "" && !strings.HasSuffix(l.Stdout, "\n") {
					fmt.Fprintln(g.stdout)
				}
				fmt.Fprintf(g.stdout, "--- stderr\n%s", l.Stderr)
				if l.Stderr != "" && !strings.HasSuffix(l.Stderr, "\n") {
					fmt.Fprintln(g.stdout)
				}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&attempt, "attempt", 0, "only this attempt")
	outputFlag(cmd, &output)
	return cmd
}

func gcCmd(g *globals) *cobra.Command {
	var all, images bool
	var output string
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove containers left by dead runs of this state dir (--all: every overnight container)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := g.interruptible()
			defer stop()
			h, err := g.open(ctx, false)
			if err != nil {
				return &codeError{exitError, err}
			}
			defer h.Close()
			res, err := h.GC(ctx, all, images)
			if err != nil {
				return &codeError{exitError, err}
			}
			if output == "json" {
				return writeJSON(g.stdout, res)
			}
			fmt.Fprintf(g.stdout, "removed %d containers\n", len(res.Containers))
			if res.Worlds > 0 {
				fmt.Fprintf(g.stdout, "killed %d command worlds a dead harness left running\n", res.Worlds)
			}
			for _, id := range res.Containers {
				fmt.Fprintf(g.stdout, "  %.12s\n", id)
			}
			if images {
				fmt.Fprintf(g.stdout, "removed %d images\n", len(res.Images))
				for _, tag := range res.Images {
					fmt.Fprintf(g.stdout, "  %s\n", tag)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "remove every container labelled overnight.managed=true, whatever its state dir")
	cmd.Flags().BoolVar(&images, "images", false, "also remove sandbox images no container uses, but this binary's (each build of overnight makes its own)")
	outputFlag(cmd, &output)
	return cmd
}

func faultsCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "faults",
		Short: "Print the fault catalog: kinds, triggers, parameters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			kinds := chaos.Default().Kinds()
			if output == "json" {
				type entry struct {
					chaos.Kind
					DurationRule string `json:"duration"`
					// DrawnAt: the triggers --chaos random gives it; empty: never drawn.
					DrawnAt []chaos.TriggerType `json:"drawn_at"`
				}
				list := make([]entry, len(kinds))
				for i, k := range kinds {
					list[i] = entry{k, k.DurationText(), append([]chaos.TriggerType{}, k.DrawnAt()...)}
				}
				return writeJSON(g.stdout, map[string]any{"faults": list})
			}
			fmt.Fprintln(g.stdout, "Fault syntax: KIND[:ARG]@TRIGGER[/DURATION]")
			fmt.Fprintln(g.stdout, "Triggers: step:N, effect:N[:before|after], llm:N, t:DURATION, every:DURATION, rate:R/DURATION")
			fmt.Fprintln(g.stdout, "Durations are virtual time: Go durations plus d (24h). effect:N without a phase lands where the kind says (for most, after the world acted and before the result is journaled).")
			group := ""
			for _, k := range kinds {
				if k.Group != group {
					group = k.Group
					fmt.Fprintf(g.stdout, "\n== %s\n", group)
				}
				var trig []string
				for _, t := range k.Triggers {
					trig = append(trig, string(t))
				}
				fmt.Fprintf(g.stdout, "\n%s\n  %s\n  triggers: %s; /DURATION: %s\n", k.Name, k.Summary, strings.Join(trig, ", "), k.DurationText())
				if k.Arg != "" {
					fmt.Fprintf(g.stdout, "  ARG: %s\n", k.Arg)
				}
				fmt.Fprintf(g.stdout, "  example: %s\n", k.Example)
				if at := k.DrawnAt(); len(at) > 0 {
					var names []string
					for _, t := range at {
						names = append(names, string(t))
					}
					only := ""
					if k.MCP {
						only = ", only for a scenario with mcp:"
					}
					fmt.Fprintf(g.stdout, "  --chaos random: draws it at %s (those the scenario's reach: allows%s)\n", strings.Join(names, ", "), only)
				} else {
					fmt.Fprintln(g.stdout, "  --chaos random: never draws it")
				}
			}
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func backendsCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "backends",
		Short: "List the sandbox backends (--backend) and the capabilities their sandboxes have",
		Long: `backends lists the sandbox backends this binary can run agents on, and the
optional capabilities of each (freeze: the pause fault; link: the disconnect
fault; exec; services: service containers for worlds and MCP servers;
copy-out: a scenario's report: file, copied out when the agent reports
done; standby: the next attempt's sandbox started ahead, so that a dead
agent is resumed at once). A fault or a report: that needs a capability the chosen backend
lacks is refused by validate and run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			types := harness.DefaultBackends().Types()
			if output == "json" {
				return writeJSON(g.stdout, map[string]any{"backends": types})
			}
			for _, t := range types {
				caps := make([]string, len(t.Capabilities))
				for i, c := range t.Capabilities {
					caps[i] = string(c)
				}
				fmt.Fprintf(g.stdout, "%s\n  %s\n  capabilities: %s\n", t.Name, t.Summary, strings.Join(caps, ", "))
			}
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func scenariosCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "scenarios",
		Short: "List the built-in scenarios",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			type entry struct {
				Name        string   `json:"name"`
				Description string   `json:"description"`
				Variants    []string `json:"variants"`
			}
			var list []entry
			for _, name := range builtin.Names() {
				s, err := resolveScenario(name)
				if err != nil {
					return &codeError{exitError, err}
				}
				e := entry{Name: name, Description: strings.TrimSpace(s.Description), Variants: []string{}}
				for v := range s.Agents {
					e.Variants = append(e.Variants, v)
				}
				sort.Strings(e.Variants)
				list = append(list, e)
			}
			if output == "json" {
				return writeJSON(g.stdout, map[string]any{"scenarios": list})
			}
			for _, e := range list {
				fmt.Fprintf(g.stdout, "%s\n  %s\n", e.Name, e.Description)
				if len(e.Variants) > 0 {
					fmt.Fprintf(g.stdout, "  variants (--agent): %s\n", strings.Join(e.Variants, ", "))
				}
			}
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func shrinkCmd(g *globals) *cobra.Command {
	var output string
	var maxRuns int
	cmd := &cobra.Command{
		Use:   "shrink RUN",
		Short: "Find the smallest fault schedule that still fails the way RUN failed",
		Long: `shrink re-runs the scenario of a failed run with smaller fault schedules —
dropping faults (delta debugging), then shortening them and moving them
earlier — until nothing smaller fails the same way, and prints the smallest
schedule with the command that reproduces it. Every candidate is a real run
in the same state dir. Exit 0 when a reproducer was found.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if maxRuns < 1 {
				return usagef("--max-runs %d: want at least 1", maxRuns)
			}
			ctx, stop := g.interruptible()
			defer stop()
			h, err := g.openExisting(ctx, false)
			if err != nil {
				return &codeError{exitError, err}
			}
			defer h.Close()
			req := harness.ShrinkRequest{RunID: args[0], MaxRuns: maxRuns}
			if !g.quiet {
				req.Progress = func(line string) { fmt.Fprintln(g.stderr, line) }
			}
			res, err := h.Shrink(ctx, req)
			if errors.Is(err, harness.ErrNotFailing) {
				return &codeError{exitUnknown, err}
			}
			if err != nil {
				return &codeError{exitError, err}
			}
			if output == "json" {
				return writeJSON(g.stdout, res)
			}
			fmt.Fprintf(g.stdout, "run %s fails on %s with %d fault(s):\n", res.Original, res.Invariant, len(res.Faults))
			for _, f := range res.Faults {
				fmt.Fprintf(g.stdout, "  %s\n", f)
			}
			fmt.Fprintf(g.stdout, "reproducer: run %s (%d runs tried)\n  %s\n", res.RunID, res.RunsTried, res.Command)
			return nil
		},
	}
	cmd.Flags().IntVar(&maxRuns, "max-runs", 60, "stop after this many candidate runs (the smallest failing schedule so far is printed)")
	outputFlag(cmd, &output)
	return cmd
}
