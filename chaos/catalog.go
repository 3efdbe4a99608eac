package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// PhaseMid is where an effect:N trigger without a phase lands for most
// kinds: after the world executed the effect and before its result is
// journaled — for harness-crash, the hardest point of all. It has no
// syntax of its own: it is what `effect:N` means.
const PhaseMid Phase = "mid"

// Triggers most kinds support.
var (
	anyTrigger   = []TriggerType{TriggerStep, TriggerEffect, TriggerLLM, TriggerTime, TriggerEvery, TriggerRate}
	onceTriggers = []TriggerType{TriggerStep, TriggerEffect, TriggerLLM, TriggerTime}
	llmTriggers  = []TriggerType{TriggerLLM, TriggerStep, TriggerEffect, TriggerTime, TriggerEvery, TriggerRate}
	llmOnly      = []TriggerType{TriggerLLM}
	// A world fault drawn at random lands on an effect, so an effect meets it.
	effectOnly = []TriggerType{TriggerEffect}
)

// Default returns a registry holding every fault kind this version ships.
func Default() *Registry {
	r := NewRegistry()
	for _, k := range append(builtinKinds(), mcpKinds()...) {
		r.Register(k)
	}
	return r
}

// DefaultStopGrace is how long stop waits after SIGTERM before SIGKILL.
const DefaultStopGrace = 10 * time.Second

