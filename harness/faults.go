package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// quantum is how long no agent request may be in flight before virtual time
// jumps to the next scheduled event (an outage heals even while the agent
// is cut off and retrying).
const quantum = 100 * time.Millisecond

// llmWait is what would show that the agent met an LLM fault.
type llmWait struct {
	kind   string
	call   int
	after  time.Time // a 429: the next call must come after Retry-After
	callID string    // a malformed tool call: the call the agent must answer
}

// faultState is a scheduled fault instance of a live run.
type faultState struct {
	rec   FaultRecord
	spec  chaos.Spec
	fault chaos.Fault
	phase chaos.Phase // where an effect:N trigger lands

	active     bool      // fired and not yet healed
	healAt     time.Time // when an active fault with a duration heals
	linkBefore chaos.LinkStats
	linkHits   int64    // connections and responses hit while it was the link's acting fault
	acted      bool     // it acted at some point (a more severe fault may cover it all along)
	llmWait    *llmWait // an LLM fault's evidence still to come
	intents    int      // effect intents journaled when it fired
}

// at is when a t: fault fires.
func (f *faultState) at(start time.Time) (time.Time, bool) {
	if f.spec.Trigger.Type != chaos.TriggerTime {
		return time.Time{}, false
	}
	return start.Add(f.spec.Trigger.At), true
}

func (r *run) saveFault(ctx context.Context, f *faultState) {
	if err := put(ctx, r.j, faultKey(r.rec.ID, f.rec.Index), f.rec); err != nil {
		r.log.Error("record fault", "fault", f.rec.Spec, "err", err)
	}
}

// fire applies a fault, under mu. The fault's record is durable before the
// fault acts, so a fault fires at most once per run even across a crash.
func (r *run) fire(ctx context.Context, f *faultState) {
	f.rec.Applied = true
	f.rec.AppliedAttempt = r.current
	f.rec.AppliedVirtual = r.clock
	f.rec.AppliedWall = time.Now().UTC()
	if f.spec.Duration == 0 {
		f.rec.HealedVirtual = r.clock
	}
	if err := put(ctx, r.j, faultKey(r.rec.ID, f.rec.Index), f.rec); err != nil {
		r.log.Error("record fault; not applying it", "fault", f.rec.Spec, "err", err)
		f.rec.Applied = false
		return
	}
	_ = r.appendEventLocked(ctx, "harness.fault", fmt.Sprintf("fault %s applied (attempt %d)", f.rec.Spec, r.current), map[string]any{"fault": f.rec.Spec})
	r.h.progress("fault %s applied at +%s virtual (attempt %d)", f.rec.Spec, chaos.FormatDuration(r.clock.Sub(r.rec.VirtualStart)), r.current)
	f.intents = r.intents
	target := r.targetOf(f.spec.Kind)
	stacked := target != "" && f.spec.Duration > 0
	covered := false
	if stacked {
		// Faults on one target stack: the most severe acts (the newest
		// among equals), the one it covers resumes when it heals, and each
		// is credited only with what hit the agent while it was acting.
		if top := r.top(target); top != nil {
			if severity[top.spec.Kind] > severity[f.spec.Kind] {
				covered = true
			} else {
				r.suspend(top)
			}
		}
	}
	var err error
	if !covered {
		r.resumeEvidence(f)
		r.firing = f
		err = f.fault.Inject(ctx, runTarget{r})
		r.firing = nil
	}
	if err != nil {
		r.log.Error("inject fault", "fault", f.rec.Spec, "err", err)
		f.rec.Error = err.Error()
		f.rec.Met, f.rec.MetDetail = false, "not injected: "+err.Error()
		r.saveFault(ctx, f)
		r.h.progress("fault %s could not be injected: %v", f.rec.Spec, err)
		return
	}
	if f.spec.Duration > 0 {
		f.active, f.healAt = true, r.clock.Add(f.spec.Duration)
	}
	if stacked {
		r.stacks[target] = append(r.stacks[target], f)
	}
	if sf, ok := f.fault.(chaos.Stateful); ok {
		f.rec.State = sf.State()
	}
	r.saveFault(ctx, f)
}

