package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/history"
)

// quantum is how long no agent request may be in flight before virtual time
// jumps to the next scheduled event (an outage heals even while the agent
// is cut off and retrying).
const quantum = 100 * time.Millisecond

// idleFallback is how long an attempt that has shown itself may make no
// request at all before virtual time skips ahead anyway: for agents that
// wait in real time instead of sleeping through the gateway. It is longer
// than the SDK's longest retry back-off (1s) and than the longest response
// a latency fault can hold (2s plus 2s of jitter), so an SDK agent
// reconnecting after an outage, or waiting for a delayed reply, is never
// overtaken.
const idleFallback = 5 * time.Second

// virtualClock is the run's virtual time: discrete-event, as a simulator's.
// It moves only when the agent sleeps, when a fault moves it, or when every
// actor is waiting (the idle jump), and never past the horizon. Its methods
// run under the run's lock.
type virtualClock struct {
	start, now, horizon time.Time
	horizonCh           chan struct{} // closed when the horizon is reached
	save                func(ctx context.Context, now time.Time) error

	inflight     int       // agent requests in flight
	lastActivity time.Time // when one last started or finished (wall clock)
}

// eventSource is what the clock fires on its way: the fault engine's timed
// events (faults due at a virtual time, heals of lasting faults).
type eventSource interface {
	// next is the earliest event at or before limit.
	next(limit time.Time) (at time.Time, ok bool)
	// fireNext fires the earliest event due at the clock's current time.
	fireNext(ctx context.Context)
}

func newClock(start, now, horizon time.Time, save func(context.Context, time.Time) error) virtualClock {
	c := virtualClock{start: start, now: now, horizon: horizon, horizonCh: make(chan struct{}), save: save}
	if !now.Before(horizon) {
		close(c.horizonCh)
	}
	return c
}

// reached reports whether the horizon is reached.
func (c *virtualClock) reached() bool {
	select {
	case <-c.horizonCh:
		return true
	default:
		return false
	}
}

// span is the run's virtual length, start to horizon.
func (c *virtualClock) span() time.Duration { return c.horizon.Sub(c.start) }

// set moves the clock forward, durably.
func (c *virtualClock) set(ctx context.Context, t time.Time) error {
	if !t.After(c.now) {
		return nil
	}
	if err := c.save(ctx, t); err != nil {
		return fmt.Errorf("advance the virtual clock: %w", err)
	}
	c.now = t
	return nil
}

func (c *virtualClock) closeHorizon() {
	if !c.reached() {
		close(c.horizonCh)
	}
}

// advanceTo moves virtual time to target (never past the horizon), firing
// every timed event due on the way, each at its own instant: the
// discrete-event core of the clock. stop, checked after each event, ends
// the advance early (the caller's attempt was killed, its connection
// dropped).
func (c *virtualClock) advanceTo(ctx context.Context, target time.Time, events eventSource, stop func() bool) error {
	reached := false
	if target.After(c.horizon) {
		target, reached = c.horizon, true
	}
	for {
		at, ok := events.next(target)
		if !ok {
			break
		}
		if err := c.set(ctx, at); err != nil {
			return err
		}
		events.fireNext(ctx)
		if stop != nil && stop() {
			return nil
		}
	}
	if err := c.set(ctx, target); err != nil {
		return err
	}
	if reached {
		c.closeHorizon()
	}
	return nil
}

func (c *virtualClock) requestStarted() {
	c.inflight++
	c.lastActivity = time.Now()
}

func (c *virtualClock) requestFinished() {
	c.inflight--
	c.lastActivity = time.Now()
}

// idleLoop jumps virtual time to the next scheduled event when every actor
// is waiting, as a time-skipping test server does: the agent's container is
// running, no request is in flight, and either the agent cannot reach the
// gateway at all (the link is down or blackholed, or it is paused) for a
// quantum, or it has made no request for idleFallback. An outage therefore
// heals while the agent is cut off and retrying, and once the link is back
// time moves only when the agent sleeps — so the history stays the same
// from run to run. It ends with ctx — at the end of the drive, and at once
// when the run is interrupted, so that nothing heals for good after Ctrl-C.
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
		idle := time.Since(r.clock.lastActivity)
		cutOff := r.sup.isFrozen() || (r.link != nil && (r.link.State() == chaos.LinkDropped || r.link.State() == chaos.LinkBlackholed))
		waiting := r.sup.box != nil && r.clock.inflight == 0 &&
			((cutOff && idle >= quantum) || (r.sup.seen[r.sup.current] && idle >= idleFallback))
		if ctx.Err() != nil || r.ended || r.done != nil || !waiting {
			r.mu.Unlock()
			continue
		}
		if at, ok := r.faults.next(r.clock.horizon); ok {
			if err := r.clock.advanceTo(context.WithoutCancel(ctx), at, &r.faults, nil); err != nil {
				r.log.Error("advance the clock while the agent is idle", "err", err)
			}
			r.clock.lastActivity = time.Now()
		}
		r.unlock()
	}
}

// holdDown waits out a stop fault's down window before the next attempt:
// nobody is alive, so virtual time moves straight to its end, firing what is
// scheduled in between.
func (r *run) holdDown(ctx context.Context) error {
	r.mu.Lock()
	defer r.unlock()
	until := r.faults.downUntil()
	if until.IsZero() || !until.After(r.clock.now) {
		return nil
	}
	r.progress("agent down until %s virtual", history.VirtualInstant(until.Sub(r.clock.start)))
	return r.clock.advanceTo(context.WithoutCancel(ctx), until, &r.faults, nil)
}
