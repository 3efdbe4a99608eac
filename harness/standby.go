package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/chaos"
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

// standbysAhead is how many attempts ahead a run keeps standbys started:
// one, or two when an attempt-ending fault recurs (every:, rate:), whose
// attempts may be shorter than a container's start (200–800 ms on a
// loaded engine) — with one ahead, the next would still be starting when
// the kill lands. Options.standbyAhead overrides it (tests, benchmarks).
func (r *run) standbysAhead() int {
	if k := r.h.opts.standbyAhead; k > 0 {
		return k
	}
	// A recurring spec is expanded into t: instances; what was written is
	// in each instance's From.
	recurs := slices.ContainsFunc(r.faults.faults, func(f *faultState) bool {
		if !f.kind.EndsAttempt {
			return false
		}
		from, err := chaos.ParseSpec(f.rec.From)
		return err == nil && (from.Trigger.Type == chaos.TriggerEvery || from.Trigger.Type == chaos.TriggerRate)
	})
	if recurs {
		return 2
	}
	return 1
}

// standbys keeps sandboxes started ahead for a run's next attempts: made
// in the background once an attempt's own sandbox runs, each taken over by
// the attempt it was made for, the rest removed when the run stops
// driving. A value has one owner at a time — a run's supervisor, or one
// IsolatedStandby until its run's drive takes a copy — whose goroutine
// calls its methods.
type standbys struct {
	st    sandbox.Standbys  // nil: the backend has none, or the run wants none
	ahead int               // how many attempts ahead are kept started
	next  []*pendingStandby // by attempt, ascending
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

// keepAhead starts, in the background, the standbys missing for the
// attempts after n, up to s.ahead of them and no further than attempt
// last; base is the spec they share (its Attempt is set for each).
func (s *standbys) keepAhead(ctx context.Context, base sandbox.Spec, n, last int) {
	for m := n + 1; m <= n+s.ahead && m <= last; m++ {
		spec := base
		spec.Attempt = m
		s.prepare(ctx, spec)
	}
}

// prepare starts a standby for spec's attempt in the background, unless
// there is one for it (with ctx's values, not its cancellation: drop ends
// it).
func (s *standbys) prepare(ctx context.Context, spec sandbox.Spec) {
	if s.st == nil || slices.ContainsFunc(s.next, func(p *pendingStandby) bool { return p.attempt == spec.Attempt }) {
		return
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p := &pendingStandby{attempt: spec.Attempt, ready: make(chan struct{}), died: make(chan struct{}), stop: stop}
	i, _ := slices.BinarySearchFunc(s.next, spec.Attempt, func(p *pendingStandby, n int) int { return p.attempt - n })
	s.next = slices.Insert(s.next, i, p)
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
// attempt's name: a cold start beside it would be refused). Standbys made
// for earlier attempts are removed, those for later ones kept. A standby
// that failed or died is removed, and take returns nil and why: the
// attempt starts cold. With a standby, the error is what removing the
// earlier ones left.
func (s *standbys) take(ctx context.Context, n int, h sandbox.Handover) (sandbox.Standby, error) {
	var errs []error
	for len(s.next) > 0 && s.next[0].attempt < n {
		p := s.next[0]
		s.next = s.next[1:]
		<-p.ready
		errs = append(errs, p.drop(ctx))
	}
	if len(s.next) == 0 || s.next[0].attempt != n {
		return nil, errors.Join(errs...)
	}
	p := s.next[0]
	s.next = s.next[1:]
	<-p.ready // bounded by standbyStartTimeout
	if p.err != nil {
		return nil, errors.Join(append(errs, fmt.Errorf("standby for attempt %d did not start: %w", p.attempt, p.err))...)
	}
	select {
	case <-p.died:
		return nil, errors.Join(append(errs, fmt.Errorf("standby %.12s for attempt %d exited before it was taken over", p.sb.ID(), p.attempt), p.drop(ctx))...)
	default:
	}
	p.stop() // its own Wait ends: the attempt waits on it now
	if err := p.sb.TakeOver(ctx, h); err != nil {
		return nil, errors.Join(append(errs, err, p.drop(ctx))...)
	}
	return p.sb, errors.Join(errs...)
}

// drop removes the standbys waiting ahead, each once its start returned,
// side by side.
func (s *standbys) drop(ctx context.Context) error {
	next := s.next
	s.next = nil
	errs := make([]error, len(next))
	var wg sync.WaitGroup
	for i, p := range next {
		wg.Go(func() {
			<-p.ready
			errs[i] = p.drop(ctx)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
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