// heal undoes an active fault, under mu, and records whether the agent met
// it while it lasted.
func (r *run) heal(ctx context.Context, f *faultState) {
	f.active = false
	f.rec.HealedVirtual = r.clock
	target := r.targetOf(f.spec.Kind)
	wasTop := target == "" || r.top(target) == f
	if wasTop {
		r.suspend(f)
		if u, ok := f.fault.(chaos.Undoer); ok {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			if err := u.Undo(uctx, runTarget{r}); err != nil {
				r.log.Warn("heal fault", "fault", f.rec.Spec, "err", err)
			}
			cancel()
		}
	}
	if target != "" {
		r.unstack(target, f)
		if next := r.top(target); wasTop && next != nil {
			// The fault this one covered acts again.
			r.resumeEvidence(next)
			r.firing = next
			if err := next.fault.Inject(ctx, runTarget{r}); err != nil {
				r.log.Warn("re-apply fault", "fault", next.rec.Spec, "err", err)
			}
			r.firing = nil
		}
	}
	if target != "" && !f.acted {
		f.rec.Met, f.rec.MetDetail = false, "a more severe fault on the same target covered it for its whole duration"
	} else if target == "link" {
		hit := f.linkHits
		switch {
		case hit > 0:
			f.rec.Met, f.rec.MetDetail = true, fmt.Sprintf("%d of the agent's connections or responses were hit", hit)
		case r.container != "":
			f.rec.Met, f.rec.MetDetail = true, fmt.Sprintf("attempt %d was alive and cut off for the whole outage", r.current)
		default:
			f.rec.Met, f.rec.MetDetail = false, "no agent was alive during the outage"
		}
	}
	r.saveFault(ctx, f)
	_ = r.appendEventLocked(ctx, "harness.heal", fmt.Sprintf("fault %s healed", f.rec.Spec), map[string]any{"fault": f.rec.Spec})
	r.h.progress("fault %s healed at +%s virtual", f.rec.Spec, chaos.FormatDuration(r.clock.Sub(r.rec.VirtualStart)))
}

// targetOf names what faults of a kind act on, when it holds one state at
// a time: the link, the effect path, the LLM path ("" otherwise).
func (r *run) targetOf(kind string) string {
	k, ok := r.h.opts.Faults.Lookup(kind)
	switch {
	case !ok:
		return ""
	case kind == "netdrop" || kind == "blackhole" || kind == "latency":
		return "link"
	case k.Group == "llm":
		return "llm"
	case kind == "effect-5xx" || kind == "effect-slow":
		return "effect"
	}
	return ""
}

// reapplyTop makes target's acting fault act again (after a one-shot toxic
// took its place for one call).
func (r *run) reapplyTop(target string) {
	f := r.top(target)
	if f == nil {
		return
	}
	r.firing = f
	if err := f.fault.Inject(context.Background(), runTarget{r}); err != nil {
		r.log.Warn("re-apply fault", "fault", f.rec.Spec, "err", err)
	}
	r.firing = nil
}

// severity ranks faults sharing a target: the most severe active one acts
// (an outage makes latency moot), the newest among equals.
var severity = map[string]int{
	"netdrop": 3, "blackhole": 2, "latency": 1,
	"effect-5xx": 2, "effect-slow": 1,
	"llm-429": 2, "llm-5xx": 2, "llm-timeout": 2, "llm-truncated": 1, "llm-malformed-tool-call": 1,
}

// top is the fault acting on target now.
func (r *run) top(target string) *faultState {
	var best *faultState
	for _, f := range r.stacks[target] {
		if best == nil || severity[f.spec.Kind] >= severity[best.spec.Kind] {
			best = f
		}
	}
	return best
}

func (r *run) unstack(target string, f *faultState) {
	st := r.stacks[target]
	for i, g := range st {
		if g == f {
			r.stacks[target] = append(st[:i:i], st[i+1:]...)
			return
		}
	}
}

