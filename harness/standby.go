package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/overnight-dev/overnight/sandbox"
)

// StandbyPolicy says when a run starts its next attempt's sandbox ahead
// (Options.Standby).
type StandbyPolicy int

const (
	// StandbyAuto starts one where it pays: a run whose fault schedule
	// ends the agent's attempts (kill, stop, restart: chaos.Kind's
	// EndsAttempt), and a run with an attempt policy (a reflection, which
	// may start another attempt after a failure). Not a suite's plain
	// runs, whose one attempt would leave it unused: their throughput is
	// bound by the container runtime's CPU.
	StandbyAuto StandbyPolicy = iota
	// StandbyOff starts every attempt cold.
	StandbyOff
	// StandbyOn starts one for every run.
	StandbyOn
)

// standbyStartTimeout bounds the start of one standby in the background.
const standbyStartTimeout = 2 * time.Minute

// wantsStandby reports whether the run keeps a standby ahead.
func (r *run) wantsStandby() bool {
	switch r.h.opts.Standby {
	case StandbyOff:
		return false
	case StandbyOn:
		return true
	}
	return r.hooks.Next != nil || slices.ContainsFunc(r.faults.faults, func(f *faultState) bool { return f.kind.EndsAttempt })
}

// standbys keeps one sandbox started ahead for a run's next attempt: made
// in the background once an attempt's own sandbox runs, taken over by the
// next attempt, removed when the run stops driving. Its methods are called
// by the supervisor's goroutine.
type standbys struct {
	st   sandbox.Standbys // nil: the backend has none, or the run wants none
	next *pendingStandby
}

// pendingStandby is a standby being started, or started, for one attempt.
type pendingStandby struct {
	attempt int
	ready   chan struct{} // closed once the start returned
	sb      sandbox.Standby
	err     error
	died    chan struct{} // closed if it exits before it is taken over
	stop    context.CancelFunc
}

// prepare starts a standby for spec's attempt in the background (with ctx's
// values, not its cancellation: drop ends it).
func (s *standbys) prepare(ctx context.Context, spec sandbox.Spec) {
	if s.st == nil || s.next != nil {
		return
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p := &pendingStandby{attempt: spec.Attempt, ready: make(chan struct{}), died: make(chan struct{}), stop: stop}
	s.next = p
	go func() {
		sctx, cancel := context.WithTimeout(wctx, standbyStartTimeout)
		p.sb, p.err = s.st.StartStandby(sctx, spec)
		cancel()
		close(p.ready)
		if p.err != nil {
			return
		}
		_, _ = p.sb.Wait(wctx)
		if wctx.Err() == nil {
			close(p.died)
		}
	}()
}

// take hands over the standby started for attempt n, if there is one that
// still waits: it waits for a start under way (the standby holds the
// attempt's name: a cold start beside it would be refused). A standby
// that failed, died, or was made for another attempt is removed, and take
// returns nil and why: the attempt starts cold.
func (s *standbys) take(ctx context.Context, n int, h sandbox.Handover) (sandbox.Standby, error) {
	p := s.next
	if p == nil {
		return nil, nil
	}
	s.next = nil
	<-p.ready // bounded by standbyStartTimeout
	if p.err != nil {
		return nil, fmt.Errorf("standby for attempt %d did not start: %w", p.attempt, p.err)
	}
	select {
	case <-p.died:
		return nil, errors.Join(fmt.Errorf("standby %.12s for attempt %d exited before it was taken over", p.sb.ID(), p.attempt), p.drop(ctx))
	default:
	}
	if p.attempt != n {
		return nil, errors.Join(fmt.Errorf("standby %.12s was made for attempt %d, not %d", p.sb.ID(), p.attempt, n), p.drop(ctx))
	}
	p.stop() // its own Wait ends: the attempt waits on it now
	if err := p.sb.TakeOver(ctx, h); err != nil {
		return nil, errors.Join(err, p.drop(ctx))
	}
	return p.sb, nil
}

// drop removes the standby waiting ahead, if any, once its start returned.
func (s *standbys) drop(ctx context.Context) error {
	p := s.next
	s.next = nil
	if p == nil {
		return nil
	}
	<-p.ready
	return p.drop(ctx)
}

// drop removes p's standby (it finishes even if ctx is cancelled).
func (p *pendingStandby) drop(ctx context.Context) error {
	p.stop()
	if p.sb == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return p.sb.Remove(rctx)
}
