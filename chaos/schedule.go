package chaos

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"
)

// Streams derives independent, reproducible random streams from one seed,
// one per component ("schedule", "link", "random-chaos", ...), so that
// adding draws to one component never shifts another's.
type Streams struct{ seed int64 }

// NewStreams returns the streams of seed.
func NewStreams(seed int64) Streams { return Streams{seed: seed} }

// For returns the stream of component; the same seed and component always
// give the same sequence.
func (s Streams) For(component string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(component))
	return rand.New(rand.NewPCG(uint64(s.seed), h.Sum64()))
}

// MaxInstances bounds how many firings one recurring spec expands to.
const MaxInstances = 1000

// Instance is one concrete firing of a fault: what the fault log records
// and what --replay-faults re-applies. Recurring specs (every, rate) expand
// into t: instances.
type Instance struct {
	Spec Spec   // what fires, with a concrete trigger
	From string // the spec as written, e.g. "restart@every:1d"
}

// Expand turns specs into instances over the virtual span [0, horizon):
// every:D fires at D, 2D, ... and rate:R/P at times drawn from rng as a
// Poisson process (exponential gaps, rounded to the second). Other
// triggers are one instance each. The result keeps the specs' order, each
// spec's instances in time order.
func Expand(specs []Spec, horizon time.Duration, rng *rand.Rand) ([]Instance, error) {
	var out []Instance
	for _, s := range specs {
		from := s.String()
		switch s.Trigger.Type {
		case TriggerEvery:
			for k := 1; time.Duration(k)*s.Trigger.Every < horizon; k++ {
				if k > MaxInstances {
					return nil, fmt.Errorf("fault %q fires more than %d times before the horizon (%s); use a longer interval", from, MaxInstances, FormatDuration(horizon))
				}
				out = append(out, Instance{Spec: at(s, time.Duration(k)*s.Trigger.Every), From: from})
			}
		case TriggerRate:
			mean := float64(s.Trigger.Per) / s.Trigger.Rate
			var t float64
			for n := 0; ; n++ {
				t += rng.ExpFloat64() * mean
				if t >= float64(horizon) || math.IsInf(t, 0) {
					break
				}
				if n >= MaxInstances {
					return nil, fmt.Errorf("fault %q fires more than %d times before the horizon (%s); use a lower rate", from, MaxInstances, FormatDuration(horizon))
				}
				out = append(out, Instance{Spec: at(s, time.Duration(t).Round(time.Second)), From: from})
			}
		default:
			out = append(out, Instance{Spec: s, From: from})
		}
	}
	return out, nil
}

// at is s fired once at virtual time d.
func at(s Spec, d time.Duration) Spec {
	s.Trigger = Trigger{Type: TriggerTime, At: d}
	return s
}

// Draw describes faults drawn from a seed: Count of them, each of a kind
// picked from Kinds (a kind may carry its argument, "api-version:v2"), at
// a time uniform in [Between[0], Between[1]), lasting a duration uniform
// in [Duration[0], Duration[1]] when the kind takes one. Times and
// durations are whole minutes.
type Draw struct {
	Kinds    []string         `json:"kinds"`
	Count    int              `json:"count"`
	Between  [2]time.Duration `json:"between"`
	Duration [2]time.Duration `json:"duration"`
}

// Specs draws d's faults from rng, in time order, each checked against reg.
func (d Draw) Specs(rng *rand.Rand, reg *Registry) ([]Spec, error) {
	if d.Count < 1 || len(d.Kinds) == 0 || d.Between[1] <= d.Between[0] {
		return nil, fmt.Errorf("draw: want count >= 1, at least one kind and between [from, to) with to > from")
	}
	minutes := func(lo, hi time.Duration) time.Duration {
		n := int64((hi - lo) / time.Minute)
		if n <= 0 {
			return lo
		}
		return lo + time.Duration(rng.Int64N(n))*time.Minute
	}
	var out []Spec
	for i := 0; i < d.Count; i++ {
		kind := d.Kinds[rng.IntN(len(d.Kinds))]
		s, err := ParseSpec(kind + "@t:0s")
		if err != nil {
			return nil, fmt.Errorf("draw: kind %q: %w", kind, err)
		}
		s.Trigger.At = minutes(d.Between[0], d.Between[1])
		if k, ok := reg.Lookup(s.Kind); ok && k.Duration != DurationNone && d.Duration[1] > 0 {
			s.Duration = minutes(d.Duration[0], d.Duration[1]+time.Minute)
			if s.Duration <= 0 {
				s.Duration = time.Minute
			}
		}
		if _, err := reg.Build(s); err != nil {
			return nil, fmt.Errorf("draw: %w", err)
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Trigger.At < out[j].Trigger.At })
	return out, nil
}

