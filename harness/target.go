package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// runTarget is what faults act on (chaos.Target): the run's containers,
// link, world, effect path, LLM path and clock. Its methods are called
// under the run's lock, while the fault engine fires or heals a fault.
// Nothing here calls the sandbox backend under that lock: a process or
// sandbox-network fault marks what it does at once (so the rest of the run
// sees it) and queues the call for when the lock is released
// (run.afterUnlock); if the backend refuses, the marks are taken back and
// the fault is recorded as not injected.
type runTarget struct{ r *run }

var _ chaos.Target = runTarget{}

// deathTimeout bounds how long a signalled sandbox may take to die, past
// its grace, before the replies held back from it go anyway.
const deathTimeout = 30 * time.Second

// callTimeout bounds one call of a fault to the sandbox backend.
const callTimeout = 30 * time.Second

// current returns the current attempt's sandbox, or an error saying there
// is none to act on.
func (t runTarget) current() (sandbox.Sandbox, error) {
	if t.r.sup.box == nil {
		return nil, errors.New("no agent sandbox is running")
	}
	return t.r.sup.box, nil
}

// met credits the fault being injected with having hit the agent (the
// first time it did: a fault acting again on a new attempt keeps its
// evidence).
func (t runTarget) met(detail string) {
	if f := t.r.faults.firing; f != nil && !f.rec.Met {
		f.rec.Met, f.rec.MetDetail = true, detail
	}
}

// later queues fn — a call to the sandbox backend — for when the run's
// lock is released, with a context bounded for one call. If fn fails,
// undo runs under the lock and the fault that was being injected is
// recorded as not injected.
//
// A call that fails because the supervisor had meanwhile ended the attempt
// for reasons of its own (Ctrl-C, the horizon, a spent budget) is no
// failure of the fault: it fired on a live sandbox, which is gone.
func (t runTarget) later(ctx context.Context, fn func(context.Context) error, undo func()) {
	r, f, n, again := t.r, t.r.faults.firing, t.r.sup.current, t.r.faults.again
	ctx = context.WithoutCancel(ctx)
	r.afterUnlock(func() {
		kctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := fn(kctx)
		cancel()
		if err == nil {
			return
		}
		r.mu.Lock()
		defer r.unlock()
		if r.sup.gone(n) {
			r.log.Debug("a fault's call to the sandbox found its attempt ended by the supervisor", "attempt", n, "err", err)
			return
		}
		if undo != nil {
			undo()
		}
		if again {
			// It acted when it fired; acting again on a later attempt failed.
			r.log.Warn("a fault could not act again", "fault", f.rec.Spec, "attempt", n, "err", err)
			return
		}
		if f != nil {
			r.faults.injectFailed(ctx, f, err)
		}
	})
}

// signal marks the current attempt as ended by the fault being injected
// and queues sig for its sandbox. From then on, replies to the attempt
// are held until its sandbox is seen dead, for at most grace plus
// deathTimeout (see HoldReply). then, if set, runs after the signal landed.
// A kill also takes the sandbox from the faults at once: nothing more acts
// on it until the supervisor sees it die and starts the next attempt.
func (t runTarget) signal(ctx context.Context, sig string, grace time.Duration, detail string, then func(sandbox.Sandbox)) error {
	sb, err := t.current()
	if err != nil {
		return err
	}
	r := t.r
	n := r.sup.current
	kill := sig == "SIGKILL"
	if kill {
		r.sup.box, r.sup.starting = nil, nil
	}
	r.sup.killIssued[n] = time.Now()
	r.holdMu.Lock()
	r.dying[n] = time.Now().Add(grace + deathTimeout)
	r.holdMu.Unlock()
	if f := r.faults.firing; f != nil {
		r.sup.killedBy[n] = f.rec.Spec
		if kill {
			r.sup.sigkilled[n] = true
		}
	}
	t.met(fmt.Sprintf(detail, n))
	t.later(ctx, func(kctx context.Context) error {
		if err := sb.Signal(kctx, sig); err != nil {
			return err
		}
		if then != nil {
			then(sb)
		}
		return nil
	}, func() {
		delete(r.sup.killIssued, n)
		delete(r.sup.killedBy, n)
		delete(r.sup.sigkilled, n)
		r.holdMu.Lock()
		delete(r.dying, n)
		r.holdMu.Unlock()
		if kill && r.sup.current == n && r.sup.box == nil {
			r.sup.box = sb // it still runs
		}
	})
	return nil
}

// KillAgent implements chaos.Process.
func (t runTarget) KillAgent(ctx context.Context) error {
	return t.signal(ctx, "SIGKILL", 0, "attempt %d's sandbox was killed", nil)
}

