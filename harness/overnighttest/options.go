package overnighttest

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/suite"
	"github.com/overnight-dev/overnight/reflect"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/scenarios"
)

// ErrHarnessCrash is returned for a schedule with a fault that ends the
// harness (harness-crash): in a test the harness is the test process.
var ErrHarnessCrash = errors.New("a harness-crash fault would end this test process")

// Option is one setting of Run or RunTrials: a run flag of `overnight run`
// or where the harness runs. An option given a bad value makes Run and
// RunTrials return its error before anything runs.
type Option func(*config) error

// config is the options after they are applied. Zero values are the
// defaults each option documents.
type config struct {
	seed        *int64
	faults      []chaos.Spec // nil: the scenario's own; empty: none
	random      int
	kinds       []string // ChaosRandom's kinds; nil: the scenario's reach.kinds
	agent       string
	llm         string
	timeout     time.Duration
	maxAttempts int
	lessons     string
	stateDir    string
	initBinary  string
	backend     sandbox.Type // zero: harness.Open's default (Docker)
	progress    io.Writer
	logger      *slog.Logger
	parallel    int
}

func configure(opts []Option) (*config, error) {
	c := &config{lessons: reflect.LessonsNone, logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	if c.faults != nil && c.random > 0 {
		return nil, fmt.Errorf("%w: Faults and ChaosRandom each give the whole schedule: use one", harness.ErrFaultSources)
	}
	return c, nil
}

// Seed drives every random choice of the run (--seed). Default: the
// scenario's seed, else 1. RunTrials takes its seeds as an argument and
// refuses this option.
func Seed(seed int64) Option {
	return func(c *config) error { c.seed = &seed; return nil }
}

// Faults replaces the scenario's fault list (--fault, repeatable): each
// KIND[:ARG]@TRIGGER[/DURATION], e.g. "kill@step:3". Faults() with none
// runs without faults. Default: the scenario's own list.
func Faults(specs ...string) Option {
	return func(c *config) error {
		c.faults = []chaos.Spec{}
		for _, t := range specs {
			s, err := chaos.ParseSpec(t)
			if err != nil {
				return fmt.Errorf("Faults: %w", err)
			}
			c.faults = append(c.faults, s)
		}
		return nil
	}
}

// ChaosRandom draws count faults (1..100) from each run's seed instead of
// the scenario's list (--chaos random --chaos-faults count): kinds and
// triggers the run can reach (the scenario's reach: block), never
// harness-crash. kinds, when given, are the only kinds drawn
// (--chaos-kinds KIND,...), overriding the scenario's reach.kinds.
// Default: off.
func ChaosRandom(count int, kinds ...string) Option {
	return func(c *config) error {
		if count < 1 || count > 100 {
			return fmt.Errorf("ChaosRandom(%d): want 1..100 faults", count)
		}
		c.random, c.kinds = count, kinds
		return nil
	}
}

// Agent runs the scenario's agent variant name (--agent), e.g. "naive".
// Default: the scenario's own agent.
func Agent(name string) Option {
	return func(c *config) error { c.agent = name; return nil }
}

// LLM picks the model behind the gateway's LLM endpoint (--llm):
// "scripted" (the test double), "openai:MODEL", "anthropic:MODEL",
// "ollama:MODEL". Default: the scenario's llm.model.
func LLM(model string) Option {
	return func(c *config) error { c.llm = model; return nil }
}

// Timeout overrides the scenario's wall-clock limit of a run (--timeout).
// Default: the scenario's.
func Timeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("Timeout(%s): want a positive duration", d)
		}
		c.timeout = d
		return nil
	}
}

// MaxAttempts overrides the scenario's attempts before a run fails as a
// crash loop (--max-attempts). Default: the scenario's.
func MaxAttempts(n int) Option {
	return func(c *config) error {
		if n < 1 || n > scenarios.MaxAttemptsLimit {
			return fmt.Errorf("MaxAttempts(%d): want 1..%d", n, scenarios.MaxAttemptsLimit)
		}
		c.maxAttempts = n
		return nil
	}
}