// resumeEvidence starts counting what hits the agent while f acts.
func (r *run) resumeEvidence(f *faultState) {
	f.acted = true
	if r.link != nil {
		f.linkBefore = r.link.Stats()
	}
}

// suspend credits f with what hit the agent since it started acting.
func (r *run) suspend(f *faultState) {
	if r.link == nil {
		return
	}
	after := r.link.Stats()
	f.linkHits += (after.Reset - f.linkBefore.Reset) + (after.Blackholed - f.linkBefore.Blackholed) + (after.Delayed - f.linkBefore.Delayed)
	f.linkBefore = after
}

// healAll undoes every active fault so that no paused container or
// dropped link outlives the harness's drive of the run. At the end of the
// run (final) the faults are healed for good; on Ctrl-C they are only
// undone physically and stay active in the journal, so that a resume
// applies them again until they heal on schedule.
func (r *run) healAll(ctx context.Context, final bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.faults {
		if !f.active {
			continue
		}
		if final {
			r.heal(context.WithoutCancel(ctx), f)
			continue
		}
		if u, ok := f.fault.(chaos.Undoer); ok {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			if err := u.Undo(uctx, runTarget{r}); err != nil {
				r.log.Warn("undo fault", "fault", f.rec.Spec, "err", err)
			}
			cancel()
		}
	}
}

// fireStep fires the faults a durable checkpoint with this step triggers.
func (r *run) fireStep(ctx context.Context, step int) {
	for _, f := range r.faults {
		if !f.rec.Applied && f.spec.Trigger.Type == chaos.TriggerStep && step >= f.spec.Trigger.N {
			r.fire(ctx, f)
		}
	}
}

// fireEffect fires the faults the n-th effect triggers at this phase.
func (r *run) fireEffect(ctx context.Context, n int, phase chaos.Phase) {
	for _, f := range r.faults {
		if !f.rec.Applied && f.spec.Trigger.Type == chaos.TriggerEffect && f.spec.Trigger.N == n && f.phase == phase {
			r.fire(ctx, f)
		}
	}
}

