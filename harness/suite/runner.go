package suite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
)

// SpanSuite is the span of a suite; its runs' spans are its children.
const SpanSuite = "overnight.suite"

// MaxParallel bounds Options.Parallel.
const MaxParallel = 256

// DefaultParallel is the worker pool's size when Options.Parallel is 0:
// two runs per CPU, at most 32. A run waits for its container to start and
// for its agent, but starting a container is CPU the engine spends: on the
// reference machine (2 cores) a suite of deploy runs was fastest at 2 and 4
// at once, and slower at 8 (BENCHMARKS.md, "Suites").
func DefaultParallel() int { return min(2*runtime.NumCPU(), 32) }

// Options say how a suite runs.
type Options struct {
	// Parallel is how many runs go at once (0: DefaultParallel).
	Parallel int
	// Corpus: re-run first the cases an earlier suite of the same
	// configuration saw fail, and record this suite's failures for the next.
	Corpus bool
	// Progress, if set, hears of each run as it ends.
	Progress Progress
	// Command is how a person starts overnight here, for each run's
	// reproducing command (default "overnight"): e.g. "overnight --state DIR".
	Command string
}

// Run runs the plan's cases against h under a worker pool and tallies the
// result; it records the suite (and, with opts.Corpus, its failures) in
// h's state dir. When ctx is cancelled (Ctrl-C), no new run starts, the
// running ones stop resumable, and the result so far comes back with
// Suite.Interrupted set and no error. An error means the suite could not
// run at all.
func Run(ctx context.Context, h *harness.Harness, plan *Plan, opts Options) (*Result, error) {
	par := opts.Parallel
	if par <= 0 {
		par = DefaultParallel()
	}
	if par > MaxParallel {
		return nil, fmt.Errorf("%w: --parallel %d: at most %d", ErrPlan, par, MaxParallel)
	}
	faults, err := plan.Config.faultSpecs()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPlan, err)
	}
	id, err := newID()
	if err != nil {
		return nil, err
	}
	cases := slices.Clone(plan.Cases)
	var corpus map[string]history.CorpusRecord
	configKey := plan.Config.fingerprint()
	if opts.Corpus {
		if cases, corpus, err = withCorpus(h, plan, cases, configKey); err != nil {
			return nil, err
		}
	}
	res := &Result{Suite: Header{ID: id, StartedAt: time.Now().UTC(), Parallel: par, Config: plan.Config,
		Scenarios: plan.Scenarios, Seeds: plan.Seeds, Plan: plan.Fingerprint, Cases: plan.Total, Shard: plan.Shard}}
	ctx, span := h.Tracer().Start(ctx, SpanSuite, trace.WithAttributes(
		attribute.String("overnight.suite.id", id), attribute.Int("overnight.suite.cases", len(cases)), attribute.Int("overnight.suite.parallel", par)))
	defer span.End()
	rec := history.SuiteRecord{ID: id, StartedAt: res.Suite.StartedAt}
	if err := h.Writer().Put(context.WithoutCancel(ctx), history.SuiteEntry(rec)); err != nil {
		return nil, fmt.Errorf("record suite %s: %w", id, err)
	}

	command := opts.Command
	if command == "" {
		command = Command("")
	}
	sources := map[string]string{}
	for _, s := range plan.Scenarios {
		sources[s.Name] = s.Source
	}
	runs := make([]*RunResult, len(cases))
	var (
		mu    sync.Mutex
		done  int
		tally Counts
	)
	if opts.Progress != nil {
		opts.Progress.Start(len(cases))
	}
	workers := min(par, len(cases))
	// Each run's sandbox joins a warm network namespace when one is ready.
	h.WarmSandboxes(ctx, warmHolders(workers, len(cases)))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				c := cases[i]
				rr := runCase(ctx, h, plan, c, faults)
				rr.Reproduce = Reproduce(command, sources[c.Scenario], c, plan.Config)
				mu.Lock()
				runs[i] = &rr
				done++
				tally.add(rr.Verdict)
				if opts.Progress != nil {
					opts.Progress.Finished(rr, done, len(cases), tally)
				}
				if opts.Corpus && rr.Error == "" {
					if err := recordCorpus(ctx, h, corpus, configKey, sources[c.Scenario], c, rr); err != nil {
						res.Errors = append(res.Errors, err.Error())
					}
				}
				mu.Unlock()
			}
		})
	}