// RandomSchedule draws n faults for --chaos random: kinds that can be
// drawn (never harness-crash), each with a trigger the run can reach —
// a step in 1..Steps, an effect in 1..Effects, or a virtual time before
// Virtual — and an argument and duration from the kind. No two faults of
// one group (process, network, llm, world, time) share a trigger point
// (effect:N before and after its execution count as one), and a process
// fault shares its point with no other fault — as long as the reach has
// points to spare: asked for more faults than fit, it places the rest
// anywhere (they may then cover each other, and the run says so).
//
// reach.Kinds, when it names kinds (--chaos-kinds, a scenario's
// reach.kinds), limits the draw to them; see RandomKinds. Without it the
// draw is what it has always been for the seed: a filter changes only the
// schedules it is given to.
func RandomSchedule(rng *rand.Rand, reg *Registry, reach Reach, n int) ([]Spec, error) {
	kinds, err := reg.RandomKinds(reach)
	if err != nil {
		return nil, err
	}
	var out []Spec
	type point struct {
		typ TriggerType
		n   int
		at  time.Duration
	}
	taken := map[point]map[string]bool{} // groups drawn at each point
	// The rule below holds for the first 100n draws; a schedule that needs
	// more faults than the reach has free points takes the rest anywhere.
	strict := true
	for tries := 0; len(out) < n && tries < 200*n; tries++ {
		if tries == 100*n {
			strict = false
		}
		k := kinds[rng.IntN(len(kinds))]
		options := drawTriggers(k, reach)
		if len(options) == 0 {
			continue
		}
		s := Spec{Kind: k.Name}
		s.Arg, s.Duration = k.Draw(rng, reach)
		switch tt := options[rng.IntN(len(options))]; tt {
		case TriggerStep:
			s.Trigger = Trigger{Type: tt, N: 1 + rng.IntN(reach.Steps)}
		case TriggerEffect:
			s.Trigger = Trigger{Type: tt, N: 1 + rng.IntN(reach.Effects)}
			if k.DefaultPhase == PhaseDefault {
				// Kinds that land where they must (an effect toxic before the
				// effect it fails) keep their own phase.
				s.Trigger.Phase = []Phase{PhaseDefault, PhaseBefore, PhaseAfter}[rng.IntN(3)]
			}
		case TriggerLLM:
			s.Trigger = Trigger{Type: tt, N: 1 + rng.IntN(reach.LLMCalls)}
		case TriggerTime:
			s.Trigger = Trigger{Type: tt, At: time.Duration(rng.Int64N(int64(reach.Virtual/time.Minute))) * time.Minute}
		}
		if k.Duration == DurationNone {
			s.Duration = 0
		}
		if _, err := reg.Build(s); err != nil {
			continue
		}
		// Two faults of one group at one point would cover each other (the
		// second kill finds no container, the second LLM toxic replaces
		// the first), and a process fault covers whatever else lands where
		// it does (the agent never hears that answer): the one that never
		// met the agent would leave the run unknown. Draw again instead.
		p := point{s.Trigger.Type, s.Trigger.N, s.Trigger.At} // effect:N, before or after, is one point
		groups := taken[p]
		if strict && (groups[k.Group] || groups["process"] || (k.Group == "process" && len(groups) > 0)) {
			continue
		}
		if groups == nil {
			groups = map[string]bool{}
			taken[p] = groups
		}
		groups[k.Group] = true
		out = append(out, s)
	}
	if len(out) < n {
		return nil, fmt.Errorf("random chaos: could draw only %d of %d faults the run can reach (%+v)", len(out), n, reach)
	}
	return out, nil
}

// RandomKinds returns the kinds RandomSchedule draws from for a run that
// can reach reach: every kind with a Draw, in catalog order; or, when
// reach.Kinds names kinds, those of them (neither their order nor a repeat
// changes the draw). Each name in reach.Kinds must pass CheckDrawable.
func (r *Registry) RandomKinds(reach Reach) ([]Kind, error) {
	var kinds []Kind
	for _, k := range r.Kinds() {
		if k.Draw != nil && (!k.MCP || reach.MCP) && (len(reach.Kinds) == 0 || slices.Contains(reach.Kinds, k.Name)) {
			kinds = append(kinds, k)
		}
	}
	for _, name := range reach.Kinds {
		if err := r.CheckDrawable(name, reach); err != nil {
			return nil, err
		}
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("random chaos: no fault kind can be drawn")
	}
	return kinds, nil
}

