package harness

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/scenarios"
)

// faultHost is what the fault engine needs of its run. Its methods are
// called under the run's lock.
type faultHost interface {
	virtualNow() time.Time
	virtualStart() time.Time
	currentAttempt() int
	// aliveAttempt is the attempt whose container runs now (0: none).
	aliveAttempt() int
	// intentCount is how many effect intents the run has journaled.
	intentCount() int
	// effectOrder is the order of the run's newest effect (0: none yet).
	effectOrder() int64
	// mcpRefusals reads the run's refused tools/calls from the journal.
	mcpRefusals() ([]history.MCPRefusal, error)
	// toolCalls counts the calls of the tool scope names while fault's
	// change of it held (w): the refusals naming the fault, and the
	// tool's effects w holds.
	toolCalls(refusals []history.MCPRefusal, fault string, scope chaos.MCPScope, w chaos.ToolWindow) chaos.ToolCalls
	saveFault(ctx context.Context, rec history.FaultRecord) error
	event(ctx context.Context, typ, msg string, data any)
	progress(format string, args ...any)
	target() chaos.Target
	linkStats() (chaos.LinkStats, bool)
}

// faultState is a scheduled fault instance of a live run. What judging it
// rests on is in rec (journaled); the rest is this process's view.
type faultState struct {
	rec   history.FaultRecord
	spec  chaos.Spec
	kind  chaos.Kind
	fault chaos.Fault
	phase chaos.Phase // where an effect:N trigger lands

	active     bool      // fired and not yet healed
	healAt     time.Time // when an active fault with a duration heals
	linkBefore chaos.LinkStats
}

// at is when a t: fault fires.
func (f *faultState) at(start time.Time) (time.Time, bool) {
	if f.spec.Trigger.Type != chaos.TriggerTime {
		return time.Time{}, false
	}
	return start.Add(f.spec.Trigger.At), true
}

// faultEngine fires and heals the run's scheduled faults, stacks the ones
// that share a path, and gathers the evidence of whether the agent met each
// (chaos.MetBy), journaling it with the fault's record. Its methods run
// under the run's lock.
type faultEngine struct {
	host   faultHost
	log    *slog.Logger
	faults []*faultState
	stacks map[string][]*faultState // active faults per path, newest last
	firing *faultState              // the fault being injected, for the Target's evidence
	again  bool                     // the fault being injected acted before (a resume, a new attempt)
}

// newFaultEngine turns a run's fault records back into live faults.
func newFaultEngine(host faultHost, log *slog.Logger, reg *chaos.Registry, recs []history.FaultRecord) (faultEngine, error) {
	e := faultEngine{host: host, log: log, stacks: map[string][]*faultState{}}
	for _, fr := range recs {
		spec, err := chaos.ParseSpec(fr.Spec)
		if err != nil {
			return e, fmt.Errorf("fault %q: %w", fr.Spec, err)
		}
		f, err := reg.Build(spec)
		if err != nil {
			return e, err
		}
		kind, _ := reg.Lookup(spec.Kind)
		fs := &faultState{rec: fr, spec: spec, kind: kind, fault: f, phase: reg.PhaseOf(spec)}
		if sf, ok := f.(chaos.Stateful); ok && fr.State != "" {
			sf.Restore(fr.State)
		}
		if fr.Applied && spec.Duration > 0 && fr.HealedVirtual.IsZero() && fr.Error == "" {
			// Fired and not yet healed when the harness stopped: it heals on schedule.
			fs.active, fs.healAt = true, fr.AppliedVirtual.Add(spec.Duration)
		}
		e.faults = append(e.faults, fs)
	}
	sort.SliceStable(e.faults, func(i, j int) bool { return e.faults[i].rec.Index < e.faults[j].rec.Index })
	return e, nil
}

func (e *faultEngine) save(ctx context.Context, f *faultState) {
	if err := e.host.saveFault(ctx, f.rec); err != nil {
		e.log.Error("record fault", "fault", f.rec.Spec, "err", err)
	}
}

// inject lets f act, crediting it with what hits the agent from now on.
func (e *faultEngine) inject(ctx context.Context, f *faultState) error {
	f.rec.Evidence.Acted = true
	if st, ok := e.host.linkStats(); ok {
		f.linkBefore = st
	}
	e.firing = f
	defer func() { e.firing = nil }()
	return f.fault.Inject(ctx, e.host.target())
}