func builtinKinds() []Kind {
	return []Kind{
		{
			Name: "kill", Group: "process", EndsAttempt: true, Triggers: anyTrigger, Example: "kill@step:3",
			Summary: "SIGKILL the agent's container; the harness starts a new attempt (new container, new token)",
			New:     func(Spec) (Fault, error) { return processFault{op: "kill"}, nil },
			Draw:    noArg,
		},
		{
			Name: "stop", Group: "process", EndsAttempt: true, Triggers: anyTrigger, Example: "stop:5s@t:2d/1h",
			Arg:      "grace before SIGKILL (default 10s)",
			Duration: DurationOptional,
			Summary:  "SIGTERM the agent, SIGKILL after the grace; with /DURATION the agent stays down that long (virtual) before the next attempt",
			New: func(s Spec) (Fault, error) {
				grace := DefaultStopGrace
				if s.Arg != "" {
					g, err := ParseDuration(s.Arg)
					if err != nil || g <= 0 || g > time.Minute {
						return nil, fmt.Errorf("stop grace %q: want a duration in (0, 1m]", s.Arg)
					}
					grace = g
				}
				return processFault{op: "stop", grace: grace, down: s.Duration}, nil
			},
			Draw: func(rng *rand.Rand, r Reach) (string, time.Duration) {
				return "2s", drawDuration(rng, r, 0.5)
			},
		},
		{
			Name: "restart", Group: "process", EndsAttempt: true, Triggers: anyTrigger, Example: "restart@every:1d",
			Summary: "SIGTERM the agent (SIGKILL after 10s) and start a new attempt at once",
			New:     func(Spec) (Fault, error) { return processFault{op: "stop", grace: DefaultStopGrace}, nil },
			Draw:    noArg,
		},
		{
			Name: "pause", Group: "process", Needs: []string{"freeze"}, PerAttempt: true, Triggers: anyTrigger, Example: "pause@t:1d/30m",
			Duration: DurationRequired,
			Summary:  "freeze the agent's container for /DURATION (virtual), then thaw it",
			New:      func(Spec) (Fault, error) { return pauseFault{}, nil },
			Draw:     func(rng *rand.Rand, r Reach) (string, time.Duration) { return "", drawDuration(rng, r, 1) },
		},
		{
			Name: "harness-crash", Group: "process", EndsHarness: true, Triggers: onceTriggers, Example: "harness-crash@effect:2",
			Summary: "the harness SIGKILLs itself at that point (effect:N: after the world acted, before the result is journaled); `overnight resume RUN` continues from the journal alone",
			New:     func(Spec) (Fault, error) { return crashFault{}, nil },
			// Never drawn at random: it ends the process.
		},
		{
			Name: "netdrop", Group: "network", Path: PathLink, Severity: 3, MetBy: MetByLink, Triggers: anyTrigger, Example: "netdrop@t:36h/2h",
			Duration: DurationRequired,
			Summary:  "reset the agent's live connections to the gateway and refuse new ones for /DURATION",
			New:      func(Spec) (Fault, error) { return linkFault{op: "drop"}, nil },
			Draw:     func(rng *rand.Rand, r Reach) (string, time.Duration) { return "", drawDuration(rng, r, 1) },
		},
		{
			Name: "blackhole", Group: "network", Path: PathLink, Severity: 2, MetBy: MetByLink, Triggers: anyTrigger, Example: "blackhole@t:1d/1h",
			Duration: DurationRequired,
			Summary:  "accept the agent's connections and never answer (each is reset after at most 2s of real time) for /DURATION",
			New:      func(Spec) (Fault, error) { return linkFault{op: "blackhole"}, nil },
			Draw:     func(rng *rand.Rand, r Reach) (string, time.Duration) { return "", drawDuration(rng, r, 1) },
		},
		{
			Name: "latency", Group: "network", Path: PathLink, Severity: 1, MetBy: MetByLink, Triggers: anyTrigger, Example: "latency:200ms+50ms@step:2/1h",
			Arg: "delay[+jitter] per response, real time, at most 2s", ArgNeed: true,
			Duration: DurationRequired,
			Summary:  "delay every gateway response by the delay plus a seeded jitter, for /DURATION",
			New: func(s Spec) (Fault, error) {
				d, j, err := parseLatency(s.Arg)
				if err != nil {
					return nil, err
				}
				return linkFault{op: "latency", delay: d, jitter: j}, nil
			},
			Draw: func(rng *rand.Rand, r Reach) (string, time.Duration) {
				return fmt.Sprintf("%dms+%dms", 20+rng.IntN(80), rng.IntN(30)), drawDuration(rng, r, 1)
			},
		},
		{
			Name: "llm-429", Group: "llm", Path: PathLLM, Severity: 2, MetBy: MetByLLMFollowUp, Triggers: llmTriggers, DrawTriggers: llmOnly, Example: "llm-429:30s@llm:2",
			Arg:      "the Retry-After to send (default 1s)",
			Duration: DurationOptional,
			Summary:  "answer the LLM call with 429 and a Retry-After: the next one, or every one for /DURATION",
			New: func(s Spec) (Fault, error) {
				ra := time.Second
				if s.Arg != "" {
					d, err := ParseDuration(s.Arg)
					if err != nil || d < time.Second || d > time.Hour {
						return nil, fmt.Errorf("llm-429 Retry-After %q: want a duration in [1s, 1h]", s.Arg)
					}
					ra = d
				}
				return llmFault{toxic: LLMToxic{Kind: LLMRateLimit, RetryAfter: ra, Once: s.Duration == 0}}, nil
			},
			Draw: noArg,
		},
		llmKind("llm-5xx", LLMServerError, 2, "llm-5xx@llm:1", "answer the LLM call with 503 (the provider failed): the next one, or every one for /DURATION"),
		llmKind("llm-timeout", LLMTimeout, 2, "llm-timeout@llm:1", "hold the LLM call open (at most 2s of real time), then reset its connection"),
		llmKind("llm-truncated", LLMTruncated, 1, "llm-truncated@llm:1", "cut the model's answer short (half its text, no tool calls, finish_reason \"length\")"),
		llmKind("llm-malformed-tool-call", LLMMalformed, 1, "llm-malformed-tool-call@llm:1", "break the JSON of the arguments of the model's first tool call (the agent must answer the model with the error)"),
		{
			Name: "disconnect", Group: "network", Needs: []string{"link"}, PerAttempt: true, Triggers: anyTrigger, Example: "disconnect@t:1d/2h",
			Duration: DurationRequired,
			Summary:  "detach the agent's container from its sandbox network (a scenario with sandbox.network: internal) through the Docker network API for /DURATION; the gateway link is not affected",
			New:      func(Spec) (Fault, error) { return disconnectFault{}, nil },
		},
		{
			Name: "api-version", Group: "world", MetBy: MetByLaterEffect, DrawTriggers: effectOnly, DefaultPhase: PhaseBefore, Triggers: onceTriggers, Example: "api-version:v2@t:4d",
			Arg: "the world API version to switch to", ArgNeed: true,
			Duration: DurationOptional,
			Summary:  "the world's API moves to another version (renamed fields, removed endpoints answering 410, new required fields, changed auth); with /DURATION it moves back",
			New:      func(s Spec) (Fault, error) { return &versionFault{to: s.Arg}, nil },
			Draw:     func(*rand.Rand, Reach) (string, time.Duration) { return "v2", 0 },
		},
		{
			Name: "dep-update", Group: "world", MetBy: MetByLaterEffect, DefaultPhase: PhaseBefore, Triggers: onceTriggers, Example: "dep-update@t:3d",
			Arg:        "the library to update (default: the world picks the first with a release left)",
			WorldEvent: "world.dep_update",
			Summary:    "a dependency update: a logging library of the world moves to its next release and changes a default (format or level) on the services that use it; a candidate written for the old default stops working. Only a world that declares the world.dep_update event (fleet) takes it",
			New:        func(s Spec) (Fault, error) { return depUpdateFault{library: s.Arg}, nil },
			// Never drawn at random: only a world with the event takes it
			// (a scenario's draws: may list it).
		},
		{
			Name: "effect-5xx", Group: "world", Path: PathEffect, Severity: 2, MetBy: MetByEffectHit, DrawTriggers: effectOnly, Triggers: anyTrigger, Example: "effect-5xx@effect:2",
			Duration:     DurationOptional,
			DefaultPhase: PhaseBefore,
			Summary:      "answer effects with a transient 503 before they reach the world: the next one, or every one for /DURATION",
			New: func(s Spec) (Fault, error) {
				return effectFault{toxic: EffectToxic{Fail5xx: true, Once: s.Duration == 0}}, nil
			},
			Draw: noArg,
		},
		{
			Name: "effect-slow", Group: "world", Path: PathEffect, Severity: 1, MetBy: MetByEffectHit, DrawTriggers: effectOnly, Triggers: anyTrigger, Example: "effect-slow:1s@effect:3",
			Arg: "how long to hold the effect, real time, at most 5s", ArgNeed: true,
			Duration:     DurationOptional,
			DefaultPhase: PhaseBefore,
			Summary:      "hold effects before the world sees them: the next one, or every one for /DURATION",
			New: func(s Spec) (Fault, error) {
				d, err := ParseDuration(s.Arg)
				if err != nil || d <= 0 || d > MaxEffectSlow {
					return nil, fmt.Errorf("effect-slow %q: want a duration in (0, %s]", s.Arg, MaxEffectSlow)
				}
				return effectFault{toxic: EffectToxic{Slow: d, Once: s.Duration == 0}}, nil
			},
			Draw: func(rng *rand.Rand, r Reach) (string, time.Duration) {
				return fmt.Sprintf("%dms", 50+rng.IntN(200)), 0
			},
		},
		{
			Name: "world-crash", Group: "world", StartedWorld: true, Triggers: onceTriggers, Example: "world-crash@effect:2",
			Summary: "SIGKILL the run's command or image world; it is started again on its data when next reached. " +
				"At effect:N (after the world acted) its answer is lost: the effect is in doubt and reconciled by lookup on the agent's retry; " +
				"at effect:N:before the effect never reaches it: lookup finds nothing (not_executed) and the retry runs it",
			New: func(Spec) (Fault, error) { return worldCrashFault{}, nil },
			// Never drawn at random: only a scenario whose world the
			// harness starts can take it.
		},
		{
			Name: "clock-jump", Group: "time", Triggers: anyTrigger, Example: "clock-jump:6h@t:2d",
			Arg: "how far virtual time leaps forward", ArgNeed: true,
			Summary: "virtual time leaps forward; whatever was scheduled in between fires on the way",
			New: func(s Spec) (Fault, error) {
				d, err := ParseDuration(s.Arg)
				if err != nil || d <= 0 {
					return nil, fmt.Errorf("clock-jump %q: want a positive duration", s.Arg)
				}
				return clockFault{by: d}, nil
			},
			Draw: func(rng *rand.Rand, r Reach) (string, time.Duration) {
				return FormatDuration(time.Duration(1+rng.IntN(12)) * time.Hour), 0
			},
		},
	}
}