// nextEvent is the earliest timed event — a t: fault to fire or an active
// fault to heal — at or before limit. Heals come before fires at the same
// instant.
func (r *run) nextEvent(limit time.Time) (at time.Time, f *faultState, heal bool, ok bool) {
	for _, g := range r.faults {
		var t time.Time
		var isHeal bool
		switch {
		case g.active && !g.healAt.IsZero():
			t, isHeal = g.healAt, true
		case !g.rec.Applied:
			ft, timed := g.at(r.rec.VirtualStart)
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

// setClock moves the virtual clock, durably.
func (r *run) setClock(ctx context.Context, t time.Time) error {
	if !t.After(r.clock) {
		return nil
	}
	if err := put(ctx, r.j, clockKey(r.rec.ID), ClockRecord{Now: t}); err != nil {
		return fmt.Errorf("advance the virtual clock: %w", err)
	}
	r.clock = t
	return nil
}

// advanceTo moves virtual time to target (never past the horizon), firing
// every timed event due on the way, each at its own instant: the
// discrete-event core of the clock. stop, checked after each event, ends
// the advance early (the caller's attempt was killed, its connection
// dropped). It reports whether the horizon was reached. mu must be held.
func (r *run) advanceTo(ctx context.Context, target time.Time, stop func() bool) error {
	reached := false
	if target.After(r.horizon) {
		target, reached = r.horizon, true
	}
	for {
		at, f, heal, ok := r.nextEvent(target)
		if !ok {
			break
		}
		if err := r.setClock(ctx, at); err != nil {
			return err
		}
		if heal {
			r.heal(ctx, f)
		} else {
			r.fire(ctx, f)
		}
		if stop != nil && stop() {
			return nil
		}
	}
	if err := r.setClock(ctx, target); err != nil {
		return err
	}
	if reached {
		r.closeHorizon()
	}
	return nil
}

func (r *run) closeHorizon() {
	select {
	case <-r.horizonCh:
	default:
		close(r.horizonCh)
	}
}

// RequestStarted and RequestFinished (gateway.Observer) track agent
// requests in flight, for the idle jump of the clock.
func (r *run) RequestStarted() {
	r.mu.Lock()
	r.inflight++
	r.lastActivity = time.Now()
	r.mu.Unlock()
}

// RequestFinished is RequestStarted's other half.
func (r *run) RequestFinished() {
	r.mu.Lock()
	r.inflight--
	r.lastActivity = time.Now()
	r.mu.Unlock()
}

// idleFallback is how long an attempt that has shown itself may make no
// request at all before virtual time skips ahead anyway: for agents that
// wait in real time instead of sleeping through the gateway. It is longer
// than the SDK's longest retry back-off (1s) and than the longest response
// a latency fault can hold (2s plus 2s of jitter), so an SDK agent
// reconnecting after an outage, or waiting for a delayed reply, is never
// overtaken.
const idleFallback = 5 * time.Second

// idleLoop jumps virtual time to the next scheduled event when every actor
// is waiting, as a time-skipping test server does: the agent's container is
// running, no request is in flight, and either the agent cannot reach the
// gateway at all (the link is down or blackholed, or it is paused) for a
// quantum, or it has made no request for idleFallback. An outage therefore
// heals while the agent is cut off and retrying, and once the link is back
// time moves only when the agent sleeps — so the history stays the same
// from run to run. It ends with ctx.
func (r *run) idleLoop(ctx context.Context) {
	t := time.NewTicker(quantum / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		idle := time.Since(r.lastActivity)
		cutOff := (r.paused != "" && r.paused == r.container) || (r.link != nil && (r.link.State() == chaos.LinkDropped || r.link.State() == chaos.LinkBlackholed))
		waiting := r.container != "" && r.inflight == 0 &&
			((cutOff && idle >= quantum) || (r.seen[r.current] && idle >= idleFallback))
		if r.ended || r.done != nil || !waiting {
			r.mu.Unlock()
			continue
		}
		if at, _, _, ok := r.nextEvent(r.horizon); ok {
			if err := r.advanceTo(context.WithoutCancel(ctx), at, nil); err != nil {
				r.log.Error("advance the clock while the agent is idle", "err", err)
			}
			r.lastActivity = time.Now()
		}
		r.mu.Unlock()
	}
}

// holdDown waits out a stop fault's down window before the next attempt:
// nobody is alive, so virtual time moves straight to its end, firing what is
// scheduled in between.
func (r *run) holdDown(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.downUntil.IsZero() || !r.downUntil.After(r.clock) {
		return nil
	}
	until := r.downUntil
	r.downUntil = time.Time{}
	r.h.progress("agent down until +%s virtual", chaos.FormatDuration(until.Sub(r.rec.VirtualStart)))
	return r.advanceTo(context.WithoutCancel(ctx), until, nil)
}

// applyToxic runs the effect path's toxic for the effect being executed,
// under mu; it returns a failure to answer instead of executing, if any.
func (r *run) applyToxic() *world.Outcome {
	tx, by := r.toxic, r.toxicFault
	if tx == (chaos.EffectToxic{}) {
		return nil
	}
	if tx.Once {
		r.toxic = chaos.EffectToxic{}
		r.reapplyTop("effect")
	}
	if f := by; f != nil && !f.rec.Met {
		f.rec.Met, f.rec.MetDetail = true, fmt.Sprintf("hit effect %d", r.intents)
		r.saveFault(context.Background(), f)
	}
	if tx.Slow > 0 {
		time.Sleep(min(tx.Slow, chaos.MaxEffectSlow))
	}
	if tx.Fail5xx {
		o := world.Failed(http.StatusServiceUnavailable, "unavailable", "the world's API answered 503 (effect-5xx fault): the effect did not run; retry with the same key")
		return &o
	}
	return nil
}

// judgeMet settles whether the agent met the faults whose evidence is only
// known at the end, and returns the records.
func (r *run) judgeMet(ctx context.Context) []FaultRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]FaultRecord, 0, len(r.faults))
	for _, f := range r.faults {
		if f.rec.Applied && f.rec.Error == "" && f.rec.MetDetail == "" {
			switch f.spec.Kind {
			case "api-version":
				if r.intents > f.intents {
					f.rec.Met, f.rec.MetDetail = true, fmt.Sprintf("%d effects were sent under the new API", r.intents-f.intents)
				} else {
					f.rec.MetDetail = "no effect was sent after the API changed"
				}
			case "effect-5xx", "effect-slow":
				f.rec.MetDetail = "no effect was sent while it was active"
			case "llm-429", "llm-5xx", "llm-timeout", "llm-truncated", "llm-malformed-tool-call":
				switch w := f.llmWait; {
				case w == nil:
					f.rec.MetDetail = "no LLM call met it while it was active"
				case w.kind == chaos.LLMRateLimit:
					f.rec.MetDetail = fmt.Sprintf("LLM call %d got the 429, but the agent never called again after waiting Retry-After", w.call)
				case w.kind == chaos.LLMMalformed:
					f.rec.MetDetail = fmt.Sprintf("LLM call %d's tool call %s was broken, but the agent never answered the model with the error", w.call, w.callID)
				default:
					f.rec.MetDetail = fmt.Sprintf("LLM call %d was hit (%s), but the agent never called the model again", w.call, w.kind)
				}
			default:
				f.rec.Met, f.rec.MetDetail = true, "applied"
			}
			r.saveFault(ctx, f)
		}
		out = append(out, f.rec)
	}
	return out
}