// fire applies a fault. The fault's record — with the evidence it will be
// judged by — is durable before the fault acts, so a fault fires at most
// once per run even across a crash, and is judged the same after one.
func (e *faultEngine) fire(ctx context.Context, f *faultState) {
	now := e.host.virtualNow()
	f.rec.Applied = true
	f.rec.AppliedAttempt = e.host.currentAttempt()
	f.rec.AppliedVirtual = now
	f.rec.AppliedWall = time.Now().UTC()
	f.rec.Evidence.IntentsAtFire = e.host.intentCount()
	if f.kind.MetBy == chaos.MetByLaterCallOfTool {
		f.rec.Evidence.Tool = &chaos.ToolWindow{FromOrder: e.host.effectOrder()}
	}
	if f.spec.Trigger.Type == chaos.TriggerEffect {
		// Fired before the world saw the triggering effect, that effect
		// is the first to meet it.
		f.rec.Evidence.Phase = f.phase
	}
	if f.spec.Duration == 0 {
		f.rec.HealedVirtual = now
	}
	if err := e.host.saveFault(ctx, f.rec); err != nil {
		e.log.Error("record fault; not applying it", "fault", f.rec.Spec, "err", err)
		f.rec.Applied = false
		return
	}
	e.host.event(ctx, "harness.fault", fmt.Sprintf("fault %s applied (attempt %d)", f.rec.Spec, f.rec.AppliedAttempt), map[string]any{"fault": f.rec.Spec})
	path := f.kind.Path
	stacked := path != "" && f.spec.Duration > 0
	covered := false
	if stacked {
		// Faults on one path stack: the most severe acts (the newest
		// among equals), the one it covers resumes when it heals, and each
		// is credited only with what hit the agent while it was acting.
		if top := e.top(path); top != nil {
			if top.kind.Severity > f.kind.Severity {
				covered = true
			} else {
				e.suspend(top)
				e.save(ctx, top)
			}
		}
	}
	if !covered {
		if err := e.inject(ctx, f); err != nil {
			e.injectFailed(ctx, f, err)
			return
		}
	}
	if f.spec.Duration > 0 {
		f.active, f.healAt = true, now.Add(f.spec.Duration)
	}
	if stacked {
		e.stacks[path] = append(e.stacks[path], f)
	}
	if sf, ok := f.fault.(chaos.Stateful); ok {
		f.rec.State = sf.State()
	}
	e.save(ctx, f)
	// Said once the fault acts and what it did is durable.
	e.host.progress("fault %s applied at %s virtual (attempt %d)", f.rec.Spec, history.VirtualInstant(now.Sub(e.host.virtualStart())), f.rec.AppliedAttempt)
}

// injectFailed records that f fired but could not act: it tested nothing.
// An engine call made after the lock was released reports here too.
func (e *faultEngine) injectFailed(ctx context.Context, f *faultState, err error) {
	e.log.Error("inject fault", "fault", f.rec.Spec, "err", err)
	f.rec.Error = err.Error()
	f.rec.Met, f.rec.MetDetail = false, "not injected: "+err.Error()
	if f.active {
		f.active = false
		if path := f.kind.Path; path != "" {
			e.unstack(path, f)
		}
	}
	e.save(ctx, f)
	e.host.progress("fault %s could not be injected: %v", f.rec.Spec, err)
}

// heal undoes an active fault and records whether the agent met it while
// it lasted.
func (e *faultEngine) heal(ctx context.Context, f *faultState) {
	f.active = false
	f.rec.HealedVirtual = e.host.virtualNow()
	if w := f.rec.Evidence.Tool; w != nil {
		w.Healed, w.ToOrder = true, e.host.effectOrder()
	}
	path := f.kind.Path
	wasTop := path == "" || e.top(path) == f
	if wasTop {
		e.suspend(f)
		e.undo(ctx, f)
	}
	if path != "" {
		e.unstack(path, f)
		if next := e.top(path); wasTop && next != nil {
			// The fault this one covered acts again.
			if err := e.inject(ctx, next); err != nil {
				e.log.Warn("re-apply fault", "fault", next.rec.Spec, "err", err)
			}
		}
	}
	switch j, ok := f.kind.MetBy.AtHeal(f.rec.Evidence, e.host.aliveAttempt()); {
	case path != "" && !f.rec.Evidence.Acted:
		f.rec.Met, f.rec.MetDetail = chaos.Covered.Met, chaos.Covered.Detail
	case ok:
		f.rec.Met, f.rec.MetDetail = j.Met, j.Detail
	}
	e.save(ctx, f)
	e.host.event(ctx, "harness.heal", fmt.Sprintf("fault %s healed", f.rec.Spec), map[string]any{"fault": f.rec.Spec})
	e.host.progress("fault %s healed at %s virtual", f.rec.Spec, history.VirtualInstant(e.host.virtualNow().Sub(e.host.virtualStart())))
}