// StopAgent implements chaos.Process: SIGTERM now, SIGKILL after grace (in
// the background), and the next attempt held until down has passed. What
// the agent sends while it shuts down is still handled and journaled, but
// it hears no answer (see HoldReply): an agent that waits for one before
// it exits is SIGKILLed at the end of the grace.
func (t runTarget) StopAgent(ctx context.Context, grace, down time.Duration) error {
	stopCh := t.r.stopCh
	err := t.signal(ctx, "SIGTERM", grace, "attempt %d's sandbox was stopped (SIGTERM, grace "+grace.String()+")", func(sb sandbox.Sandbox) {
		go func() {
			select {
			case <-time.After(grace):
			case <-stopCh:
			}
			kctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			_ = sb.Signal(kctx, "SIGKILL") // gone already, usually
		}()
	})
	if err != nil {
		return err
	}
	if f := t.r.faults.firing; f != nil && down > 0 {
		f.rec.DownUntil = t.r.clock.now.Add(down)
	}
	return nil
}

// lasting is a fault that holds the current attempt's sandbox in a state
// until it heals — frozen, or cut from its network — through one of the
// backend's optional capabilities.
type lasting struct {
	held  *sandbox.Sandbox // the supervisor's note of the sandbox it holds (sup.frozen, sup.cut)
	need  sandbox.Capability
	done  string                                       // what happened to attempt %d's sandbox, for the evidence
	apply func(context.Context, sandbox.Sandbox) error // puts it in the state, and checks it is
	// undo takes it out of the state; it is safe when the sandbox is not
	// in it (a call that failed may or may not have landed).
	undo func(context.Context, sandbox.Sandbox) error
}

// hold applies l to the current sandbox: noted at once (so the rest of
// the run sees it), the call queued; a call that failed — timed out, say,
// on a loaded engine — may have landed all the same, so it is undone
// before the fault is recorded as not injected, or nothing would ever undo
// it.
func (t runTarget) hold(ctx context.Context, l lasting) error {
	sb, err := t.current()
	if err != nil {
		return err
	}
	if err := t.r.h.capable(l.need); err != nil {
		return err
	}
	if *l.held == sb {
		// It holds this sandbox already: the fault fired on it before the
		// supervisor noted its start (the agent's first request did), and
		// is now re-applied to the attempt. A second call would fail, and
		// its undo would forget the sandbox is held.
		return nil
	}
	*l.held = sb
	t.met(fmt.Sprintf(l.done, t.r.sup.current))
	t.later(ctx, func(kctx context.Context) error {
		err := l.apply(kctx, sb)
		if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(kctx), callTimeout)
			defer cancel()
			if uerr := l.undo(uctx, sb); uerr != nil {
				err = errors.Join(err, uerr)
			}
		}
		return err
	}, func() {
		if *l.held == sb {
			*l.held = nil
		}
	})
	return nil
}

// release undoes l on the sandbox it holds, once the run's lock is
// released; a sandbox that died meanwhile needs nothing (its successor
// starts out of the state), and any other failure is logged (the fault
// heals in the journal all the same).
func (t runTarget) release(ctx context.Context, l lasting, what string) {
	sb := *l.held
	*l.held = nil
	if sb == nil {
		return
	}
	log := t.r.log
	ctx = context.WithoutCancel(ctx)
	t.r.afterUnlock(func() {
		kctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		if err := l.undo(kctx, sb); err != nil && !errors.Is(err, sandbox.ErrNotFound) && !errors.Is(err, sandbox.ErrNotRunning) {
			log.Warn(what, "sandbox", sb.ID(), "err", err)
		}
	})
}

// freeze is the pause fault: every process of the sandbox frozen.
func (t runTarget) freeze() lasting {
	return lasting{held: &t.r.sup.frozen, need: sandbox.CapFreeze, done: "attempt %d's sandbox was frozen",
		apply: func(ctx context.Context, sb sandbox.Sandbox) error { return sb.(sandbox.Freezer).Freeze(ctx) },
		undo:  func(ctx context.Context, sb sandbox.Sandbox) error { return sb.(sandbox.Freezer).Thaw(ctx) }}
}

// cut is the disconnect fault: the sandbox cut from its run's network (the
// evidence is the backend saying the link is down).
func (t runTarget) cut() lasting {
	return lasting{held: &t.r.sup.cut, need: sandbox.CapLink, done: "attempt %d's sandbox was cut from its run's network",
		apply: func(ctx context.Context, sb sandbox.Sandbox) error {
			lc := sb.(sandbox.LinkCutter)
			if err := lc.CutLink(ctx); err != nil {
				return err
			}
			if up, err := lc.Linked(ctx); err != nil || up {
				return errors.Join(err, fmt.Errorf("sandbox %.12s is still linked to its run's network after the cut", sb.ID()))
			}
			return nil
		},
		undo: func(ctx context.Context, sb sandbox.Sandbox) error {
			lc := sb.(sandbox.LinkCutter)
			if up, err := lc.Linked(ctx); err != nil || up {
				return err
			}
			return lc.RestoreLink(ctx)
		}}
}

// PauseAgent implements chaos.Process.
func (t runTarget) PauseAgent(ctx context.Context) error { return t.hold(ctx, t.freeze()) }