// ErrNotDrawable is wrapped by CheckDrawable's error for a kind that
// exists but that --chaos random cannot draw for the run.
var ErrNotDrawable = errors.New("not drawn at random")

// CheckDrawable says whether --chaos random can draw the kind called name
// for a run that can reach reach: the kind exists (else an error wrapping
// ErrUnknownFault that lists the kinds random draws), random draws it at
// all (harness-crash, which ends the harness, and disconnect are only
// scheduled by hand), and the run reaches a trigger it is drawn at (an LLM
// fault is drawn only at an LLM call, a world fault only at an effect);
// the last two wrap ErrNotDrawable and say what to do instead.
func (r *Registry) CheckDrawable(name string, reach Reach) error {
	k, ok := r.kinds[name]
	if !ok {
		var drawn []string
		for _, k := range r.Kinds() {
			if k.Draw != nil && (!k.MCP || reach.MCP) {
				drawn = append(drawn, k.Name)
			}
		}
		return fmt.Errorf("%w %q (the kinds --chaos random draws: %s; see `overnight faults`)", ErrUnknownFault, name, strings.Join(drawn, ", "))
	}
	if k.Draw == nil {
		why := ""
		switch {
		case k.EndsHarness:
			why = ": it ends the harness's own process"
		case k.StartedWorld:
			why = ": it acts only on a world the harness starts for the run (a command or image world)"
		case k.WorldEvent != "":
			why = ": it acts only on a world that declares the " + k.WorldEvent + " event"
		case k.MCP:
			why = ": it acts only on a stdio MCP server (command:), which a scenario may not have"
		}
		return fmt.Errorf("%s is %w%s; schedule it by hand instead, as in --fault %s", name, ErrNotDrawable, why, k.Example)
	}
	if k.MCP && !reach.MCP {
		return fmt.Errorf("%s is %w for this run: it acts on the scenario's MCP servers, and the scenario has no mcp: block; leave %s out", name, ErrNotDrawable, name)
	}
	if len(drawTriggers(k, reach)) > 0 {
		return nil
	}
	var at, need []string
	for _, t := range k.DrawnAt() {
		switch t {
		case TriggerStep:
			at, need = append(at, "a checkpoint step (step:N)"), append(need, "steps")
		case TriggerEffect:
			at, need = append(at, "an effect (effect:N)"), append(need, "effects")
		case TriggerLLM:
			at, need = append(at, "an LLM call (llm:N)"), append(need, "llm_calls")
		case TriggerTime:
			at, need = append(at, "a virtual time (t:D)"), append(need, "virtual (over 1m)")
		}
	}
	return fmt.Errorf("%s is %w for this run: it is drawn only at %s, and the run reaches none (reach: steps %d, effects %d, llm_calls %d, virtual %s); "+
		"give the scenario's reach %s, or leave %s out", name, ErrNotDrawable, strings.Join(at, " or "),
		reach.Steps, reach.Effects, reach.LLMCalls, FormatDuration(reach.Virtual), strings.Join(need, " or "), name)
}

// DrawnAt lists the triggers RandomSchedule gives a fault of the kind,
// when the run reaches them: its DrawTriggers, else those of its Triggers
// that fire once (step, effect, llm, t). None: random never draws it.
func (k Kind) DrawnAt() []TriggerType {
	if k.Draw == nil {
		return nil
	}
	triggers := k.Triggers
	if len(k.DrawTriggers) > 0 {
		triggers = k.DrawTriggers
	}
	var out []TriggerType
	for _, t := range triggers {
		switch t {
		case TriggerStep, TriggerEffect, TriggerLLM, TriggerTime:
			out = append(out, t)
		}
	}
	return out
}

// drawTriggers are the triggers RandomSchedule may give a fault of k in a
// run that can reach reach.
func drawTriggers(k Kind, reach Reach) []TriggerType {
	var options []TriggerType
	for _, t := range k.DrawnAt() {
		switch {
		case t == TriggerStep && reach.Steps > 0,
			t == TriggerEffect && reach.Effects > 0,
			t == TriggerLLM && reach.LLMCalls > 0,
			t == TriggerTime && reach.Virtual > time.Minute:
			options = append(options, t)
		}
	}
	return options
}