// undo makes f stop acting physically (a thawed container, a healed link).
func (e *faultEngine) undo(ctx context.Context, f *faultState) {
	u, ok := f.fault.(chaos.Undoer)
	if !ok {
		return
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := u.Undo(uctx, e.host.target()); err != nil {
		e.log.Warn("undo fault", "fault", f.rec.Spec, "err", err)
	}
}

// reapplyTop makes path's acting fault act again (after a one-shot toxic
// took its place for one call).
func (e *faultEngine) reapplyTop(path string) {
	f := e.top(path)
	if f == nil {
		return
	}
	e.firing = f
	defer func() { e.firing = nil }()
	if err := f.fault.Inject(context.Background(), e.host.target()); err != nil {
		e.log.Warn("re-apply fault", "fault", f.rec.Spec, "err", err)
	}
}

// top is the fault acting on path now.
func (e *faultEngine) top(path string) *faultState {
	var best *faultState
	for _, f := range e.stacks[path] {
		if best == nil || f.kind.Severity >= best.kind.Severity {
			best = f
		}
	}
	return best
}

func (e *faultEngine) unstack(path string, f *faultState) {
	st := e.stacks[path]
	for i, g := range st {
		if g == f {
			e.stacks[path] = append(st[:i:i], st[i+1:]...)
			return
		}
	}
}

// suspend credits f with what hit the agent since it started acting.
func (e *faultEngine) suspend(f *faultState) {
	after, ok := e.host.linkStats()
	if !ok {
		return
	}
	b := f.linkBefore
	f.rec.Evidence.LinkHits += (after.Reset - b.Reset) + (after.Blackholed - b.Blackholed) + (after.Delayed - b.Delayed)
	f.linkBefore = after
}

// resume makes the faults that were active when an earlier harness stopped
// (or when Ctrl-C undid them) act again on this process's link, effect path
// and LLM path, until they heal on schedule.
func (e *faultEngine) resume(ctx context.Context) {
	e.again = true
	defer func() { e.again = false }()
	for _, f := range e.faults {
		if path := f.kind.Path; f.active && path != "" {
			e.stacks[path] = append(e.stacks[path], f)
		}
	}
	for _, path := range []string{chaos.PathLink, chaos.PathEffect, chaos.PathLLM, chaos.PathMCP} {
		if f := e.top(path); f != nil {
			if err := e.inject(ctx, f); err != nil {
				e.log.Warn("re-apply fault", "fault", f.rec.Spec, "err", err)
			}
		}
	}
	// A tool the gateway changed (mcp-tool-gone, mcp-schema) stays
	// changed in this process too, until the fault heals.
	for _, f := range e.faults {
		if f.kind.MCP && f.kind.Path == "" && f.rec.Applied && f.rec.Error == "" && (f.active || f.spec.Duration == 0) {
			if err := e.inject(ctx, f); err != nil {
				e.log.Warn("re-apply fault", "fault", f.rec.Spec, "err", err)
			}
		}
	}
	// A one-shot toxic that fired but had not acted when the harness died
	// waits for the next call again; so does an LLM one whose follow-up
	// the agent had not made: only the attempt that heard it could make
	// it, and that attempt is gone.
	for _, f := range e.faults {
		if f.kind.Path == "" || !f.rec.Applied || f.spec.Duration != 0 || f.rec.Error != "" {
			continue
		}
		if f.rec.Evidence.LLM != nil && !f.rec.Met {
			f.rec.Evidence.LLM, f.rec.Evidence.Spent = nil, false
			e.save(ctx, f)
		}
		if !f.rec.Evidence.Spent {
			if err := e.inject(ctx, f); err != nil {
				e.log.Warn("re-apply fault", "fault", f.rec.Spec, "err", err)
			}
		}
	}
}

// reapplyToAttempt makes the active faults that act on the agent's
// container (chaos.Kind.PerAttempt) act on the new attempt's one too.
func (e *faultEngine) reapplyToAttempt(ctx context.Context) {
	e.again = true
	defer func() { e.again = false }()
	for _, f := range e.faults {
		if f.active && f.kind.PerAttempt {
			if err := e.inject(ctx, f); err != nil {
				e.log.Warn("re-apply fault to the new attempt", "fault", f.rec.Spec, "err", err)
			}
		}
	}
}

// healAll undoes every active fault so that no paused container or
// dropped link outlives the harness's drive of the run. At the end of the
// run (final) the faults are healed for good; on Ctrl-C they are only
// undone physically and stay active in the journal, so that a resume
// applies them again until they heal on schedule.
func (e *faultEngine) healAll(ctx context.Context, final bool) {
	for _, f := range e.faults {
		if !f.active {
			continue
		}
		if final {
			e.heal(context.WithoutCancel(ctx), f)
		} else {
			e.undo(ctx, f)
		}
	}
}

// fireStep fires the faults a durable checkpoint with this step triggers.
func (e *faultEngine) fireStep(ctx context.Context, step int) {
	for _, f := range e.faults {
		if !f.rec.Applied && f.spec.Trigger.Type == chaos.TriggerStep && step >= f.spec.Trigger.N {
			e.fire(ctx, f)
		}
	}
}

// fireEffect fires the faults the n-th effect triggers at this phase.
func (e *faultEngine) fireEffect(ctx context.Context, n int, phase chaos.Phase) {
	for _, f := range e.faults {
		if !f.rec.Applied && f.spec.Trigger.Type == chaos.TriggerEffect && f.spec.Trigger.N == n && f.phase == phase {
			e.fire(ctx, f)
		}
	}
}

// fireLLM fires the faults the n-th LLM call triggers.
func (e *faultEngine) fireLLM(ctx context.Context, n int) {
	for _, f := range e.faults {
		if !f.rec.Applied && f.spec.Trigger.Type == chaos.TriggerLLM && f.spec.Trigger.N == n {
			e.fire(ctx, f)
		}
	}
}

// nextEvent is the earliest timed event — a t: fault to fire or an active
// fault to heal — at or before limit. Heals come before fires at the same
// instant.
func (e *faultEngine) nextEvent(limit time.Time) (at time.Time, f *faultState, heal bool, ok bool) {
	for _, g := range e.faults {
		var t time.Time
		var isHeal bool
		switch {
		case g.active && !g.healAt.IsZero():
			t, isHeal = g.healAt, true
		case !g.rec.Applied:
			ft, timed := g.at(e.host.virtualStart())
			if !timed {
				continue
			}
			t = ft
		default:
			continue
		}
		if t.After(limit) {
			continue
		}
		if !ok || t.Before(at) || (t.Equal(at) && isHeal && !heal) {
			at, f, heal, ok = t, g, isHeal, true
		}
	}
	return at, f, heal, ok
}

// next implements eventSource.
func (e *faultEngine) next(limit time.Time) (time.Time, bool) {
	at, _, _, ok := e.nextEvent(limit)
	return at, ok
}

// fireNext implements eventSource.
func (e *faultEngine) fireNext(ctx context.Context) {
	_, f, heal, ok := e.nextEvent(e.host.virtualNow())
	switch {
	case !ok:
	case heal:
		e.heal(ctx, f)
	default:
		e.fire(ctx, f)
	}
}

// downUntil is the end of the down window an active process fault opened:
// no attempt starts before it.
func (e *faultEngine) downUntil() time.Time {
	var until time.Time
	for _, f := range e.faults {
		if f.active && f.rec.DownUntil.After(until) {
			until = f.rec.DownUntil
		}
	}
	return until
}

// hitEffect credits the effect path's toxic fault with hitting the n-th
// effect; once says its one-shot toxic is spent by it.
func (e *faultEngine) hitEffect(ctx context.Context, f *faultState, n int, once bool) {
	if f == nil || (f.rec.Met && (!once || f.rec.Evidence.Spent)) {
		return
	}
	if !f.rec.Met {
		j := chaos.HitEffect(n)
		f.rec.Met, f.rec.MetDetail = j.Met, j.Detail
	}
	f.rec.Evidence.Spent = f.rec.Evidence.Spent || once
	e.save(ctx, f)
}

// hitLLM notes, in one durable write, that f's toxic hit an LLM call: the
// follow-up that would show the agent met it (w, when there is one to wait
// for), and, for a one-shot toxic (once), that it is spent.
func (e *faultEngine) hitLLM(ctx context.Context, f *faultState, w *chaos.LLMWait, once bool) {
	if f == nil {
		return
	}
	changed := false
	if w != nil && !f.rec.Met && f.rec.Evidence.LLM == nil {
		f.rec.Evidence.LLM, changed = w, true
	}
	if once && !f.rec.Evidence.Spent {
		f.rec.Evidence.Spent, changed = true, true
	}
	if changed {
		e.save(ctx, f)
	}
}

// settleLLM marks the LLM faults whose evidence the new LLM call c is.
func (e *faultEngine) settleLLM(ctx context.Context, c chaos.LLMCall) {
	for _, f := range e.faults {
		w := f.rec.Evidence.LLM
		if w == nil || f.rec.Met {
			continue
		}
		if j, ok := w.FollowedUp(c, f.rec.AppliedVirtual); ok {
			f.rec.Met, f.rec.MetDetail = j.Met, j.Detail
			f.rec.Evidence.LLM = nil
			e.save(ctx, f)
		}
	}
}

// settle judges the faults whose evidence is only known at the end, and
// returns the records. The journal's refusals are read once, by the first
// fault whose evidence is a tool's calls.
func (e *faultEngine) settle(ctx context.Context) []history.FaultRecord {
	out := make([]history.FaultRecord, 0, len(e.faults))
	intents := e.host.intentCount()
	refusals := sync.OnceValues(e.host.mcpRefusals)
	for _, f := range e.faults {
		if f.rec.Applied && f.rec.Error == "" && f.rec.MetDetail == "" {
			end := chaos.End{Intents: intents}
			var j chaos.Judgement
			if w := f.rec.Evidence.Tool; w != nil {
				scope, err := chaos.MCPScopeOf(f.spec)
				var refused []history.MCPRefusal
				if err == nil {
					refused, err = refusals()
				}
				if err == nil {
					end.ToolCalls = e.host.toolCalls(refused, f.rec.Spec, scope, *w)
				}
				if err != nil {
					j.Detail = "its evidence could not be read from the journal: " + err.Error()
				}
			}
			if j.Detail == "" {
				j = f.kind.MetBy.AtEnd(f.rec.Evidence, end)
			}
			f.rec.Met, f.rec.MetDetail = j.Met, j.Detail
			e.save(ctx, f)
		}
		out = append(out, f.rec)
	}
	return out
}

// The run is the fault engine's host.
var _ faultHost = (*run)(nil)

func (r *run) virtualNow() time.Time   { return r.clock.now }
func (r *run) virtualStart() time.Time { return r.clock.start }
func (r *run) currentAttempt() int     { return r.sup.current }
func (r *run) intentCount() int        { return r.fx.intents }
func (r *run) effectOrder() int64      { return r.fx.order }
func (r *run) target() chaos.Target    { return runTarget{r} }

func (r *run) aliveAttempt() int {
	if r.sup.box == nil {
		return 0
	}
	return r.sup.current
}

func (r *run) saveFault(ctx context.Context, rec history.FaultRecord) error {
	return r.put(ctx, history.FaultEntry(r.rec.ID, rec))
}

func (r *run) mcpRefusals() ([]history.MCPRefusal, error) {
	events, err := r.h.history.Events(r.rec.ID)
	if err != nil {
		return nil, err
	}
	return history.MCPRefusals(events), nil
}

func (r *run) toolCalls(refusals []history.MCPRefusal, fault string, scope chaos.MCPScope, w chaos.ToolWindow) chaos.ToolCalls {
	c := chaos.ToolCalls{Tool: scope.String()}
	for _, ref := range refusals {
		if ref.Fault == fault {
			c.Refused++
		}
	}
	kind := scenarios.MCPServer{Name: scope.Server}.EffectKind(scope.Tool)
	for _, e := range r.fx.effects {
		if e.Kind == kind && w.Holds(e.Order) {
			c.Ran++
		}
	}
	return c
}

func (r *run) linkStats() (chaos.LinkStats, bool) {
	if r.link == nil {
		return chaos.LinkStats{}, false
	}
	return r.link.Stats(), true
}
