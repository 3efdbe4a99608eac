package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"sync"

	"github.com/overnight-dev/overnight/sandbox"
)

var (
	_ sandbox.Standbys = (*Backend)(nil)
	_ sandbox.Standby  = (*standby)(nil)
)

// StartStandby implements sandbox.Standbys: the container Start would
// make, its init told (sandbox.EnvStandby) to wait in a directory of its
// own in the run's socket dir for the handover.
func (b *Backend) StartStandby(ctx context.Context, spec sandbox.Spec) (sandbox.Standby, error) {
	if spec.SocketDir == "" {
		return nil, fmt.Errorf("start standby of run %s, attempt %d: %w: a standby needs SocketDir (its handover goes through it)", spec.RunID, spec.Attempt, sandbox.ErrInvalidSpec)
	}
	host, inside, err := sandbox.NewStandbyDir(spec.SocketDir)
	if err != nil {
		return nil, fmt.Errorf("start standby of run %s, attempt %d: %w", spec.RunID, spec.Attempt, err)
	}
	spec.Env = maps.Clone(spec.Env)
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	spec.Env[sandbox.EnvStandby] = inside
	sb, err := b.Start(ctx, spec)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(host))
	}
	return &standby{box: sb.(*box), dir: host, attempt: spec.Attempt}, nil
}

// standby is a started sandbox whose init waits for its handover; every
// capability of a box is its too.
type standby struct {
	*box
	dir     string // the handover's directory, on the host
	attempt int

	mu     sync.Mutex
	handed bool
}

// TakeOver implements sandbox.Standby.
func (s *standby) TakeOver(_ context.Context, h sandbox.Handover) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case h.Attempt != s.attempt:
		return fmt.Errorf("take over standby %.12s: %w: it was started for attempt %d, not %d", s.id, sandbox.ErrInvalidSpec, s.attempt, h.Attempt)
	case s.handed:
		return fmt.Errorf("take over standby %.12s: %w: it was taken over already", s.id, sandbox.ErrInvalidSpec)
	}
	if err := sandbox.WriteHandover(s.dir, h); err != nil {
		return fmt.Errorf("take over standby %.12s: %w", s.id, err)
	}
	s.handed = true
	return nil
}

// Remove removes the container, then its handover's directory (and the
// attempt's token in it).
func (s *standby) Remove(ctx context.Context) error {
	return errors.Join(s.box.Remove(ctx), os.RemoveAll(s.dir))
}
