// Package harness is overnight's orchestrator: a run's lifecycle and its
// supervisor (a new attempt, in a new container with a new token, whenever
// the agent dies), the gateway's backend (durable checkpoints, effects
// executed once per key against the world, the virtual clock, events), the
// faults' schedule, and the verdict.
//
// Durable state lives in one Badger journal per state dir (harness/journal);
// nothing is acknowledged to an agent before it is synced there, so the
// harness itself may die at any instant and Resume continues from the
// journal alone. The CLI (cmd/overnight) is a thin layer over this package.
package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/agents"
	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// DefaultStateDir is the state dir used when Options.StateDir is empty.
const DefaultStateDir = ".overnight"

// VirtualEpoch is where every run's virtual clock starts, so that two
// honest runs of the same scenario and seed see the same times.
var VirtualEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ErrRunNotFound is returned for a run id the state dir does not hold.
var ErrRunNotFound = errors.New("no such run")

// Options configure a Harness. Zero values take the documented defaults.
type Options struct {
	// StateDir holds the journal. Default DefaultStateDir (./.overnight).
	StateDir string
	// InitBinary is the static (CGO_ENABLED=0) linux overnight binary
	// injected into every sandbox as PID 1; built-in agents run from it
	// too. Default: the running executable. Under `go test` the running
	// executable is the test binary, so tests must set it.
	InitBinary string
	// Docker is the engine client. Default: sandbox.Connect on first use
	// (commands that need no Docker never connect).
	Docker sandbox.API
	// Logger receives diagnostics. Default: discard.
	Logger *slog.Logger
	// Progress receives one human-readable line per notable event of a
	// run (attempts, faults). Default: none.
	Progress io.Writer
	// Worlds are the simulated worlds scenarios may name. Default: cloud.
	Worlds *world.Registry
	// Faults is the fault catalog. Default: chaos.Default().
	Faults *chaos.Registry
	// Crash is what the harness-crash fault calls. Default: SIGKILL this
	// process. Only tests that cannot afford to die override it.
	Crash func()
	// LLMEnv is where provider keys and URLs are read (OPENAI_API_KEY,
	// ANTHROPIC_API_KEY, OLLAMA_HOST, ...). Default: os.Getenv — the
	// harness's own environment; the sandbox's is built from scratch and
	// never inherits them.
	LLMEnv func(string) string
	// LLMHTTPClient carries provider calls. Default: http.DefaultClient.
	LLMHTTPClient *http.Client
	// Existing refuses to create the state dir: commands that only read
	// runs (runs, logs, resume) say the dir is missing instead of making an
	// empty one. Default false.
	Existing bool
}

// ErrNoStateDir is returned by Open with Options.Existing for a missing dir.
var ErrNoStateDir = errors.New("no such state dir")

// Harness drives runs in one state dir. One process owns a state dir at a
// time (Open fails with a journal.LockedError naming the owner's pid).
type Harness struct {
	opts  Options
	j     *journal.Journal
	log   *slog.Logger
	state string // absolute state dir

	mu     sync.Mutex
	docker sandbox.API
	eng    *sandbox.Engine
	live   map[string]bool

	control *controlServer // the state dir's control socket (nil: none)
}