// runTarget is what faults act on (chaos.Target).
type runTarget struct{ r *run }

var _ chaos.Target = runTarget{}

func (t runTarget) engineCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	// Bounded: the run's lock is held while a fault acts.
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// container returns the current attempt's container, or an error saying
// there is none to act on.
func (t runTarget) container() (string, error) {
	if t.r.container == "" {
		return "", errors.New("no agent container is running")
	}
	return t.r.container, nil
}

// met credits the fault being injected with having hit the agent.
func (t runTarget) met(detail string) {
	if f := t.r.firing; f != nil {
		f.rec.Met, f.rec.MetDetail = true, detail
	}
}

// markProcess credits the fault being injected with ending the current
// attempt.
func (t runTarget) markProcess(detail string) {
	t.met(detail)
	if f := t.r.firing; f != nil {
		t.r.killedBy[t.r.current] = f.rec.Spec
	}
}

// withEngine runs fn with the Docker engine and a context bounded for one
// engine call.
func (t runTarget) withEngine(ctx context.Context, fn func(context.Context, *sandbox.Engine) error) error {
	eng, err := t.r.h.engine(ctx)
	if err != nil {
		return err
	}
	kctx, cancel := t.engineCtx(ctx)
	defer cancel()
	return fn(kctx, eng)
}

// signal sends sig to the current attempt's container, noting when a
// fault's kill was issued. From then on, replies to the attempt are held
// until its container is seen dead, for at most grace plus
// deathTimeout.
func (t runTarget) signal(ctx context.Context, sig string, grace time.Duration) (string, *sandbox.Engine, error) {
	id, err := t.container()
	if err != nil {
		return "", nil, err
	}
	var engine *sandbox.Engine
	err = t.withEngine(ctx, func(kctx context.Context, eng *sandbox.Engine) error {
		engine = eng
		n := t.r.current
		t.r.killIssued[n] = time.Now()
		t.r.holdMu.Lock()
		t.r.dying[n] = time.Now().Add(grace + deathTimeout)
		t.r.holdMu.Unlock()
		if err := eng.Kill(kctx, id, sig); err != nil {
			delete(t.r.killIssued, n)
			t.r.holdMu.Lock()
			delete(t.r.dying, n)
			t.r.holdMu.Unlock()
			return err
		}
		return nil
	})
	return id, engine, err
}