func noArg(*rand.Rand, Reach) (string, time.Duration) { return "", 0 }

// drawDuration draws a fault duration: up to frac of a tenth of the run's
// virtual span, at least a minute, in whole minutes.
func drawDuration(rng *rand.Rand, r Reach, frac float64) time.Duration {
	span := time.Duration(float64(r.Virtual) / 10 * frac)
	if span < 10*time.Minute {
		span = 10 * time.Minute
	}
	return time.Duration(1+rng.Int64N(int64(span/time.Minute))) * time.Minute
}

// parseLatency parses "200ms" or "200ms+50ms".
func parseLatency(arg string) (d, jitter time.Duration, err error) {
	ds, js, hasJ := strings.Cut(arg, "+")
	if d, err = ParseDuration(ds); err != nil || d <= 0 || d > 2*time.Second {
		return 0, 0, fmt.Errorf("latency %q: want DELAY[+JITTER] with a delay in (0, 2s]", arg)
	}
	if hasJ {
		if jitter, err = ParseDuration(js); err != nil || jitter > 2*time.Second {
			return 0, 0, fmt.Errorf("latency %q: the jitter after + must be a duration of at most 2s", arg)
		}
	}
	return d, jitter, nil
}

type processFault struct {
	op          string
	grace, down time.Duration
}