// Open opens (creating if needed) the state dir's journal and takes
// ownership of it.
func Open(ctx context.Context, opts Options) (*Harness, error) {
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir
	}
	abs, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("state dir %q: %w", opts.StateDir, err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Worlds == nil {
		opts.Worlds = world.NewRegistry()
		cloud.Register(opts.Worlds)
	}
	if opts.Faults == nil {
		opts.Faults = chaos.Default()
	}
	if opts.Crash == nil {
		opts.Crash = func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	}
	if opts.Existing {
		if _, err := os.Stat(filepath.Join(abs, "journal")); err != nil {
			return nil, fmt.Errorf("%w %s (it holds no journal; wrong --state? runs live in the state dir `overnight run` used)", ErrNoStateDir, abs)
		}
	}
	j, err := journal.Open(abs, journal.Options{Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	h := &Harness{opts: opts, j: j, log: opts.Logger, state: abs, docker: opts.Docker, live: map[string]bool{}}
	h.control = h.serveControl()
	return h, nil
}

// Close releases the state dir. Runs must have returned first.
func (h *Harness) Close() error {
	h.control.close()
	return h.j.Close()
}

// StateDir returns the absolute state dir.
func (h *Harness) StateDir() string { return h.state }

// Journal exposes the journal for read-only inspection (tests, reports).
func (h *Harness) Journal() *journal.Journal { return h.j }

func (h *Harness) progress(format string, args ...any) {
	if h.opts.Progress != nil {
		fmt.Fprintf(h.opts.Progress, format+"\n", args...)
	}
}

func (h *Harness) crash() error {
	h.log.Info("harness-crash fault: killing this process")
	h.opts.Crash()
	return nil
}

func (h *Harness) isLive(runID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.live[runID]
}

// engine connects to Docker on first use.
func (h *Harness) engine(ctx context.Context) (*sandbox.Engine, error) {
	h.mu.Lock()
	if h.eng != nil {
		e := h.eng
		h.mu.Unlock()
		return e, nil
	}
	api := h.docker
	h.mu.Unlock()
	if api == nil {
		c, err := sandbox.Connect(ctx)
		if err != nil {
			return nil, err
		}
		api = c
	}
	eng := sandbox.New(api, sandbox.Options{StateHash: sandbox.StateHash(h.state), Logger: h.log, KeepVolume: h.resumable})
	h.mu.Lock()
	if h.eng == nil {
		h.docker, h.eng = api, eng
	}
	eng = h.eng
	h.mu.Unlock()
	return eng, nil
}

// resumable reports whether a run that no process drives can still be
// resumed (its workspace volume must survive the reaper).
func (h *Harness) resumable(runID string) bool {
	var rec RunRecord
	found, err := get(h.j, runKey(runID), &rec)
	if err != nil {
		return true // when in doubt, keep the agent's files
	}
	return found && rec.Status != StatusFinished
}

// removeStaleSocketDirs removes the gateway socket dirs that harnesses of
// runs no process drives left behind (a killed harness cannot clean up).
func (h *Harness) removeStaleSocketDirs() {
	recs, err := scan[RunRecord](h.j, []byte(prefixRun))
	if err != nil {
		h.log.Warn("list runs for stale socket dirs", "err", err)
		return
	}
	for _, rec := range recs {
		dir := rec.SocketDir
		// Only directories this harness made: short, named ovn-*, holding at most a socket.
		if dir == "" || h.isLive(rec.ID) || !strings.HasPrefix(filepath.Base(dir), "ovn-") {
			continue
		}
		if _, err := os.Lstat(dir); err != nil {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			h.log.Warn("remove stale socket dir", "run", rec.ID, "dir", dir, "err", err)
		} else {
			h.log.Debug("removed stale socket dir", "run", rec.ID, "dir", dir)
		}
	}
}

// reap keeps the logs of this state dir's orphaned containers (a harness
// that died leaves its attempt's container running) and removes them.
func (h *Harness) reap(ctx context.Context, eng *sandbox.Engine) ([]string, error) {
	boxes, err := eng.List(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, b := range boxes {
		if h.isLive(b.RunID) || b.Attempt < 1 {
			continue
		}
		var att AttemptRecord
		found, err := get(h.j, attemptKey(b.RunID, b.Attempt), &att)
		if err != nil || !found || att.StdoutBlob != "" {
			continue
		}
		_ = eng.Kill(ctx, b.ID, "SIGKILL")
		stdout, stderr, err := eng.Logs(ctx, b.ID)
		if err != nil {
			h.log.Warn("read logs of orphaned container", "container", b.ID, "err", err)
		} else {
			att.StdoutBlob, att.StderrBlob = keepLogs(ctx, h, stdout, stderr)
		}
		att.EndedAt = time.Now().UTC()
		if att.End == "" {
			att.End = "orphaned: the harness died while it ran; reaped"
		}
		if err := put(ctx, h.j, attemptKey(b.RunID, b.Attempt), att); err != nil {
			h.log.Warn("record orphaned attempt", "run", b.RunID, "attempt", b.Attempt, "err", err)
		}
	}
	h.removeStaleSocketDirs()
	return eng.Reap(ctx, h.isLive)
}

// GCResult says what GC removed.
type GCResult struct {
	Containers []string `json:"containers"`
	Images     []string `json:"images"`
}

// GC removes leftover containers: this state dir's dead runs', or with all
// every container (and workspace volume) labelled overnight.managed=true.
// With images it also removes the sandbox images no container uses, but
// the one of this overnight binary (each build of overnight makes its own).
func (h *Harness) GC(ctx context.Context, all, images bool) (GCResult, error) {
	res := GCResult{Containers: []string{}, Images: []string{}}
	eng, err := h.engine(ctx)
	if err != nil {
		return res, err
	}
	var removed []string
	if all {
		removed, err = eng.ReapAll(ctx)
	} else {
		removed, err = h.reap(ctx, eng)
	}
	res.Containers = append(res.Containers, removed...)
	if err != nil || !images {
		return res, err
	}
	var keep []string
	if bin, berr := h.initBinary(); berr == nil {
		if ref, rerr := eng.ImageRef(ctx, sandbox.ImageSpec{InitBinary: bin}); rerr == nil {
			keep = append(keep, ref)
		}
	}
	imgs, err := eng.ReapImages(ctx, keep...)
	res.Images = append(res.Images, imgs...)
	return res, err
}

// initBinary is the overnight binary injected into sandboxes.
func (h *Harness) initBinary() (string, error) {
	if h.opts.InitBinary != "" {
		return h.opts.InitBinary, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the overnight binary to inject as the sandbox init: %w", err)
	}
	return exe, nil
}

// RunRequest says what to run.
type RunRequest struct {
	Scenario *scenarios.Scenario
	// Agent names a variant from the scenario's agents ("" = the default).
	Agent string
	// Seed drives every random choice. Nil: the scenario's seed, else 1.
	Seed *int64
	// Faults replaces the scenario's fault list when non-nil.
	Faults []chaos.Spec
	// Timeout overrides the scenario's wall-clock limit when > 0.
	Timeout time.Duration
	// MaxAttempts overrides the scenario's limit when > 0.
	MaxAttempts int
	// RandomFaults > 0 draws that many faults from the seed instead
	// (--chaos random): kinds that can be drawn, with triggers the
	// scenario's reach: block says a run can reach; never harness-crash.
	RandomFaults int
	// ReplayFaults names an earlier run whose fault log is re-applied
	// exactly instead of drawing again (--replay-faults).
	ReplayFaults string
	// LLM picks the model behind the gateway's LLM endpoint: "scripted"
	// (the deterministic test double, driven by the scenario's rules),
	// "openai:MODEL", "anthropic:MODEL", "ollama:MODEL", or "replay:RUN"
	// (serve that run's recorded exchanges). Default: the scenario's
	// llm.model, else none.
	LLM string
	// Started, if set, is called with the run id once the run is durable,
	// before any container starts.
	Started func(runID string)
}

// seedOf is the run's seed: the request's, else the scenario's, else 1.
func seedOf(scen *scenarios.Scenario, seed *int64) int64 {
	switch {
	case seed != nil:
		return *seed
	case scen.Seed != nil:
		return *scen.Seed
	}
	return 1
}

func newRunID(now time.Time) (string, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b), nil
}

// Run starts a run and drives it to its verdict.
func (h *Harness) Run(ctx context.Context, req RunRequest) (*Result, error) {
	if req.Scenario == nil {
		return nil, errors.New("run: no scenario")
	}
	agentSpec, err := req.Scenario.SelectAgent(req.Agent)
	if err != nil {
		return nil, err
	}
	seed := seedOf(req.Scenario, req.Seed)
	_, instances, err := h.schedule(req, seed)
	if err != nil {
		return nil, err
	}
	for _, in := range instances {
		if in.Spec.Kind == "disconnect" && req.Scenario.Sandbox.Network != "internal" {
			return nil, fmt.Errorf("fault %q: scenario %s gives its sandbox no network to disconnect: add `sandbox: {network: internal}` to it", in.Spec.String(), req.Scenario.Name)
		}
	}
	if _, err := h.model(req.Scenario, req.LLM); err != nil {
		return nil, err
	}
	// The image comes first, so that an unreachable engine or a bad agent
	// binary fails before any run is recorded.
	plan, err := h.plan(ctx, agentSpec)
	if err != nil {
		return nil, err
	}
	id, err := h.create(ctx, req)
	if err != nil {
		return nil, err
	}
	return h.drive(ctx, id, plan)
}

// schedule returns the run's fault schedule: the specs as written (for the
// run record) and their concrete instances (for the fault log). --fault,
// --chaos random and --replay-faults each replace the scenario's faults and
// draws. Every instance is checked against the catalog.
func (h *Harness) schedule(req RunRequest, seed int64) ([]string, []chaos.Instance, error) {
	scen := req.Scenario
	streams := chaos.NewStreams(seed)
	var specs []chaos.Spec
	var instances []chaos.Instance
	switch {
	case req.ReplayFaults != "":
		orig, err := h.runRecord(req.ReplayFaults)
		if err != nil {
			return nil, nil, err
		}
		if orig.Scenario != scen.Name {
			return nil, nil, fmt.Errorf("--replay-faults %s: that run is of scenario %s, not %s; its fault log is made for it", req.ReplayFaults, orig.Scenario, scen.Name)
		}
		recs, err := scan[FaultRecord](h.j, runPrefix(prefixFault, req.ReplayFaults))
		if err != nil {
			return nil, nil, fmt.Errorf("read the fault log of run %s: %w", req.ReplayFaults, err)
		}
		for _, fr := range recs {
			s, err := chaos.ParseSpec(fr.Spec)
			if err != nil {
				return nil, nil, fmt.Errorf("fault log of run %s: %w", req.ReplayFaults, err)
			}
			instances = append(instances, chaos.Instance{Spec: s, From: fr.From})
		}
		var written []string
		for _, in := range instances {
			written = append(written, in.Spec.String())
		}
		return nonNil(written), instances, h.check(instances)
	case req.RandomFaults > 0:
		if scen.Reach == nil {
			return nil, nil, fmt.Errorf("--chaos random needs to know what a run of scenario %s can reach: add a reach: block (steps, effects, llm_calls, virtual) to it", scen.Name)
		}
		drawn, err := chaos.RandomSchedule(streams.For("random-chaos"), h.opts.Faults, *scen.Reach, req.RandomFaults)
		if err != nil {
			return nil, nil, err
		}
		specs = drawn
	case req.Faults != nil:
		specs = req.Faults
	default:
		specs = append(specs, scen.Faults...)
		for i, d := range scen.Draws {
			drawn, err := d.Specs(streams.For(fmt.Sprintf("draw-%d", i)), h.opts.Faults)
			if err != nil {
				return nil, nil, fmt.Errorf("scenario %s: draws[%d]: %w", scen.Name, i, err)
			}
			specs = append(specs, drawn...)
		}
	}
	for _, s := range specs {
		if _, err := h.opts.Faults.Build(s); err != nil {
			return nil, nil, err
		}
	}
	instances, err := chaos.Expand(specs, scen.Limits.Horizon, streams.For("schedule"))
	if err != nil {
		return nil, nil, err
	}
	written := []string{}
	for _, s := range specs {
		written = append(written, s.String())
	}
	return written, instances, h.check(instances)
}

func (h *Harness) check(instances []chaos.Instance) error {
	for _, in := range instances {
		if _, err := h.opts.Faults.Build(in.Spec); err != nil {
			return err
		}
	}
	return nil
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

// create records a new run — its header, fault schedule and clock in one
// durable commit, before anything is applied — and returns its id.
func (h *Harness) create(ctx context.Context, req RunRequest) (string, error) {
	scen := req.Scenario
	seed := seedOf(scen, req.Seed)
	if req.ReplayFaults != "" && req.Seed == nil {
		// A replayed schedule keeps its run's seed unless told otherwise.
		if orig, err := h.runRecord(req.ReplayFaults); err == nil {
			seed = orig.Seed
		}
	}
	written, instances, err := h.schedule(req, seed)
	if err != nil {
		return "", err
	}
	timeout, maxAttempts := scen.Limits.Timeout, scen.Limits.MaxAttempts
	if req.Timeout > 0 {
		timeout = req.Timeout
	}
	if req.MaxAttempts > 0 {
		maxAttempts = req.MaxAttempts
	}
	now := time.Now().UTC()
	id, err := newRunID(now)
	if err != nil {
		return "", fmt.Errorf("mint run id: %w", err)
	}
	blob, err := h.j.PutBlob(ctx, scen.Raw)
	if err != nil {
		return "", fmt.Errorf("store scenario: %w", err)
	}
	rec := RunRecord{
		ID: id, Scenario: scen.Name, Source: scen.Source, ScenarioBlob: blob, Agent: req.Agent, Seed: seed, LLM: req.LLM,
		Faults: []string{}, Timeout: Duration(timeout), MaxAttempts: maxAttempts, Status: StatusRunning,
		StartedAt: now, VirtualStart: VirtualEpoch, OwnerPID: os.Getpid(),
	}
	var entries []journal.Entry
	rec.Faults = written
	for i, in := range instances {
		e, err := entry(faultKey(id, i), FaultRecord{Index: i, Spec: in.Spec.String(), From: in.From, Kind: in.Spec.Kind, At: in.Spec.Trigger.String()})
		if err != nil {
			return "", err
		}
		entries = append(entries, e)
	}
	for _, kv := range []struct {
		k []byte
		v any
	}{{runKey(id), rec}, {clockKey(id), ClockRecord{Now: VirtualEpoch}}} {
		e, err := entry(kv.k, kv.v)
		if err != nil {
			return "", err
		}
		entries = append(entries, e)
	}
	if err := h.j.Commit(ctx, entries...); err != nil {
		return "", fmt.Errorf("record run %s: %w", id, err)
	}
	if req.Started != nil {
		req.Started(id)
	}
	h.progress("run %s: scenario %s, seed %d, faults %v", id, scen.Name, seed, rec.Faults)
	return id, nil
}

// Resume continues a run from the journal alone: after Ctrl-C, or after
// the harness itself died. A finished run returns its recorded result.
func (h *Harness) Resume(ctx context.Context, runID string) (*Result, error) {
	rec, err := h.runRecord(runID)
	if err != nil {
		return nil, err
	}
	if rec.Status == StatusFinished && rec.Result != nil {
		return rec.Result, nil
	}
	scen, err := h.scenarioOf(rec)
	if err != nil {
		return nil, err
	}
	agentSpec, err := scen.SelectAgent(rec.Agent)
	if err != nil {
		return nil, err
	}
	plan, err := h.plan(ctx, agentSpec)
	if err != nil {
		return nil, err
	}
	h.progress("resuming run %s after attempt %d", runID, rec.Attempts)
	return h.drive(ctx, runID, plan)
}

// Lookup returns the summary of one run, or ErrRunNotFound.
func (h *Harness) Lookup(runID string) (RunSummary, error) {
	rec, err := h.runRecord(runID)
	if err != nil {
		return RunSummary{}, err
	}
	return h.summary(rec), nil
}

// runRecord reads a run's header; ErrRunNotFound names the newest run.
func (h *Harness) runRecord(runID string) (RunRecord, error) {
	var rec RunRecord
	found, err := get(h.j, runKey(runID), &rec)
	if err != nil {
		return rec, fmt.Errorf("read run %s: %w", runID, err)
	}
	if !found {
		return rec, h.notFound(runID)
	}
	return rec, nil
}

func (h *Harness) notFound(runID string) error {
	runs, _ := h.Runs()
	if len(runs) == 0 {
		return fmt.Errorf("%w %q in state dir %s (it holds no runs; wrong --state?)", ErrRunNotFound, runID, h.state)
	}
	return fmt.Errorf("%w %q in state dir %s (newest: %s; list them with `overnight runs`)", ErrRunNotFound, runID, h.state, runs[0].RunID)
}

func (h *Harness) scenarioOf(rec RunRecord) (*scenarios.Scenario, error) {
	raw, err := h.j.Blob(rec.ScenarioBlob)
	if err != nil {
		return nil, fmt.Errorf("read scenario of run %s: %w", rec.ID, err)
	}
	scen, err := scenarios.Parse(rec.Source, raw)
	if err != nil {
		return nil, fmt.Errorf("scenario of run %s no longer parses: %w", rec.ID, err)
	}
	return scen, nil
}

// plan prepares the image and command every attempt of a run uses.
func (h *Harness) plan(ctx context.Context, a scenarios.AgentSpec) (sandboxPlan, error) {
	initBin, err := h.initBinary()
	if err != nil {
		return sandboxPlan{}, err
	}
	p := sandboxPlan{env: map[string]string{}}
	for k, v := range a.Env {
		p.env[k] = v
	}
	spec := sandbox.ImageSpec{InitBinary: initBin}
	switch {
	case a.Builtin != "":
		if _, ok := agents.Lookup(a.Builtin); !ok {
			return sandboxPlan{}, fmt.Errorf("no built-in agent %q (built-in agents: %v)", a.Builtin, agents.Names())
		}
		p.cmd = append([]string{sandbox.InitPath, "agent", a.Builtin}, a.Args...)
	case a.Binary != "":
		spec.AgentBinary = a.Binary
		p.cmd = append([]string{"/agent"}, a.Args...)
	case a.Image != "":
		// Without args the image's own entrypoint and command run (under
		// the init); with args, they are the whole command.
		spec.BaseImage = a.Image
		p.cmd = append([]string(nil), a.Args...)
	default:
		return sandboxPlan{}, errors.New("the agent has none of builtin, binary or image")
	}
	eng, err := h.engine(ctx)
	if err != nil {
		return sandboxPlan{}, err
	}
	img, err := eng.EnsureImage(ctx, spec)
	if err != nil {
		return sandboxPlan{}, err
	}
	p.image = img
	return p, nil
}

// drive runs a recorded run to its end: world, gateway, supervisor, verdict.
func (h *Harness) drive(ctx context.Context, runID string, plan sandboxPlan) (*Result, error) {
	eng, err := h.engine(ctx)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.live[runID] {
		h.mu.Unlock()
		return nil, fmt.Errorf("run %s is already being driven by this process", runID)
	}
	h.mu.Unlock()
	// Whatever dead runs left behind goes first — this run's own orphan of
	// an earlier, crashed harness included: its logs are kept, then it is
	// removed.
	if _, err := h.reap(ctx, eng); err != nil {
		h.log.Warn("reap", "err", err)
	}
	h.mu.Lock()
	h.live[runID] = true
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.live, runID)
		h.mu.Unlock()
	}()
	r, err := h.load(ctx, runID)
	if err != nil {
		return nil, err
	}
	started := time.Now()

	dir, cleanupDir, err := sandbox.NewSocketDir()
	if err != nil {
		return nil, fmt.Errorf("make the gateway socket dir: %w", err)
	}
	defer func() {
		if err := cleanupDir(); err != nil {
			h.log.Warn("remove socket dir", "dir", dir, "err", err)
		}
	}()
	link, err := chaos.ListenLink(filepath.Join(dir, gateway.SocketName), chaos.LinkOptions{
		Rand: chaos.NewStreams(r.rec.Seed).For("link"), Logger: h.log,
	})
	if err != nil {
		return nil, err
	}
	srv := gateway.New(r, h.log)
	go func() {
		if err := srv.Serve(link); err != nil {
			h.log.Error("gateway stopped", "err", err)
		}
	}()
	defer srv.Close()
	r.mu.Lock()
	r.link = link
	// Faults that were active when an earlier harness stopped (or when
	// Ctrl-C undid them) act again on this process's link, effect path and
	// LLM path until they heal on schedule.
	for _, f := range r.faults {
		if target := r.targetOf(f.spec.Kind); f.active && target != "" {
			r.stacks[target] = append(r.stacks[target], f)
		}
	}
	for _, target := range []string{"link", "effect", "llm"} {
		if f := r.top(target); f != nil {
			r.resumeEvidence(f)
			r.firing = f
			if err := f.fault.Inject(ctx, runTarget{r}); err != nil {
				r.log.Warn("re-apply fault", "fault", f.rec.Spec, "err", err)
			}
			r.firing = nil
		}
	}
	r.mu.Unlock()
	idleCtx, stopIdle := context.WithCancel(context.WithoutCancel(ctx))
	go r.idleLoop(idleCtx)
	defer func() {
		stopIdle()
		close(r.stopCh)
		// No fault outlives the run's drive: a paused container is thawed,
		// a dropped link healed, even on Ctrl-C (where the faults stay
		// active in the journal, for a resume).
		r.healAll(context.WithoutCancel(ctx), false)
	}()

	if r.scen.Sandbox.Network == "internal" {
		name, err := eng.EnsureNetwork(ctx, runID)
		if err != nil {
			return nil, err
		}
		r.network = name
	}
	r.mu.Lock()
	r.rec.Status, r.rec.OwnerPID, r.rec.SocketDir = StatusRunning, os.Getpid(), dir
	rec := r.rec
	r.mu.Unlock()
	if err := put(ctx, h.j, runKey(runID), rec); err != nil {
		return nil, fmt.Errorf("record run %s: %w", runID, err)
	}

	// The wall-clock limit applies to each invocation (run, or resume).
	rctx, cancel := context.WithTimeoutCause(ctx, time.Duration(rec.Timeout), errWallTimeout)
	defer cancel()
	end, err := r.supervise(rctx, plan)
	if err != nil {
		status := StatusInterrupted
		r.mu.Lock()
		r.ended = true
		r.rec.Status, r.rec.Reason = status, err.Error()
		rec := r.rec
		r.mu.Unlock()
		if perr := put(context.WithoutCancel(ctx), h.j, runKey(runID), rec); perr != nil {
			err = errors.Join(err, perr)
		}
		h.progress("run %s interrupted after %s; resume with: overnight resume %s", runID, time.Since(started).Round(time.Millisecond), runID)
		return nil, err
	}
	r.healAll(ctx, true)
	res, err := r.finish(context.WithoutCancel(ctx), end)
	if err != nil {
		return nil, err
	}
	rmCtx, rmCancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer rmCancel()
	if err := eng.RemoveVolume(rmCtx, workspaceVolume(runID)); err != nil {
		h.log.Warn("remove workspace volume", "run", runID, "err", err)
	}
	if r.network != "" {
		r.removals.Wait() // the network goes once no container is on it
		if err := eng.RemoveNetwork(rmCtx, r.network); err != nil {
			h.log.Warn("remove sandbox network", "run", runID, "err", err)
		}
	}
	return res, nil
}

// load rebuilds a run's live state from the journal.
func (h *Harness) load(ctx context.Context, runID string) (*run, error) {
	rec, err := h.runRecord(runID)
	if err != nil {
		return nil, err
	}
	scen, err := h.scenarioOf(rec)
	if err != nil {
		return nil, err
	}
	task, err := json.Marshal(scen.Task)
	if err != nil {
		return nil, fmt.Errorf("encode task: %w", err)
	}
	w, err := h.opts.Worlds.Open(ctx, scen.World.Name, h.j, worldPrefix(runID), scen.World.Options)
	if err != nil {
		return nil, err
	}
	r := &run{
		h: h, j: h.j, log: h.log.With("run", runID), scen: scen, world: w, task: task, rec: rec,
		tokens: map[string]int{}, effects: map[string]*EffectRecord{}, killedBy: map[int]string{},
		doneCh: make(chan struct{}), horizonCh: make(chan struct{}), stopCh: make(chan struct{}),
		seen: map[int]bool{}, killIssued: map[int]time.Time{}, dying: map[int]time.Time{}, dead: map[int]chan struct{}{}, stacks: map[string][]*faultState{},
		clock: rec.VirtualStart, horizon: rec.VirtualStart.Add(scen.Limits.Horizon),
	}
	if r.attempts, err = scan[AttemptRecord](h.j, runPrefix(prefixAttempt, runID)); err != nil {
		return nil, fmt.Errorf("read attempts of run %s: %w", runID, err)
	}
	// Every earlier attempt is fenced from the moment the run is loaded:
	// none owns it again, and the next attempt gets a new token.
	for _, a := range r.attempts {
		r.tokens[a.TokenHash] = a.N
	}
	if _, v, err := h.j.Last(runPrefix(prefixCheckpoint, runID)); err == nil {
		if err := json.Unmarshal(v, &r.cp); err != nil {
			return nil, fmt.Errorf("decode last checkpoint of run %s: %w", runID, err)
		}
	} else if !errors.Is(err, journal.ErrNotFound) {
		return nil, fmt.Errorf("read last checkpoint of run %s: %w", runID, err)
	}
	if _, v, err := h.j.Last(runPrefix(prefixEvent, runID)); err == nil {
		var ev EventRecord
		if err := json.Unmarshal(v, &ev); err != nil {
			return nil, fmt.Errorf("decode last event of run %s: %w", runID, err)
		}
		r.eventSeq = ev.Seq
	} else if !errors.Is(err, journal.ErrNotFound) {
		return nil, fmt.Errorf("read last event of run %s: %w", runID, err)
	}
	effects, err := scan[EffectRecord](h.j, runPrefix(prefixEffect, runID))
	if err != nil {
		return nil, fmt.Errorf("read effects of run %s: %w", runID, err)
	}
	for i := range effects {
		e := &effects[i]
		r.effects[e.ID] = e
		r.effectOrder = max(r.effectOrder, e.Order)
		r.intents += max(e.Intents, e.Executions)
		if e.Unkeyed {
			r.unkeyed++
		}
	}
	var clk ClockRecord
	if ok, err := get(h.j, clockKey(runID), &clk); err != nil {
		return nil, fmt.Errorf("read clock of run %s: %w", runID, err)
	} else if ok {
		r.clock = clk.Now
	}
	if !r.clock.Before(r.horizon) {
		close(r.horizonCh)
	}
	var done DoneRecord
	if ok, err := get(h.j, doneKey(runID), &done); err != nil {
		return nil, fmt.Errorf("read done of run %s: %w", runID, err)
	} else if ok {
		r.done = &done
		close(r.doneCh)
	}
	faults, err := scan[FaultRecord](h.j, runPrefix(prefixFault, runID))
	if err != nil {
		return nil, fmt.Errorf("read faults of run %s: %w", runID, err)
	}
	if r.faults, err = faultsOf(h.opts.Faults, faults); err != nil {
		return nil, fmt.Errorf("faults of run %s: %w", runID, err)
	}
	// A stop fault's down window still running when the harness stopped
	// holds the next attempt, as it would have.
	for _, f := range r.faults {
		if f.active && f.spec.Kind == "stop" && f.healAt.After(r.downUntil) {
			r.downUntil = f.healAt
		}
	}
	mc, err := h.model(scen, rec.LLM)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", runID, err)
	}
	if err := h.loadLLM(r, mc.spec, mc.model, mc.prices, mc.budget, mc.replay, mc.replayRun); err != nil {
		return nil, err
	}
	// Effects in doubt (an intent without a result) are reconciled with the
	// world before any agent may retry them.
	keys := make([]string, 0, len(r.effects))
	for k := range r.effects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := r.reconcile(ctx, r.effects[k]); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// RunSummary is one line of Runs.
type RunSummary struct {
	RunID     string    `json:"run_id"`
	Scenario  string    `json:"scenario"`
	Seed      int64     `json:"seed"`
	Status    string    `json:"status"`
	Verdict   string    `json:"verdict"`
	StartedAt time.Time `json:"started_at"`
	Attempts  int       `json:"attempts"`
	Reason    string    `json:"reason,omitempty"`
}

// Runs lists the state dir's runs, newest first. A run recorded as running
// that no process drives (its harness died) is reported as interrupted.
func (h *Harness) Runs() ([]RunSummary, error) {
	recs, err := scan[RunRecord](h.j, []byte(prefixRun))
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	out := make([]RunSummary, 0, len(recs))
	for _, r := range recs {
		out = append(out, h.summary(r))
	}
	sort.SliceStable(out, func(i, k int) bool {
		if !out[i].StartedAt.Equal(out[k].StartedAt) {
			return out[i].StartedAt.After(out[k].StartedAt)
		}
		return out[i].RunID > out[k].RunID
	})
	return out, nil
}

func (h *Harness) summary(r RunRecord) RunSummary {
	status := r.Status
	if status == StatusRunning && !h.isLive(r.ID) {
		status = StatusInterrupted
	}
	return RunSummary{RunID: r.ID, Scenario: r.Scenario, Seed: r.Seed, Status: status,
		Verdict: r.Verdict, StartedAt: r.StartedAt, Attempts: r.Attempts, Reason: r.Reason}
}

// Attempts returns a run's attempt records: containers, how each ended,
// and the timings of fault kills and recoveries.
func (h *Harness) Attempts(runID string) ([]AttemptRecord, error) {
	if _, err := h.runRecord(runID); err != nil {
		return nil, err
	}
	return scan[AttemptRecord](h.j, runPrefix(prefixAttempt, runID))
}

// AttemptLog is one attempt's kept output.
type AttemptLog struct {
	Attempt   int       `json:"attempt"`
	Container string    `json:"container"`
	End       string    `json:"end"`
	ExitCode  *int      `json:"exit_code,omitempty"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	Stdout    string    `json:"stdout"`
	Stderr    string    `json:"stderr"`
}

// Logs returns each attempt's stdout and stderr, kept before its container
// was removed.
func (h *Harness) Logs(runID string) ([]AttemptLog, error) {
	if _, err := h.runRecord(runID); err != nil {
		return nil, err
	}
	atts, err := scan[AttemptRecord](h.j, runPrefix(prefixAttempt, runID))
	if err != nil {
		return nil, err
	}
	out := make([]AttemptLog, 0, len(atts))
	for _, a := range atts {
		l := AttemptLog{Attempt: a.N, Container: a.Container, End: a.End, ExitCode: a.ExitCode, StartedAt: a.StartedAt, EndedAt: a.EndedAt}
		for _, p := range []struct {
			hash string
			dst  *string
		}{{a.StdoutBlob, &l.Stdout}, {a.StderrBlob, &l.Stderr}} {
			if p.hash == "" {
				continue
			}
			b, err := h.j.Blob(p.hash)
			if err != nil {
				return nil, fmt.Errorf("read logs of attempt %d: %w", a.N, err)
			}
			*p.dst = string(b)
		}
		out = append(out, l)
	}
	return out, nil
}
