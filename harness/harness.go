// Package harness is overnight's orchestrator and the Go API a user reaches
// for first: open a Harness on a state dir, run a scenario (built-in by
// name, a file, or Go values) in a sandbox under faults, and read the
// verdict and the whole history of the run.
//
//	h, _ := harness.Open(ctx, harness.Options{StateDir: dir, InitBinary: bin})
//	defer h.Close()
//	scen, _ := harness.LoadScenario("deploy")
//	res, _ := h.Run(ctx, harness.RunRequest{Scenario: scen, Faults: faults})
//	run, _ := h.History().Load(ctx, res.RunID)
//
// Durable state lives in one Badger journal per state dir (harness/journal)
// whose schema harness/history owns; nothing is acknowledged to an agent
// before it is synced there, so the harness itself may die at any instant
// and Resume continues from the journal alone.
//
// A live run is split into owned parts, one file each:
//
//	run.go         the gateway's backend and the hub wiring the parts
//	effects.go     the effect path: admit → intent → gate → toxic → world → result
//	faults.go      the fault engine: fire, heal, stacking, evidence of "met"
//	target.go      what faults act on (chaos.Target), backend calls outside the lock
//	clock.go       the virtual clock: discrete-event advance, idle jump, down windows
//	supervisor.go  attempts: sandboxes, tokens, back-off, the next attempt
//	backend.go     the sandbox backend (only through the sandbox contract), warm.go
//	janitor.go     reaping dead runs' leftovers, in the background
//	llmpath.go     the LLM path: endpoint, budget, recording (llmreplay.go: replay)
//	judge.go       the verdict, from history and the invariant registry
//	hooks.go       the extension points: gate, lessons, failures, the next attempt
//	isolate.go     one attempt re-run in isolation against a shadow world
//
// The CLI (cmd/overnight) is a thin layer over this package.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/fleet"
	"github.com/overnight-dev/overnight/scenarios/invariant"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// DefaultStateDir is the state dir used when Options.StateDir is empty.
const DefaultStateDir = ".overnight"

// VirtualEpoch is where every run's virtual clock starts, so that two
// honest runs of the same scenario and seed see the same times.
var VirtualEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ErrRunNotFound is returned for a run id the state dir does not hold.
var ErrRunNotFound = history.ErrRunNotFound

// Run statuses (history.StatusRunning, ...).
const (
	StatusRunning     = history.StatusRunning
	StatusInterrupted = history.StatusInterrupted
	StatusFinished    = history.StatusFinished
)

// Records of a run, as the history reader returns them.
type (
	RunRecord     = history.RunRecord
	AttemptRecord = history.AttemptRecord
	AttemptLog    = history.AttemptLog
)