dispatch:
	for i := range cases {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break dispatch
		}
	}
	close(jobs)
	wg.Wait()
	if opts.Progress != nil {
		opts.Progress.Stop()
	}

	for i, r := range runs {
		if r == nil {
			res.Suite.Interrupted = true // never started
			continue
		}
		if r.Error != "" {
			res.Errors = append(res.Errors, fmt.Sprintf("%s: %s", cases[i].ID(), r.Error))
		}
		res.Runs = append(res.Runs, *r)
	}
	if ctx.Err() != nil {
		res.Suite.Interrupted = true
	}
	if opts.Corpus {
		res.Corpus = corpusSummary(res.Runs, corpus)
	}
	sortRuns(res.Runs, res.Suite.Scenarios)
	res.Suite.WallMS = time.Since(res.Suite.StartedAt).Milliseconds()
	res.Tally()
	span.SetAttributes(attribute.Int("overnight.suite.passes", res.Summary.Passes), attribute.Int("overnight.suite.fails", res.Summary.Fails),
		attribute.Int("overnight.suite.unknown", res.Summary.Unknown), attribute.Bool("overnight.suite.interrupted", res.Suite.Interrupted))
	if err := saveSuite(ctx, h, rec, res); err != nil {
		return res, err
	}
	return res, nil
}

// saveSuite records the suite's result in the state dir.
func saveSuite(ctx context.Context, h *harness.Harness, rec history.SuiteRecord, res *Result) error {
	js, err := json.Marshal(res)
	if err != nil {
		return err
	}
	rec.EndedAt, rec.Result = time.Now().UTC(), js
	if err := h.Writer().Put(context.WithoutCancel(ctx), history.SuiteEntry(rec)); err != nil {
		return fmt.Errorf("record the result of suite %s: %w", rec.ID, err)
	}
	return nil
}

// runCase runs one case to its verdict.
func runCase(ctx context.Context, h *harness.Harness, plan *Plan, c Case, faults []chaos.Spec) RunResult {
	rr := RunResult{Scenario: c.Scenario, Agent: history.AgentLabel(c.Agent), Seed: c.Seed, Verdict: history.VerdictUnknown,
		FromCorpus: c.FromCorpus, Counted: !c.Extra, Faults: []history.FaultResult{}, Invariants: []history.InvariantResult{}}
	seed := c.Seed
	cfg := plan.Config
	req := harness.RunRequest{Scenario: plan.Scenario(c.Scenario), Agent: c.Agent, Seed: &seed, Faults: faults,
		RandomFaults: cfg.RandomFaults, RandomKinds: cfg.RandomKinds, LLM: cfg.LLM, World: cfg.World, HTTPReplay: cfg.HTTPReplay, MCPReplay: cfg.MCPReplay, Timeout: cfg.Timeout, MaxAttempts: cfg.MaxAttempts, Extras: cfg.Extras,
		Started: func(id string) { rr.RunID = id }}
	started := time.Now()
	res, err := h.Run(ctx, req)
	if err != nil {
		rr.WallMS = time.Since(started).Milliseconds()
		rr.Reason = "the harness could not run it: " + err.Error()
		rr.Error = err.Error()
		if errors.Is(err, harness.ErrInterrupted) && rr.RunID != "" {
			rr.Reason = "interrupted; resumable: overnight resume " + rr.RunID
		}
		return rr
	}
	rr.RunID, rr.Verdict, rr.Reason = res.RunID, res.Verdict, res.Reason
	rr.Attempts, rr.StepsCompleted, rr.WallMS, rr.VirtualMS = res.Attempts, res.StepsCompleted, res.WallMS, res.VirtualMS
	rr.HistoryDigest, rr.Reflections = res.HistoryDigest, len(res.Reflections)
	rr.ReplayDivergence = res.ReplayDivergence
	if res.Faults != nil {
		rr.Faults = res.Faults
	}
	if res.Invariants != nil {
		rr.Invariants = res.Invariants
	}
	return rr
}