// deathTimeout bounds how long a signalled container may take to die, past
// its grace, before the replies held back from it go anyway.
const deathTimeout = 30 * time.Second

// HoldReply implements gateway.Holder: a reply to an attempt that a process
// fault signalled waits until its container is seen dead, so the agent never
// hears an answer given after the fault — neither to the request that
// triggered it nor to any later one — however long the signal takes to land
// (the init forwards SIGTERM; a SIGKILLed init takes its children with it
// only when it exits). Without this, how far an agent got after a stop
// would depend on the machine's load.
func (r *run) HoldReply(ctx context.Context, c gateway.Caller) {
	r.holdMu.Lock()
	until, dying := r.dying[c.Attempt]
	dead, alive := r.dead[c.Attempt]
	r.holdMu.Unlock()
	if !dying || !alive {
		return
	}
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-dead:
	case <-ctx.Done():
	case <-r.stopCh:
	case <-t.C:
		r.log.Warn("a signalled container is still alive; its held replies go", "attempt", c.Attempt)
	}
}

// KillAgent implements chaos.Process.
func (t runTarget) KillAgent(ctx context.Context) error {
	if _, _, err := t.signal(ctx, "SIGKILL", 0); err != nil {
		return err
	}
	t.markProcess(fmt.Sprintf("attempt %d's container was killed", t.r.current))
	// Nothing more acts on a killed container: until the supervisor sees it
	// die and starts the next attempt, no fault fires on its behalf.
	t.r.container, t.r.starting = "", ""
	return nil
}

// StopAgent implements chaos.Process: SIGTERM now, SIGKILL after grace (in
// the background), and the next attempt held until down has passed. What
// the agent sends while it shuts down is still handled and journaled, but
// it hears no answer (see HoldReply): an agent that waits for one before
// it exits is SIGKILLed at the end of the grace.
func (t runTarget) StopAgent(ctx context.Context, grace, down time.Duration) error {
	id, eng, err := t.signal(ctx, "SIGTERM", grace)
	if err != nil {
		return err
	}
	go func() {
		select {
		case <-time.After(grace):
		case <-t.r.stopCh:
		}
		kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = eng.Kill(kctx, id, "SIGKILL") // gone already, usually
	}()
	if down > 0 {
		t.r.downUntil = t.r.clock.Add(down)
	}
	t.markProcess(fmt.Sprintf("attempt %d's container was stopped (SIGTERM, grace %s)", t.r.current, grace))
	return nil
}

// PauseAgent implements chaos.Process.
func (t runTarget) PauseAgent(ctx context.Context) error {
	id, err := t.container()
	if err != nil {
		return err
	}
	if err := t.withEngine(ctx, func(kctx context.Context, eng *sandbox.Engine) error { return eng.Pause(kctx, id) }); err != nil {
		return err
	}
	t.r.paused = id
	t.met(fmt.Sprintf("attempt %d's container was frozen", t.r.current))
	return nil
}

// UnpauseAgent implements chaos.Process. A container that died meanwhile
// needs no thawing.
func (t runTarget) UnpauseAgent(ctx context.Context) error {
	id := t.r.paused
	t.r.paused = ""
	if id == "" {
		return nil
	}
	return t.withEngine(ctx, func(kctx context.Context, eng *sandbox.Engine) error {
		if err := eng.Unpause(kctx, id); err != nil && id == t.r.container && !errors.Is(err, sandbox.ErrNotFound) {
			return err
		}
		return nil
	})
}

// CrashHarness implements chaos.Process: the harness SIGKILLs itself.
func (t runTarget) CrashHarness(ctx context.Context) error {
	t.met("the harness died")
	if f := t.r.firing; f != nil {
		_ = put(ctx, t.r.j, faultKey(t.r.rec.ID, f.rec.Index), f.rec)
	}
	return t.r.h.crash()
}

// Drop implements chaos.Network.
func (t runTarget) Drop() { t.r.link.Drop() }