// Options configure a Harness. Zero values take the documented defaults.
type Options struct {
	// StateDir holds the journal. Default DefaultStateDir (./.overnight).
	StateDir string
	// InitBinary is the static (CGO_ENABLED=0) linux binary injected into
	// every sandbox as PID 1; built-in agents run from it too. It is the
	// slim overnight-sandbox (cmd/overnight-sandbox) or the full overnight
	// CLI: both serve the sandbox side the same way, the slim one starts
	// in a third of the time. Default: the overnight-sandbox beside the
	// running executable when it was built with it (BuildID), else the
	// running executable itself — right for the overnight CLI; a Go
	// program or test that uses this package builds one with
	// BuildInitBinary.
	InitBinary string
	// BuildID is the id linked into the running executable and the
	// overnight-sandbox built with it (the Makefile's -X main.buildID),
	// which InitBinary's default asks the sibling for. Default "": no
	// sibling is trusted, the running executable is injected.
	BuildID string
	// Sandbox is the sandbox backend runs start their sandboxes on, opened
	// for the state dir on first use (commands that start no sandbox never
	// open it). Default: Docker (sandbox/docker's Type: the engine the
	// environment names). A Docker client of the caller's own:
	// docker.Using(cli).
	Sandbox sandbox.Type
	// Logger receives diagnostics. Default: discard.
	Logger *slog.Logger
	// Progress receives one human-readable line per notable event of a
	// run (attempts, faults). Default: none.
	Progress io.Writer
	// Worlds are the simulated worlds scenarios may name. Default: cloud.
	Worlds *world.Registry
	// Faults is the fault catalog. Default: chaos.Default().
	Faults *chaos.Registry
	// Invariants are the invariants scenarios may list, and judge every
	// run, isolated runs (replays, verifications) included. Default:
	// invariant.Default(), the built-ins; an invariant of your own is
	// registered in a registry made by invariant.Default() (or
	// invariant.NewRegistry(), for none of the built-ins) and given here.
	// A scenario listing a name the registry lacks is refused before its
	// run starts (see Check).
	Invariants *invariant.Registry
	// Extension gives each run its hooks (the gate, lessons, failure and
	// attempt policies). Default: none, every hook at its default.
	Extension Extension
	// Crash is what the harness-crash fault calls. Default: SIGKILL this
	// process. Only tests that cannot afford to die override it.
	Crash func()
	// LLMEnv is where provider keys and URLs are read (OPENAI_API_KEY,
	// ANTHROPIC_API_KEY, OLLAMA_HOST, ...). Default: os.Getenv — the
	// harness's own environment; the sandbox's is built from scratch and
	// never inherits them.
	LLMEnv func(string) string
	// Env is where the harness reads its own environment for the
	// credentials of a scenario's HTTP APIs (http[].credentials.env).
	// Default: os.Getenv. The sandbox's environment is built from scratch
	// and never holds them.
	Env func(string) string
	// LLMHTTPClient carries provider calls. Default: http.DefaultClient.
	LLMHTTPClient *http.Client
	// BuiltinAgents names the built-in agents the init binary serves
	// (`overnight agent NAME`), so that a scenario naming any other is
	// refused before a run starts. Default nil: not checked here (an
	// unknown name then fails the run's first attempt). The overnight CLI
	// passes agents.Names() (scenarios/agents), which are the agents of
	// every binary BuildInitBinary makes.
	BuiltinAgents []string
	// TracerProvider receives the harness's spans: runs, attempts,
	// effects and LLM calls (see SpanRun). Default: the global provider
	// (otel.GetTracerProvider()), a no-op unless the program set one; the
	// overnight CLI sets one that exports over OTLP when the standard
	// OTEL_EXPORTER_OTLP_* variables are set.
	TracerProvider trace.TracerProvider
	// Standby says when a run starts its next attempt's sandbox ahead, so
	// that a dead agent is resumed in one round trip instead of a
	// container's start (sandbox.Standbys; a backend without it starts
	// every attempt cold). Default StandbyAuto: where it pays.
	Standby StandbyPolicy
	// standbyAhead, when > 0, is how many attempts ahead a run with
	// standbys keeps them started, whatever its schedule (tests and
	// benchmarks; see run.standbysAhead).
	standbyAhead int
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
	opts    Options
	j       *journal.Journal
	w       *history.Writer
	history *history.Reader
	log     *slog.Logger
	state   string // absolute state dir

	mu      sync.Mutex
	sandbox sandbox.Backend // opened on first use (see backend)
	janitor *janitor        // reaps dead runs' leftovers; started with the backend
	live    map[string]bool
	procs   *worldProcs      // command worlds started for runs (nil: none yet)
	images  *imageWorlds     // image worlds started for runs (nil: none yet)
	shadows *shadowUpstreams // HTTP APIs' scratch upstreams started for isolated runs (nil: none yet)
	mcp     *mcpServers      // MCP servers connected (stdio ones started) for runs (nil: none yet)

	// reserved are isolated runs reserved ahead with their standbys
	// (StandbyIsolated), until their drive takes them or they are released.
	reserved map[string]*IsolatedStandby

	control *controlServer // the state dir's control socket (nil: none)
	// index keeps the runs' headers for QueryRuns, told by w of every run
	// record written (built on the first query).
	index *history.RunIndex
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
		opts.Worlds = DefaultWorlds()
	}
	if opts.Invariants == nil {
		opts.Invariants = invariant.Default()
	}
	if opts.Sandbox.Open == nil {
		opts.Sandbox = DefaultBackend()
	}
	if opts.Faults == nil {
		opts.Faults = chaos.Default()
	}
	if opts.Crash == nil {
		opts.Crash = func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	}
	if opts.Existing {
		if err := requireJournal(abs); err != nil {
			return nil, err
		}
	}
	j, err := journal.Open(abs, journal.Options{Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	h := &Harness{opts: opts, j: j, w: history.NewWriter(j), history: history.NewReader(j, opts.Worlds),
		log: opts.Logger, state: abs, live: map[string]bool{}, reserved: map[string]*IsolatedStandby{}, index: history.NewRunIndex()}
	h.w.Track(h.index)
	h.history.SetRemote(func(ctx context.Context, rec history.RunRecord, scen *scenarios.Scenario) (world.World, error) {
		wr := h.w
		if rec.Isolated != nil {
			wr = h.w.Scratch()
		}
		store, prefix := wr.WorldStore(rec.ID)
		return h.openRunWorld(ctx, rec, scen, store, prefix)
	})
	h.control = h.serveControl()
	return h, nil
}

// DefaultWorlds returns a registry of the worlds this version ships:
// cloud and fleet.
func DefaultWorlds() *world.Registry {
	r := world.NewRegistry()
	cloud.Register(r)
	fleet.Register(r)
	return r
}

// requireJournal refuses a state dir that holds no journal.
func requireJournal(abs string) error {
	if _, err := os.Stat(filepath.Join(abs, "journal")); err != nil {
		return fmt.Errorf("%w %s (it holds no journal; wrong --state? runs live in the state dir `overnight run` used)", ErrNoStateDir, abs)
	}
	return nil
}

// Close releases the state dir. Runs must have returned first.
func (h *Harness) Close() error {
	h.control.close()
	h.closeBackend()
	h.stopWorlds()
	return h.j.Close()
}

// StateDir returns the absolute state dir.
func (h *Harness) StateDir() string { return h.state }

// History is the read-only view of the state dir's runs.
func (h *Harness) History() *history.Reader { return h.history }

// Writer writes records of the state dir's runs: for extensions (the
// reflection loop journals its reflections, gate decisions and lessons
// through it), never for a run's own records, which its drive writes.
func (h *Harness) Writer() *history.Writer { return h.w }

// Worlds is the registry of worlds scenarios may name.
func (h *Harness) Worlds() *world.Registry { return h.opts.Worlds }

// Faults is the fault catalog.
func (h *Harness) Faults() *chaos.Registry { return h.opts.Faults }

// Invariants is the registry of invariants scenarios may list.
func (h *Harness) Invariants() *invariant.Registry { return h.opts.Invariants }

// Progressf prints one line for a person watching the harness (on
// Options.Progress): for extensions that work alongside a run.
func (h *Harness) Progressf(format string, args ...any) { h.progress(format, args...) }

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

// initBinary is the binary injected into sandboxes: Options.InitBinary,
// else the running executable's build-mate (see InitBinaryBeside).
func (h *Harness) initBinary() (string, error) {
	if h.opts.InitBinary != "" {
		return h.opts.InitBinary, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the overnight binary to inject as the sandbox init: %w", err)
	}
	bin, why := InitBinaryBeside(exe, h.opts.BuildID)
	h.log.Debug("sandbox init binary", "path", bin, "why", why)
	return bin, nil
}
