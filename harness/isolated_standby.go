package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/sandbox"
)

// IsolatedStandby is an isolated run reserved ahead (StandbyIsolated):
// its run id and gateway socket dir fixed, and its first attempt's sandbox
// created and started, its init waiting for the handover. An Isolated
// call given it (IsolatedRequest.Standby) becomes that run and takes the
// sandbox over instead of starting one: a reflection reserves its
// replays' runs as it opens, so that their containers start while it
// captures the failure, and its verification's while the replays run.
//
// An IsolatedStandby serves one Isolated call. Release gives it up: a
// no-op once a run took it, else its sandbox, workspace and socket dir go.
type IsolatedStandby struct {
	h          *Harness
	id         string // the isolated run's id to be
	parent     string
	dir        string // its gateway socket dir
	cleanupDir func() error
	// planned is closed once sb holds the standby's start (under way).
	planned chan struct{}
	sb      standbys

	mu sync.Mutex
	// claimed: an Isolated call took it; adopted: that run's drive did;
	// gone: released (released is closed once that is done).
	claimed, adopted, gone bool
	released               chan struct{}
	releaseBackend         sandbox.Backend
}

// RunID is the id the isolated run will have.
func (s *IsolatedStandby) RunID() string { return s.id }

// SocketDir is the gateway socket dir reserved for the isolated run (its
// standby's handover goes through it).
func (s *IsolatedStandby) SocketDir() string { return s.dir }

// StandbyIsolated reserves n isolated runs of run parent ahead, each with
// its first attempt's sandbox started in the background (created and
// started at once, n side by side). It returns at once; once ctx has
// ended it refuses (ctx's error): a caller reserving in the context of
// the parent's drive leaves nothing behind when the drive ends, since the
// drive releases what is reserved for it then. It returns none
// when the backend has no standbys (sandbox.Standbys) or Options.Standby
// is StandbyOff: the isolated runs then start cold. The caller releases
// every one it was given (Release), used or not.
//
// A standby is labelled with its run id to be, so the janitor of this
// process leaves it while it is reserved; after a harness crash, `gc`
// removes it with its workspace (a run the journal never recorded is not
// resumable).
func (h *Harness) StandbyIsolated(ctx context.Context, parent string, n int) ([]*IsolatedStandby, error) {
	if n <= 0 || h.opts.Standby == StandbyOff {
		return nil, nil
	}
	b, err := h.backend(ctx)
	if err != nil {
		return nil, err
	}
	st, ok := b.(sandbox.Standbys)
	if !ok {
		return nil, nil
	}
	prec, err := h.runRecord(parent)
	if err != nil {
		return nil, err
	}
	scen, agentSpec, err := h.agentOf(prec)
	if err != nil {
		return nil, err
	}
	out := make([]*IsolatedStandby, 0, n)
	release := func() error { // none started yet
		var errs []error
		for _, s := range out {
			close(s.planned)
			errs = append(errs, s.Release(ctx))
		}
		return errors.Join(errs...)
	}
	now := time.Now()
	for range n {
		id, err := h.reserveRunID(now)
		if err != nil {
			return nil, errors.Join(err, release())
		}
		dir, cleanup, err := sandbox.NewSocketDir()
		if err != nil {
			return nil, errors.Join(fmt.Errorf("make the gateway socket dir of isolated run %s: %w", id, err), release())
		}
		s := &IsolatedStandby{h: h, id: id, parent: parent, dir: dir, cleanupDir: cleanup, planned: make(chan struct{}), released: make(chan struct{}), releaseBackend: b}
		h.mu.Lock()
		// Checked under the lock the parent's drive takes to release what
		// is left (releaseStandbysOf, after its run's context ends): a
		// reservation made in that context is either refused or seen
		// there, never left behind.
		if err := ctx.Err(); err != nil {
			h.mu.Unlock()
			return nil, errors.Join(fmt.Errorf("reserve isolated runs of %s: %w", parent, err), cleanup(), release())
		}
		h.reserved[id] = s
		h.mu.Unlock()
		out = append(out, s)
	}
	// The agent's image is the parent's (ready: the parent ran it); the
	// standbys start with it once it is known, without the caller waiting.
	network := scen.Sandbox.Network == "internal"
	go func() {
		plan, err := h.plan(context.WithoutCancel(ctx), agentSpec)
		for _, s := range out {
			if err == nil {
				s.sb = standbys{st: st}
				s.sb.prepare(ctx, sandbox.Spec{RunID: s.id, Attempt: 1, Image: plan.image, Env: sharedEnv(plan, s.id),
					SocketDir: s.dir, Workspace: true, Network: network})
			} else {
				h.log.Warn("isolated runs start cold: their agent is not ready", "run", parent, "err", err)
			}
			close(s.planned)
		}
	}()
	return out, nil
}