// Blackhole implements chaos.Network.
func (t runTarget) Blackhole() { t.r.link.Blackhole() }

// SetLatency implements chaos.Network.
func (t runTarget) SetLatency(d, jitter time.Duration) { t.r.link.SetLatency(d, jitter) }

// Heal implements chaos.Network.
func (t runTarget) Heal() { t.r.link.Heal() }

// DisconnectSandbox implements chaos.Network: the container leaves the
// run's network (the evidence is the engine saying it is no longer
// attached).
func (t runTarget) DisconnectSandbox(ctx context.Context) error {
	id, err := t.container()
	if err != nil {
		return err
	}
	if t.r.network == "" {
		return errors.New("the sandbox has no network to disconnect (give the scenario sandbox: {network: internal})")
	}
	err = t.withEngine(ctx, func(kctx context.Context, eng *sandbox.Engine) error {
		if err := eng.Disconnect(kctx, t.r.network, id); err != nil {
			return err
		}
		attached, err := eng.Attached(kctx, t.r.network, id)
		if err != nil {
			return err
		}
		if attached {
			return fmt.Errorf("container %.12s is still attached to %s after the disconnect", id, t.r.network)
		}
		return nil
	})
	if err != nil {
		return err
	}
	t.r.detached = id
	t.met(fmt.Sprintf("attempt %d's container was detached from network %s", t.r.current, t.r.network))
	return nil
}

// ReconnectSandbox implements chaos.Network. A container that died
// meanwhile needs nothing; its successor joins the network at creation.
func (t runTarget) ReconnectSandbox(ctx context.Context) error {
	id := t.r.detached
	t.r.detached = ""
	if id == "" || id != t.r.container {
		return nil
	}
	return t.withEngine(ctx, func(kctx context.Context, eng *sandbox.Engine) error { return eng.Connect(kctx, t.r.network, id) })
}

// SetAPIVersion implements chaos.World.
func (t runTarget) SetAPIVersion(ctx context.Context, version string) (string, error) {
	v, ok := t.r.world.(world.Versioned)
	if !ok {
		return "", fmt.Errorf("world %s has no API versions", t.r.world.Name())
	}
	return v.SetAPIVersion(ctx, version, t.r.clock)
}

// SetEffectToxic implements chaos.World.
func (t runTarget) SetEffectToxic(tx chaos.EffectToxic) {
	t.r.toxic = tx
	t.r.toxicFault = t.r.firing
}

// SetLLMToxic implements chaos.LLM.
func (t runTarget) SetLLMToxic(tx chaos.LLMToxic) {
	if t.r.llm == nil {
		return
	}
	t.r.llm.toxic = tx
	t.r.llm.toxicF = t.r.firing
}

// Jump implements chaos.Clock.
func (t runTarget) Jump(ctx context.Context, d time.Duration) error {
	return t.r.advanceTo(ctx, t.r.clock.Add(d), nil)
}

// faultsOf turns a run's fault records back into live fault states.
func faultsOf(reg *chaos.Registry, recs []FaultRecord) ([]*faultState, error) {
	out := make([]*faultState, 0, len(recs))
	for _, fr := range recs {
		spec, err := chaos.ParseSpec(fr.Spec)
		if err != nil {
			return nil, fmt.Errorf("fault %q: %w", fr.Spec, err)
		}
		f, err := reg.Build(spec)
		if err != nil {
			return nil, err
		}
		fs := &faultState{rec: fr, spec: spec, fault: f, phase: reg.PhaseOf(spec)}
		if sf, ok := f.(chaos.Stateful); ok && fr.State != "" {
			sf.Restore(fr.State)
		}
		if fr.Applied && spec.Duration > 0 && fr.HealedVirtual.IsZero() && fr.Error == "" {
			// Fired and not yet healed when the harness stopped: it heals on schedule.
			fs.active, fs.healAt = true, fr.AppliedVirtual.Add(spec.Duration)
		}
		out = append(out, fs)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].rec.Index < out[j].rec.Index })
	return out, nil
}
