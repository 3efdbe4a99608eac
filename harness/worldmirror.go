package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// mirrored is a world out of process as a run drives it: every call goes to
// the world (whose own ledger and lookup by key are authoritative), and
// every answer it gives is recorded in the run's journal (world.OpenJournal)
// so that reports read the run's ledger when the world is gone.
type mirrored struct {
	remote  *remote.Client
	journal *world.Ledgered
}

var (
	_ world.World     = (*mirrored)(nil)
	_ world.Versioned = (*mirrored)(nil)
)

func openMirrored(c *remote.Client, store world.Store, prefix []byte) (*mirrored, error) {
	j, err := world.OpenJournal(c.Name(), store, prefix)
	if err != nil {
		return nil, err
	}
	return &mirrored{remote: c, journal: j}, nil
}

// Journal implements world.Journaling: the ledger a router reads for it.
func (m *mirrored) Journal() *world.Ledgered { return m.journal }

func (m *mirrored) Name() string            { return m.remote.Name() }
func (m *mirrored) Kinds() []world.KindInfo { return m.remote.Kinds() }

// Execute sends the request to the world and journals its answer. A
// failure to journal it is the harness's (the effect is then unknown, and
// reconciled by the world's lookup).
func (m *mirrored) Execute(ctx context.Context, req world.Request) (world.Outcome, error) {
	out, err := m.remote.Execute(ctx, req)
	if err != nil {
		return out, err
	}
	e := world.LedgerEntry{Key: req.Key, Kind: req.Kind, Args: req.Args, Outcome: out, At: req.Now}
	if err := m.journal.Record(ctx, e); err != nil {
		return world.Outcome{}, fmt.Errorf("journal the answer of %s to %s (key %q): %w", m.remote.Name(), req.Kind, req.Key, err)
	}
	return out, nil
}

// Lookup asks the world; what it found is journaled if the journal lacks
// it (the harness died between the world's answer and the journal).
func (m *mirrored) Lookup(ctx context.Context, key string) (world.Outcome, bool, error) {
	out, found, err := m.remote.Lookup(ctx, key)
	if err != nil || !found {
		return out, found, err
	}
	if _, journaled, jerr := m.journal.Lookup(ctx, key); jerr == nil && !journaled {
		e := world.LedgerEntry{Key: key, Kind: "(reconciled)", Outcome: out}
		if l, lerr := m.remote.Ledger(ctx); lerr == nil {
			for i := len(l) - 1; i >= 0; i-- {
				if l[i].Key == key {
					e = l[i]
					break
				}
			}
		}
		if err := m.journal.Record(ctx, e); err != nil {
			return world.Outcome{}, false, fmt.Errorf("journal the reconciled answer of %s to key %q: %w", m.remote.Name(), key, err)
		}
	}
	return out, found, nil
}

func (m *mirrored) Ledger(ctx context.Context) ([]world.LedgerEntry, error) {
	return m.remote.Ledger(ctx)
}

func (m *mirrored) Duplicates(ctx context.Context) ([]world.Duplicate, error) {
	return m.remote.Duplicates(ctx)
}

func (m *mirrored) CheckGoal(ctx context.Context, task json.RawMessage) (world.Check, error) {
	return m.remote.CheckGoal(ctx, task)
}

func (m *mirrored) Snapshot(ctx context.Context) (json.RawMessage, error) {
	return m.remote.Snapshot(ctx)
}

func (m *mirrored) APIVersion() string { return m.remote.APIVersion() }

// SetAPIVersion switches the world's API and journals the switch as the
// world event it records.
func (m *mirrored) SetAPIVersion(ctx context.Context, version string, now time.Time) (string, error) {
	prev, err := m.remote.SetAPIVersion(ctx, version, now)
	if err != nil || prev == version {
		return prev, err
	}
	args, _ := json.Marshal(map[string]string{"version": version})
	out, err := world.Done(map[string]string{"previous": prev, "version": version})
	if err != nil {
		return "", err
	}
	if err := m.journal.Record(ctx, world.LedgerEntry{Kind: world.EventAPIVersion, Args: args, Outcome: out, At: now}); err != nil {
		return "", fmt.Errorf("journal the API version change of %s: %w", m.remote.Name(), err)
	}
	return prev, nil
}