// reserveRunID mints a run id no run and no reservation has.
func (h *Harness) reserveRunID(now time.Time) (string, error) {
	for {
		id, err := newRunID(now)
		if err != nil {
			return "", fmt.Errorf("mint run id: %w", err)
		}
		h.mu.Lock()
		taken := h.reserved[id] != nil
		h.mu.Unlock()
		if _, err := h.history.Run(id); !taken && errors.Is(err, ErrRunNotFound) {
			return id, nil
		}
	}
}

func (h *Harness) unreserve(id string) {
	h.mu.Lock()
	delete(h.reserved, id)
	h.mu.Unlock()
}

// isReserved reports whether runID is an isolated run reserved ahead
// (StandbyIsolated) that no drive has taken yet: the janitor leaves its
// standby.
func (h *Harness) isReserved(runID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reserved[runID] != nil
}

// claim hands s to one Isolated call.
func (s *IsolatedStandby) claim() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claimed || s.gone {
		return fmt.Errorf("the standby reserved for isolated run %s was used or released already", s.id)
	}
	s.claimed = true
	return nil
}

// Started waits until s's sandbox is started (or its start failed: the
// error; the isolated run then starts cold), or ctx ends.
func (s *IsolatedStandby) Started(ctx context.Context) error {
	select {
	case <-s.planned:
	case <-ctx.Done():
		return ctx.Err()
	}
	if len(s.sb.next) == 0 {
		return fmt.Errorf("isolated run %s has no standby: its agent was not ready", s.id)
	}
	p := s.sb.next[0]
	select {
	case <-p.ready:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// adopt hands s to the drive of its run: its socket dir and its standby
// are the run's from now on. False if it was released.
func (s *IsolatedStandby) adopt() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone || !s.claimed || s.adopted {
		return false
	}
	s.adopted = true
	return true
}

// Release gives s up if no run took it: its sandbox is removed (once its
// start returned), then its workspace and socket dir. It is safe to call
// more than once, and after a run took it (a no-op then); a call while
// another releases it waits for that one.
func (s *IsolatedStandby) Release(ctx context.Context) error {
	s.mu.Lock()
	switch {
	case s.adopted:
		s.mu.Unlock()
		return nil
	case s.gone:
		s.mu.Unlock()
		<-s.released
		return nil
	}
	s.gone = true
	s.mu.Unlock()
	defer close(s.released)
	<-s.planned
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var errs []error
	// A copy is dropped: Started may read s.sb beside this.
	if sb := s.sb; len(sb.next) > 0 {
		errs = append(errs, sb.drop(rctx), s.releaseBackend.Release(rctx, s.id))
	}
	errs = append(errs, s.cleanupDir())
	s.h.unreserve(s.id)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("release the standby of isolated run %s: %w", s.id, err)
	}
	return nil
}

// releaseStandbysOf releases the standbys reserved for isolated runs of
// run parent that no run took: none outlives the parent's drive, whatever
// became of the reflection that reserved them.
func (h *Harness) releaseStandbysOf(ctx context.Context, parent string) {
	h.mu.Lock()
	var left []*IsolatedStandby
	for _, s := range h.reserved {
		if s.parent == parent {
			left = append(left, s)
		}
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range left {
		wg.Go(func() {
			if err := s.Release(ctx); err != nil {
				h.log.Warn("release a standby", "run", parent, "err", err)
			}
		})
	}
	wg.Wait()
}

// socketDir is run runID's gateway socket dir for its drive: the one
// reserved with its standby (StandbyIsolated), or a new one. The standby,
// if any, is returned for the run's first attempt to take over.
func (h *Harness) socketDir(runID string) (dir string, cleanup func() error, sb *IsolatedStandby, err error) {
	h.mu.Lock()
	s := h.reserved[runID]
	h.mu.Unlock()
	if s != nil && s.adopt() {
		h.unreserve(runID)
		<-s.planned
		return s.dir, s.cleanupDir, s, nil
	}
	dir, cleanup, err = sandbox.NewSocketDir()
	return dir, cleanup, nil, err
}