// UnpauseAgent implements chaos.Process.
func (t runTarget) UnpauseAgent(ctx context.Context) error {
	t.release(ctx, t.freeze(), "thaw sandbox")
	return nil
}

// CrashHarness implements chaos.Process: the harness SIGKILLs itself.
func (t runTarget) CrashHarness(ctx context.Context) error {
	t.met("the harness died")
	if f := t.r.faults.firing; f != nil {
		_ = t.r.saveFault(ctx, f.rec)
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

// DisconnectSandbox implements chaos.Network: the sandbox leaves its run's
// network.
func (t runTarget) DisconnectSandbox(ctx context.Context) error {
	if !t.r.network {
		return errors.New("the sandbox has no network to disconnect (give the scenario sandbox: {network: internal})")
	}
	return t.hold(ctx, t.cut())
}

// ReconnectSandbox implements chaos.Network. A sandbox that died meanwhile
// needs nothing; its successor joins the network at its start.
func (t runTarget) ReconnectSandbox(ctx context.Context) error {
	if t.r.sup.cut != nil && t.r.sup.cut != t.r.sup.box {
		t.r.sup.cut = nil
		return nil
	}
	t.release(ctx, t.cut(), "link sandbox to its network again")
	return nil
}

// SetAPIVersion implements chaos.World.
func (t runTarget) SetAPIVersion(ctx context.Context, version string) (string, error) {
	v, ok := t.r.world.(world.Versioned)
	if !ok {
		return "", fmt.Errorf("world %s has no API versions", t.r.world.Name())
	}
	return v.SetAPIVersion(ctx, version, t.r.clock.now)
}

// FireWorldEvent implements chaos.World: the world event happens to the
// run's world (its unprefixed one, behind a router) at the run's virtual
// time, recorded in its ledger.
func (t runTarget) FireWorldEvent(ctx context.Context, kind string, args json.RawMessage) (json.RawMessage, error) {
	ew, ok := t.r.world.(world.Eventful)
	if !ok || !world.HasEvent(ew.Events(), kind) {
		return nil, fmt.Errorf("world %s does not undergo the world event %s", t.r.world.Name(), kind)
	}
	out, err := ew.FireEvent(ctx, world.Event{Kind: kind, Args: args, Now: t.r.clock.now})
	if err != nil {
		return nil, err
	}
	return out.Result, nil
}

// SetEffectToxic implements chaos.World.
func (t runTarget) SetEffectToxic(tx chaos.EffectToxic) {
	t.r.fx.toxic, t.r.fx.toxicFault = tx, t.r.faults.firing
}

// CrashWorld implements chaos.World: the run's command or image world is
// SIGKILLed once the run's lock is released (before the agent hears
// anything), and started again on its data when next reached. Fired at
// an effect, before the world saw it or after it acted, that effect's
// answer is lost (see effectPath.execute). An isolated run's world is an
// instance of its parent's, which the parent may be using: it is not
// killed, and the answer is lost all the same.
func (t runTarget) CrashWorld(ctx context.Context) error {
	r := t.r
	w := r.scen.World
	if len(w.Command) == 0 && w.Image == "" {
		return fmt.Errorf("world %s is not one the harness starts: there is nothing to kill", w.Label())
	}
	detail := "the run's world was killed"
	if f := r.faults.firing; f != nil && f.spec.Trigger.Type == chaos.TriggerEffect {
		n := r.fx.intents
		switch f.phase {
		case chaos.PhaseBefore:
			r.fx.lost = &lostAnswer{by: f.rec.Spec, before: true}
			detail = fmt.Sprintf("the run's world was killed before effect %d reached it", n)
		case chaos.PhaseMid:
			r.fx.lost = &lostAnswer{by: f.rec.Spec}
			detail = fmt.Sprintf("the run's world was killed after it acted on effect %d, whose answer was lost", n)
		}
	}
	if r.rec.Isolated != nil {
		t.met(detail + " (an isolated run's: its answer only; the world is its parent's)")
		return nil
	}
	t.met(detail)
	f := r.faults.firing
	ctx = context.WithoutCancel(ctx)
	r.afterUnlock(func() {
		kctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := r.h.killWorld(kctx, r.rec.ID, w)
		cancel()
		if err == nil || f == nil {
			return
		}
		r.mu.Lock()
		defer r.unlock()
		r.faults.injectFailed(ctx, f, err)
	})
	return nil
}

// SetLLMToxic implements chaos.LLM.
func (t runTarget) SetLLMToxic(tx chaos.LLMToxic) {
	if t.r.llm != nil {
		t.r.llm.toxic, t.r.llm.toxicFault = tx, t.r.faults.firing
	}
}

// Jump implements chaos.Clock.
func (t runTarget) Jump(ctx context.Context, d time.Duration) error {
	return t.r.clock.advanceTo(ctx, t.r.clock.now.Add(d), &t.r.faults, nil)
}
