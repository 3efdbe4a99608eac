package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// mirrored is a world out of process as a run drives it: every call goes to
// the world (whose own ledger and lookup by key are authoritative) where
// it answers now, and every answer it gives is recorded in the run's
// journal (world.OpenJournal) so that reports read the run's ledger when
// the world is gone.
type mirrored struct {
	link    *worldLink
	journal *world.Ledgered
}

var (
	_ world.World     = (*mirrored)(nil)
	_ world.Versioned = (*mirrored)(nil)
	_ world.Eventful  = (*mirrored)(nil)
	_ world.Sequenced = (*mirrored)(nil)
)

// bufferable is a store that also offers its key space with commits held
// in memory until the next commit of its journal, written in the same
// transaction as the next synced one (history's world store).
type bufferable interface{ Buffered() world.Store }

// openMirrored journals the answers of the world c reaches in store, under
// prefix. Where the store offers it, the answers are held a moment in
// memory and written with the next commit: each is followed, before anyone
// is told, by a durable write of the harness's own (the effect's result
// after Execute, the reconciled effect after Lookup, the fault's record
// after SetAPIVersion), which writes it in its own transaction and whose
// sync covers it. A harness killed, or a machine that dies, in between
// loses at most an answer the world's own ledger still holds, together with
// the effect's result: the effect is then in doubt, and Lookup journals the
// answer again when it is reconciled. This spares an effect on a served
// world one of the harness's three syncs and a Badger write of its own
// (BENCHMARKS.md, "A served world's effect round trip").
func openMirrored(l *worldLink, store world.Store, prefix []byte) (*mirrored, error) {
	if b, ok := store.(bufferable); ok {
		store = b.Buffered()
	}
	j, err := world.OpenJournal(l.current().Name(), store, prefix)
	if err != nil {
		return nil, err
	}
	return &mirrored{link: l, journal: j}, nil
}

// Journal implements world.Journaling: the ledger a router reads for it.
func (m *mirrored) Journal() *world.Ledgered { return m.journal }

// LedgerSeq implements world.Sequenced: the seq of the run's journal of
// the world's answers, as a router counts it, read without a call to the
// world. A checkpoint and an attempt record it under the run's lock, where
// asking a world busy with a slow apply (one that answers one call at a
// time waits for it) would stall every other call of the run; a shadow
// (forkRemote) is cut at it in the same journal.
func (m *mirrored) LedgerSeq() int64 { return m.journal.LedgerSeq() }

func (m *mirrored) Name() string            { return m.link.current().Name() }
func (m *mirrored) Kinds() []world.KindInfo { return m.link.current().Kinds() }

// Execute sends the request to the world and journals its answer. A
// failure to journal it is the harness's (the effect is then unknown, and
// reconciled by the world's lookup).
func (m *mirrored) Execute(ctx context.Context, req world.Request) (world.Outcome, error) {
	c, err := m.link.client(ctx)
	if err != nil {
		return world.Outcome{}, err
	}
	out, err := c.Execute(ctx, req)
	if err != nil {
		return out, err
	}
	e := world.LedgerEntry{Key: req.Key, Kind: req.Kind, Args: req.Args, Outcome: out, At: req.Now}
	if err := m.journal.Record(ctx, e); err != nil {
		return world.Outcome{}, fmt.Errorf("journal the answer of %s to %s (key %q): %w", c.Name(), req.Kind, req.Key, err)
	}
	return out, nil
}

// Lookup asks the world; what it found is journaled if the journal lacks
// it (the harness died between the world's answer and the journal).
func (m *mirrored) Lookup(ctx context.Context, key string) (world.Outcome, bool, error) {
	c, err := m.link.client(ctx)
	if err != nil {
		return world.Outcome{}, false, err
	}
	out, found, err := c.Lookup(ctx, key)
	if err != nil || !found {
		return out, found, err
	}
	if _, journaled, jerr := m.journal.Lookup(ctx, key); jerr == nil && !journaled {
		e := world.LedgerEntry{Key: key, Kind: "(reconciled)", Outcome: out}
		if l, lerr := c.Ledger(ctx); lerr == nil {
			for i := len(l) - 1; i >= 0; i-- {
				if l[i].Key == key {
					e = l[i]
					break
				}
			}
		}
		if err := m.journal.Record(ctx, e); err != nil {
			return world.Outcome{}, false, fmt.Errorf("journal the reconciled answer of %s to key %q: %w", c.Name(), key, err)
		}
	}
	return out, found, nil
}

func (m *mirrored) Ledger(ctx context.Context) ([]world.LedgerEntry, error) {
	c, err := m.link.client(ctx)
	if err != nil {
		return nil, err
	}
	return c.Ledger(ctx)
}

func (m *mirrored) Duplicates(ctx context.Context) ([]world.Duplicate, error) {
	c, err := m.link.client(ctx)
	if err != nil {
		return nil, err
	}
	return c.Duplicates(ctx)
}

func (m *mirrored) CheckGoal(ctx context.Context, task json.RawMessage) (world.Check, error) {
	c, err := m.link.client(ctx)
	if err != nil {
		return world.Check{}, err
	}
	return c.CheckGoal(ctx, task)
}

func (m *mirrored) Snapshot(ctx context.Context) (json.RawMessage, error) {
	c, err := m.link.client(ctx)
	if err != nil {
		return nil, err
	}
	return c.Snapshot(ctx)
}

func (m *mirrored) APIVersion() string { return m.link.current().APIVersion() }

// SetAPIVersion switches the world's API and journals the switch as the
// world event it records.
func (m *mirrored) SetAPIVersion(ctx context.Context, version string, now time.Time) (string, error) {
	c, err := m.link.client(ctx)
	if err != nil {
		return "", err
	}
	prev, err := c.SetAPIVersion(ctx, version, now)
	if err != nil || prev == version {
		return prev, err
	}
	args, _ := json.Marshal(map[string]string{"version": version})
	out, err := world.Done(map[string]string{"previous": prev, "version": version})
	if err != nil {
		return "", err
	}
	if err := m.journal.Record(ctx, world.LedgerEntry{Kind: world.EventAPIVersion, Args: args, Outcome: out, At: now}); err != nil {
		return "", fmt.Errorf("journal the API version change of %s: %w", c.Name(), err)
	}
	return prev, nil
}

// Events implements world.Eventful: the world events the world describes
// (capability events).
func (m *mirrored) Events() []world.EventInfo { return m.link.current().Events() }

// FireEvent makes the world undergo ev (event) and journals it as the world
// event the world records.
func (m *mirrored) FireEvent(ctx context.Context, ev world.Event) (world.Outcome, error) {
	c, err := m.link.client(ctx)
	if err != nil {
		return world.Outcome{}, err
	}
	out, err := c.FireEvent(ctx, ev)
	if err != nil {
		return world.Outcome{}, err
	}
	args := ev.Args
	var compact bytes.Buffer
	if json.Compact(&compact, args) == nil {
		args = compact.Bytes()
	}
	if err := m.journal.Record(ctx, world.LedgerEntry{Kind: ev.Kind, Args: args, Outcome: out, At: ev.Now.UTC()}); err != nil {
		return world.Outcome{}, fmt.Errorf("journal the world event %s of %s: %w", ev.Kind, c.Name(), err)
	}
	return out, nil
}
