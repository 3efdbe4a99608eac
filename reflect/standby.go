package reflect

import (
	"context"
	"slices"
	"sync"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
)

// standbys are the isolated runs one reflection reserved as it opened
// (harness.StandbyIsolated): one per replay, the counterfactual's and the
// verification's, their sandboxes starting while the failure is captured
// and the reflection works its way to them. Each isolated run takes the
// one of its role; what none took is released when the reflection ends.
type standbys struct {
	replays []*harness.IsolatedStandby // the replays', then the counterfactual's
	verify  *harness.IsolatedStandby
}

// reserve starts the isolated runs' sandboxes of reflection r ahead — when
// the harness has standbys and the options allow them (Options.ColdIsolated) —
// and keeps them for its process (mu held). A reflection that fails to
// reserve them goes on cold.
func (rf *reflector) reserve(r *history.ReflectionRecord) {
	if rf.x.opts.ColdIsolated {
		return
	}
	n := rf.scen.Reflect.Replays + 1
	all, err := rf.h.StandbyIsolated(rf.ctx, rf.rec.ID, n+1)
	if err != nil {
		rf.log.Warn("isolated runs start cold: no standbys", "reflection", r.ID, "err", err)
		return
	}
	if len(all) == 0 {
		return
	}
	rf.standby[r.ID] = &standbys{replays: all[:n], verify: all[n]}
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

// verification is the verification's standby, or nil.
func (s *standbys) verification() *harness.IsolatedStandby {
	if s == nil {
		return nil
	}
	return s.verify
}

// release gives up what is left of them (used ones: a no-op).
func (s *standbys) release(ctx context.Context, rf *reflector, of ...*harness.IsolatedStandby) {
	if s == nil {
		return
	}
	if of == nil {
		of = append(slices.Clip(s.replays), s.verify)
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