func (f processFault) Inject(ctx context.Context, t Target) error {
	if f.op == "kill" {
		return t.KillAgent(ctx)
	}
	return t.StopAgent(ctx, f.grace, f.down)
}

type pauseFault struct{}

func (pauseFault) Inject(ctx context.Context, t Target) error { return t.PauseAgent(ctx) }
func (pauseFault) Undo(ctx context.Context, t Target) error   { return t.UnpauseAgent(ctx) }

type crashFault struct{}

func (crashFault) Inject(ctx context.Context, t Target) error { return t.CrashHarness(ctx) }

type linkFault struct {
	op            string
	delay, jitter time.Duration
}

func (f linkFault) Inject(ctx context.Context, t Target) error {
	switch f.op {
	case "drop":
		t.Drop()
	case "blackhole":
		t.Blackhole()
	default:
		t.SetLatency(f.delay, f.jitter)
	}
	return nil
}

func (linkFault) Undo(ctx context.Context, t Target) error {
	t.Heal()
	return nil
}

type versionFault struct {
	to, from string
}

func (f *versionFault) Inject(ctx context.Context, t Target) error {
	prev, err := t.SetAPIVersion(ctx, f.to)
	f.from = prev
	return err
}

// State implements Stateful: the version to return to.
func (f *versionFault) State() string { return f.from }

// Restore implements Stateful.
func (f *versionFault) Restore(state string) { f.from = state }

func (f *versionFault) Undo(ctx context.Context, t Target) error {
	if f.from == "" {
		return nil
	}
	_, err := t.SetAPIVersion(ctx, f.from)
	return err
}

type depUpdateFault struct{ library string }

func (f depUpdateFault) Inject(ctx context.Context, t Target) error {
	var args json.RawMessage
	if f.library != "" {
		args, _ = json.Marshal(map[string]string{"library": f.library})
	}
	_, err := t.FireWorldEvent(ctx, "world.dep_update", args)
	return err
}

type effectFault struct{ toxic EffectToxic }

func (f effectFault) Inject(ctx context.Context, t Target) error {
	t.SetEffectToxic(f.toxic)
	return nil
}

func (f effectFault) Undo(ctx context.Context, t Target) error {
	t.SetEffectToxic(EffectToxic{})
	return nil
}

type worldCrashFault struct{}

func (worldCrashFault) Inject(ctx context.Context, t Target) error { return t.CrashWorld(ctx) }

type clockFault struct{ by time.Duration }

func (f clockFault) Inject(ctx context.Context, t Target) error { return t.Jump(ctx, f.by) }

type llmFault struct{ toxic LLMToxic }

func (f llmFault) Inject(ctx context.Context, t Target) error {
	t.SetLLMToxic(f.toxic)
	return nil
}

func (f llmFault) Undo(ctx context.Context, t Target) error {
	t.SetLLMToxic(LLMToxic{})
	return nil
}

type disconnectFault struct{}

func (disconnectFault) Inject(ctx context.Context, t Target) error { return t.DisconnectSandbox(ctx) }
func (disconnectFault) Undo(ctx context.Context, t Target) error   { return t.ReconnectSandbox(ctx) }

// llmKind is an LLM fault that only sets a toxic on the LLM path: for the
// next call, or for every call of a /DURATION.
func llmKind(name, toxic string, severity int, example, summary string) Kind {
	return Kind{
		Name: name, Group: "llm", Triggers: llmTriggers, DrawTriggers: llmOnly, Example: example,
		Path: PathLLM, Severity: severity, MetBy: MetByLLMFollowUp,
		Duration: DurationOptional, Summary: summary, Draw: noArg,
		New: func(s Spec) (Fault, error) {
			return llmFault{toxic: LLMToxic{Kind: toxic, Once: s.Duration == 0}}, nil
		},
	}
}