// Lessons is the lessons mode of a scenario with reflection (--lessons):
// reflect.LessonsNone (the default here, so that runs stay independent)
// or reflect.LessonsMemory (the lessons kept in the state dir from earlier
// runs; useful with StateDir).
func Lessons(mode string) Option {
	return func(c *config) error {
		if mode != reflect.LessonsNone && mode != reflect.LessonsMemory {
			return fmt.Errorf("Lessons(%q): want %s or %s", mode, reflect.LessonsNone, reflect.LessonsMemory)
		}
		c.lessons = mode
		return nil
	}
}

// StateDir runs against the journal in dir (created if needed) and keeps
// it, so that `overnight --state DIR report RUN` or `serve` can show the
// runs afterwards; the reproducing commands then name it. One process owns
// a state dir at a time: runs that go at once need state dirs of their
// own. Default: a temporary state dir, removed after the run with every
// container, volume and network labelled with it.
func StateDir(dir string) Option {
	return func(c *config) error { c.stateDir = dir; return nil }
}

// InitBinary is the static overnight binary the sandboxes run as PID 1.
// Default: the one BuildInitBinary built, else $OVERNIGHT_INIT_BINARY.
func InitBinary(path string) Option {
	return func(c *config) error { c.initBinary = path; return nil }
}

// Sandbox is the sandbox backend the runs start their sandboxes on.
// Default: harness.Open's (Docker, the engine the environment names).
func Sandbox(t sandbox.Type) Option {
	return func(c *config) error { c.backend = t; return nil }
}

// Progress receives one line per notable event (Run: attempts and faults;
// RunTrials: each run that did not pass, and the tally every 10 s), e.g.
// GinkgoWriter. Default: none.
func Progress(w io.Writer) Option {
	return func(c *config) error { c.progress = w; return nil }
}

// Logger receives the harness's diagnostics. Default: discard.
func Logger(l *slog.Logger) Option {
	return func(c *config) error {
		if l != nil {
			c.logger = l
		}
		return nil
	}
}

// Parallel is how many of RunTrials' runs go at once. Default:
// suite.DefaultParallel() (two per CPU, at most 32). Run ignores it.
func Parallel(n int) Option {
	return func(c *config) error {
		if n < 1 || n > suite.MaxParallel {
			return fmt.Errorf("Parallel(%d): want 1..%d", n, suite.MaxParallel)
		}
		c.parallel = n
		return nil
	}
}

// checkSchedule refuses a schedule that would end the test process: a
// fault given, or the scenario's own list and draws when none is given.
// --chaos random never draws such a kind.
func (c *config) checkSchedule(scen *scenarios.Scenario) error {
	catalog := chaos.Default()
	ends := func(kind string) bool {
		k, ok := catalog.Lookup(kind)
		return ok && k.EndsHarness
	}
	specs := c.faults
	if specs == nil && c.random == 0 {
		specs = scen.Faults
		for _, d := range scen.Draws {
			for _, kind := range d.Kinds {
				if ends(kind) {
					return fmt.Errorf("%w: scenario %s draws %s faults; replace its schedule with Faults(...) or ChaosRandom(n), and test a harness crash with the overnight CLI as a child process", ErrHarnessCrash, scen.Name, kind)
				}
			}
		}
	}
	for _, s := range specs {
		if ends(s.Kind) {
			return fmt.Errorf("%w: fault %s; test a harness crash with the overnight CLI as a child process (overnight run ... --fault %s, then overnight resume RUN)", ErrHarnessCrash, s, s)
		}
	}
	return nil
}

// suiteConfig is the options as the run flags of a suite: what every trial
// shares, and what a reproducing command says.
func (c *config) suiteConfig() suite.Config {
	cfg := suite.Config{RandomFaults: c.random, RandomKinds: c.kinds, LLM: c.llm, Timeout: c.timeout, MaxAttempts: c.maxAttempts,
		Extras: map[string]string{reflect.ExtraLessons: c.lessons}}
	if c.faults != nil {
		cfg.Faults = []string{}
		for _, s := range c.faults {
			cfg.Faults = append(cfg.Faults, s.String())
		}
	}
	return cfg
}

// request is the harness request of one run of scen.
func (c *config) request(scen *scenarios.Scenario) harness.RunRequest {
	return harness.RunRequest{Scenario: scen, Agent: c.agent, Seed: c.seed, Faults: c.faults, RandomFaults: c.random, RandomKinds: c.kinds,
		LLM: c.llm, Timeout: c.timeout, MaxAttempts: c.maxAttempts, Extras: map[string]string{reflect.ExtraLessons: c.lessons}}
}
