package reflect

import (
	"context"
	"slices"
	"sync"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
)

// standbys are the isolated runs one reflection reserved ahead
// (harness.StandbyIsolated): one per replay, the counterfactual's and the
// verification's. Reserved as the run began (reserveAhead), they start side
// by side while the run works towards its failure; reserved as the
// reflection opens, the verification's comes once the others have started.
// Each isolated run takes the one of its role; what none took is released
// when the reflection ends (those no reflection took, when the run's drive
// ends).
//
// Why the verification's comes later then: the engine starts sandboxes at
// once nearly one after another on a small machine (five at once take
// about three times one alone), and the replays' are what the reflection
// waits for first. Started after them, the verification's sandbox starts
// while the replays' agents run and the failure is diagnosed.
type standbys struct {
	replays []*harness.IsolatedStandby // the replays', then the counterfactual's
	// reserved is closed once the verification's is reserved (verify set)
	// or will not be (verify nil).
	reserved chan struct{}
	verify   *harness.IsolatedStandby
}

// reserveAhead reserves the isolated runs of the run's first reflection as
// the run begins, where that pays: a run with reflection and a fault
// schedule (what a reflection is most often about), driven for the first
// time. Their sandboxes then start while the run's first attempt works
// towards its failure, not after it — a run that never fails has started
// them for nothing, and they go when its drive ends. (Before any
// failure, or before the reflector is shared.)
func (rf *reflector) reserveAhead() {
	if rf.x.opts.IsolatedAtFailure || rf.rec.Attempts > 0 || len(rf.refls) > 0 || len(rf.rec.Faults) == 0 || rf.scen.Reflect.Max < 1 {
		return
	}
	rf.ahead = rf.reserve("the run's first reflection", false)
}

// take gives reflection r the isolated runs reserved for it: those
// reserved as the run began, or else reserved now (mu held).
func (rf *reflector) take(r *history.ReflectionRecord) {
	s := rf.ahead
	rf.ahead = nil
	if s == nil {
		s = rf.reserve("reflection "+r.ID, true)
	}
	if s != nil {
		rf.standby[r.ID] = s
	}
}

// reserve starts the sandboxes of a reflection's replays, counterfactual
// and verification ahead — when the harness has standbys and the options
// allow them (Options.ColdIsolated) —, all at once, or, staggered, the
// verification's once the others have started (nil: none; the isolated
// runs start cold).
func (rf *reflector) reserve(of string, staggered bool) *standbys {
	if rf.x.opts.ColdIsolated {
		return nil
	}
	n := rf.scen.Reflect.Replays + 1
	if !staggered {
		n++
	}
	all, err := rf.h.StandbyIsolated(rf.ctx, rf.rec.ID, n)
	if err != nil {
		rf.log.Warn("isolated runs start cold: no standbys", "for", of, "err", err)
		return nil
	}
	if len(all) == 0 {
		return nil
	}
	s := &standbys{replays: all, reserved: make(chan struct{})}
	if !staggered {
		s.replays, s.verify = all[:n-1], all[n-1]
		close(s.reserved)
		return s
	}
	go s.reserveVerification(rf, of)
	return s
}

// reserveVerification reserves the verification's isolated run once every
// replay's sandbox has started (or failed to: it then starts cold), so
// that the engine starts the replays' first. What it reserves in the
// run's context is released by the run's drive at the latest
// (harness.StandbyIsolated).
func (s *standbys) reserveVerification(rf *reflector, of string) {
	defer close(s.reserved)
	for _, sb := range s.replays {
		_ = sb.Started(rf.ctx) // a standby that failed to start is that run's to start cold
	}
	if rf.ctx.Err() != nil {
		return
	}
	v, err := rf.h.StandbyIsolated(rf.ctx, rf.rec.ID, 1)
	if err != nil || len(v) == 0 {
		if err != nil {
			rf.log.Warn("the verification starts cold: no standby", "for", of, "err", err)
		}
		return
	}
	s.verify = v[0]
}

// standbysOf takes reflection id's standbys for its process (nil: none).
func (rf *reflector) standbysOf(id string) *standbys {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	s := rf.standby[id]
	delete(rf.standby, id)
	return s
}

// replay is the standby of replay i (the counterfactual's is i =
// replays), or nil.
func (s *standbys) replay(i int) *harness.IsolatedStandby {
	if s == nil || i >= len(s.replays) {
		return nil
	}
	return s.replays[i]
}

// verification is the verification's standby, or nil, once its
// reservation is settled.
func (s *standbys) verification() *harness.IsolatedStandby {
	if s == nil {
		return nil
	}
	<-s.reserved
	return s.verify
}

// release gives up what is left of them (used ones: a no-op): those of,
// or, with none named, every one, the verification's once reserved.
func (s *standbys) release(ctx context.Context, rf *reflector, of ...*harness.IsolatedStandby) {
	if s == nil {
		return
	}
	if of == nil {
		of = slices.Clip(s.replays)
		if v := s.verification(); v != nil {
			of = append(of, v)
		}
	}
	var wg sync.WaitGroup
	for _, sb := range of {
		wg.Go(func() {
			if err := sb.Release(ctx); err != nil {
				rf.log.Warn("release a standby", "run", sb.RunID(), "err", err)
			}
		})
	}
	wg.Wait()
}
