package harness

import (
	"context"
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
// Nothing here calls the Docker engine under that lock: a process or
// sandbox-network fault marks what it does at once (so the rest of the run
// sees it) and queues the engine call for when the lock is released
// (run.afterUnlock); if the engine refuses, the marks are taken back and
// the fault is recorded as not injected.
type runTarget struct{ r *run }

var _ chaos.Target = runTarget{}

// deathTimeout bounds how long a signalled container may take to die, past
// its grace, before the replies held back from it go anyway.
const deathTimeout = 30 * time.Second

// container returns the current attempt's container, or an error saying
// there is none to act on.
func (t runTarget) container() (string, error) {
	if t.r.sup.container == "" {
		return "", errors.New("no agent container is running")
	}
	return t.r.sup.container, nil
}

// met credits the fault being injected with having hit the agent (the
// first time it did: a fault acting again on a new attempt keeps its
// evidence).
func (t runTarget) met(detail string) {
	if f := t.r.faults.firing; f != nil && !f.rec.Met {
		f.rec.Met, f.rec.MetDetail = true, detail
	}
}

// engineLater queues fn to run with the Docker engine once the run's lock
// is released, with a context bounded for one engine call. If fn fails,
// undo runs under the lock and the fault that was being injected is
// recorded as not injected.
//
// An engine call that fails because the supervisor had meanwhile ended the
// attempt for reasons of its own (Ctrl-C, the horizon, a spent budget) is
// no failure of the fault: it fired on a live container, which is gone.
func (t runTarget) engineLater(ctx context.Context, fn func(context.Context, *sandbox.Engine) error, undo func()) {
	r, f, n, again := t.r, t.r.faults.firing, t.r.sup.current, t.r.faults.again
	ctx = context.WithoutCancel(ctx)
	r.afterUnlock(func() {
		err := t.withEngine(ctx, fn)
		if err == nil {
			return
		}
		r.mu.Lock()
		defer r.unlock()
		if r.sup.gone(n) {
			r.log.Debug("an engine call of a fault found its attempt ended by the supervisor", "attempt", n, "err", err)
			return
		}
		if again {
			// It acted when it fired; acting again on a later attempt failed.
			r.log.Warn("a fault could not act again", "fault", f.rec.Spec, "attempt", n, "err", err)
			if undo != nil {
				undo()
			}
			return
		}
		if undo != nil {
			undo()
		}
		if f != nil {
			r.faults.injectFailed(ctx, f, err)
		}
	})
}

// withEngine runs fn with the Docker engine and a context bounded for one
// engine call.
func (t runTarget) withEngine(ctx context.Context, fn func(context.Context, *sandbox.Engine) error) error {
	eng, err := t.r.h.engine(ctx)
	if err != nil {
		return err
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return fn(kctx, eng)
}

// signal marks the current attempt as ended by the fault being injected
// and queues sig for its container. From then on, replies to the attempt
// are held until its container is seen dead, for at most grace plus
// deathTimeout (see HoldReply). then, if set, runs after the signal landed.
// A kill also takes the container from the faults at once: nothing more acts
// on it until the supervisor sees it die and starts the next attempt.
func (t runTarget) signal(ctx context.Context, sig string, grace time.Duration, detail string, then func(*sandbox.Engine, string)) error {
	id, err := t.container()
	if err != nil {
		return err
	}
	r := t.r
	n := r.sup.current
	kill := sig == "SIGKILL"
	if kill {
		r.sup.container, r.sup.starting = "", ""
	}
	r.sup.killIssued[n] = time.Now()
	r.holdMu.Lock()
	r.dying[n] = time.Now().Add(grace + deathTimeout)
	r.holdMu.Unlock()
	if f := r.faults.firing; f != nil {
		r.sup.killedBy[n] = f.rec.Spec
	}
	t.met(fmt.Sprintf(detail, n))
	t.engineLater(ctx, func(kctx context.Context, eng *sandbox.Engine) error {
		if err := eng.Kill(kctx, id, sig); err != nil {
			return err
		}
		if then != nil {
			then(eng, id)
		}
		return nil
	}, func() {
		delete(r.sup.killIssued, n)
		delete(r.sup.killedBy, n)
		r.holdMu.Lock()
		delete(r.dying, n)
		r.holdMu.Unlock()
		if kill && r.sup.current == n && r.sup.container == "" {
			r.sup.container = id // it still runs
		}
	})
	return nil
}

// KillAgent implements chaos.Process.
func (t runTarget) KillAgent(ctx context.Context) error {
	return t.signal(ctx, "SIGKILL", 0, "attempt %d's container was killed", nil)
}

// StopAgent implements chaos.Process: SIGTERM now, SIGKILL after grace (in
// the background), and the next attempt held until down has passed. What
// the agent sends while it shuts down is still handled and journaled, but
// it hears no answer (see HoldReply): an agent that waits for one before
// it exits is SIGKILLed at the end of the grace.
func (t runTarget) StopAgent(ctx context.Context, grace, down time.Duration) error {
	stopCh := t.r.stopCh
	err := t.signal(ctx, "SIGTERM", grace, "attempt %d's container was stopped (SIGTERM, grace "+grace.String()+")", func(eng *sandbox.Engine, id string) {
		go func() {
			select {
			case <-time.After(grace):
			case <-stopCh:
			}
			kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = eng.Kill(kctx, id, "SIGKILL") // gone already, usually
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

// PauseAgent implements chaos.Process.
func (t runTarget) PauseAgent(ctx context.Context) error {
	id, err := t.container()
	if err != nil {
		return err
	}
	sup := &t.r.sup
	if sup.paused == id {
		// Frozen already: the fault fired on this container before the
		// supervisor noted its start (the agent's first request did), and
		// is now re-applied to the attempt. A second pause would fail, and
		// its undo would forget the container is frozen.
		return nil
	}
	sup.paused = id
	t.met(fmt.Sprintf("attempt %d's container was frozen", sup.current))
	t.engineLater(ctx, func(kctx context.Context, eng *sandbox.Engine) error {
		err := eng.Pause(kctx, id)
		if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			// A call that failed — timed out, say, on a loaded engine —
			// may still have frozen the container: the fault is recorded
			// as not injected, so nothing would ever thaw it.
			uctx, cancel := context.WithTimeout(context.WithoutCancel(kctx), 30*time.Second)
			defer cancel()
			if uerr := eng.Unpause(uctx, id); uerr != nil {
				err = errors.Join(err, uerr)
			}
		}
		return err
	}, func() {
		if sup.paused == id {
			sup.paused = ""
		}
	})
	return nil
}

// UnpauseAgent implements chaos.Process. A container that died meanwhile
// needs no thawing.
func (t runTarget) UnpauseAgent(ctx context.Context) error {
	sup := &t.r.sup
	id := sup.paused
	sup.paused = ""
	if id == "" {
		return nil
	}
	t.undoLater(ctx, "thaw container", id, func(kctx context.Context, eng *sandbox.Engine) error { return eng.Unpause(kctx, id) })
	return nil
}

// undoLater queues an engine call that undoes a fault, for when the run's
// lock is released; a container that died meanwhile needs nothing, and any
// other failure is logged (the fault heals in the journal all the same).
func (t runTarget) undoLater(ctx context.Context, what, id string, fn func(context.Context, *sandbox.Engine) error) {
	log := t.r.log
	t.r.afterUnlock(func() {
		if err := t.withEngine(ctx, fn); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			log.Warn(what, "container", id, "err", err)
		}
	})
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

// DisconnectSandbox implements chaos.Network: the container leaves the
// run's network (the evidence is the engine saying it is no longer
// attached).
func (t runTarget) DisconnectSandbox(ctx context.Context) error {
	id, err := t.container()
	if err != nil {
		return err
	}
	network := t.r.network
	if network == "" {
		return errors.New("the sandbox has no network to disconnect (give the scenario sandbox: {network: internal})")
	}
	sup := &t.r.sup
	if sup.detached == id {
		return nil // detached already (see PauseAgent)
	}
	sup.detached = id
	t.met(fmt.Sprintf("attempt %d's container was detached from network %s", sup.current, network))
	t.engineLater(ctx, func(kctx context.Context, eng *sandbox.Engine) error {
		if err := eng.Disconnect(kctx, network, id); err != nil {
			if !errors.Is(err, sandbox.ErrNotFound) {
				// As for a pause: a call that failed may have landed all
				// the same, and nothing would attach the sandbox again.
				uctx, cancel := context.WithTimeout(context.WithoutCancel(kctx), 30*time.Second)
				defer cancel()
				if attached, aerr := eng.Attached(uctx, network, id); aerr == nil && !attached {
					if cerr := eng.Connect(uctx, network, id); cerr != nil {
						err = errors.Join(err, cerr)
					}
				}
			}
			return err
		}
		attached, err := eng.Attached(kctx, network, id)
		if err != nil {
			return err
		}
		if attached {
			return fmt.Errorf("container %.12s is still attached to %s after the disconnect", id, network)
		}
		return nil
	}, func() {
		if sup.detached == id {
			sup.detached = ""
		}
	})
	return nil
}

// ReconnectSandbox implements chaos.Network. A container that died
// meanwhile needs nothing; its successor joins the network at creation.
func (t runTarget) ReconnectSandbox(ctx context.Context) error {
	sup := &t.r.sup
	id := sup.detached
	sup.detached = ""
	if id == "" || id != sup.container {
		return nil
	}
	network := t.r.network
	t.undoLater(ctx, "attach container to its network again", id, func(kctx context.Context, eng *sandbox.Engine) error { return eng.Connect(kctx, network, id) })
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

// SetEffectToxic implements chaos.World.
func (t runTarget) SetEffectToxic(tx chaos.EffectToxic) {
	t.r.fx.toxic, t.r.fx.toxicFault = tx, t.r.faults.firing
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