// Counts are verdicts so far.
type Counts struct{ Pass, Fail, Unknown int }

func (c *Counts) add(verdict string) {
	switch verdict {
	case history.VerdictPass:
		c.Pass++
	case history.VerdictFail:
		c.Fail++
	default:
		c.Unknown++
	}
}

func newID() (string, error) {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("suite id: %w", err)
	}
	return "suite-" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:]), nil
}

// Reproduce is the command that runs case c on its own, to the same
// history: command (how overnight is started: "overnight", or
// Command(stateDir)), then `run SOURCE --seed N` with the case's agent and
// cfg's run flags. source is the scenario as a person names it: a built-in
// name or a path. Every run of a suite carries it (RunResult.Reproduce);
// harness/overnighttest builds its runs' with it too.
func Reproduce(command, source string, c Case, cfg Config) string {
	args := []string{command, "run", quote(source), "--seed", strconv.FormatInt(c.Seed, 10)}
	if c.Agent != "" {
		args = append(args, "--agent", quote(c.Agent))
	}
	switch {
	case cfg.Faults != nil && len(cfg.Faults) == 0:
		args = append(args, "--fault", "''")
	case cfg.Faults != nil:
		for _, f := range cfg.Faults {
			args = append(args, "--fault", quote(f))
		}
	case cfg.RandomFaults > 0:
		args = append(args, "--chaos", "random", "--chaos-faults", strconv.Itoa(cfg.RandomFaults))
		if len(cfg.RandomKinds) > 0 {
			args = append(args, "--chaos-kinds", quote(strings.Join(cfg.RandomKinds, ",")))
		}
	}
	if cfg.LLM != "" {
		args = append(args, "--llm", quote(cfg.LLM))
	}
	if cfg.HTTPReplay != "" {
		args = append(args, "--http-replay", quote(cfg.HTTPReplay))
	}
	if cfg.MCPReplay != "" {
		args = append(args, "--mcp-replay", quote(cfg.MCPReplay))
	}
	if cfg.Timeout > 0 {
		args = append(args, "--timeout", cfg.Timeout.String())
	}
	if cfg.MaxAttempts > 0 {
		args = append(args, "--max-attempts", strconv.Itoa(cfg.MaxAttempts))
	}
	keys := make([]string, 0, len(cfg.Extras))
	for k := range cfg.Extras {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		args = append(args, "--"+k, quote(cfg.Extras[k]))
	}
	return strings.Join(args, " ")
}

// Command is how a person starts overnight on stateDir, for reproducing
// commands: "overnight" for "" or the default state dir, else
// "overnight --state DIR".
func Command(stateDir string) string {
	if stateDir == "" || stateDir == harness.DefaultStateDir {
		return "overnight"
	}
	return "overnight --state " + quote(stateDir)
}

// quote quotes s for a POSIX shell when it needs it.
func quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r == ':' || r == '@' || r == '=' || r == ',' || r == '+' ||
			r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// warmHolders is how many warm network namespaces a suite of runs cases,
// inflight at once, keeps: one per run in flight, but no more than the
// runs after the first wave can use twice each. A holder is a container
// of its own, so it costs about a sandbox's start; it is not ready for
// the first wave (Take never waits), and it repays its start from its
// second use. Measured on deploy × 40 (BENCHMARKS.md): one holder per run
// in flight made --parallel 32 1.8x slower than a raw loop, 32 holders
// started for 8 runs after the first wave.
func warmHolders(inflight, runs int) int {
	return max(0, min(inflight, (runs-inflight)/2))
}
