package world

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"sync"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// IdentityFunc names the resource a done ledger entry acts on, and says
// whether its kind can duplicate at all (neither read-only nor idempotent).
// A world out of process whose journal is its ledger (an HTTP API, an MCP
// server) gives one to DupIndex.
type IdentityFunc func(ctx context.Context, e LedgerEntry) (name string, counts bool, err error)

// DupIndex groups the done requests of kinds that can duplicate by kind
// and identity: a group done under more than one key is a Duplicate. The
// same key again is one effect, not two.
type DupIndex struct {
	identity IdentityFunc
	groups   map[string]*dupGroup
	dups     []*dupGroup // the groups done under more than one key, by place
}

type dupGroup struct {
	d     Duplicate
	keys  map[string]bool
	place int // the order its first entry came in
}

// NewDupIndex returns an empty index judging entries by identity.
func NewDupIndex(identity IdentityFunc) *DupIndex {
	return &DupIndex{identity: identity, groups: map[string]*dupGroup{}}
}

// Add indexes one ledger entry (world events and entries not done are
// skipped).
func (x *DupIndex) Add(ctx context.Context, e LedgerEntry) error {
	if e.IsEvent() || e.Outcome.Status != protocol.StatusDone {
		return nil
	}
	name, counts, err := x.identity(ctx, e)
	if err != nil || !counts {
		return err
	}
	id := e.Kind + "\x00" + name
	g := x.groups[id]
	if g == nil {
		g = &dupGroup{d: Duplicate{Kind: e.Kind, Name: name}, keys: map[string]bool{}, place: len(x.groups)}
		x.groups[id] = g
	}
	if g.keys[e.Key] {
		return nil
	}
	g.keys[e.Key] = true
	g.d.IDs = append(g.d.IDs, "ledger#"+strconv.FormatInt(e.Seq, 10))
	g.d.Keys = append(g.d.Keys, e.Key)
	g.d.Count++
	if g.d.Count == 2 {
		// Now a duplicate: kept in the list Duplicates reads, in the
		// order the groups' first entries came.
		i, _ := slices.BinarySearchFunc(x.dups, g.place, func(d *dupGroup, place int) int { return cmp.Compare(d.place, place) })
		x.dups = slices.Insert(x.dups, i, g)
	}
	return nil
}

// Duplicates lists the groups done under more than one key, in the order
// their first entries came. It reads those groups alone, so that a check
// after every effect costs what the duplicates hold, not the whole ledger.
func (x *DupIndex) Duplicates() []Duplicate {
	var out []Duplicate
	for _, g := range x.dups {
		d := g.d
		d.IDs, d.Keys = append([]string(nil), d.IDs...), append([]string(nil), d.Keys...)
		out = append(out, d)
	}
	return out
}

// DuplicatesIn indexes a whole ledger and lists its duplicates.
func DuplicatesIn(ctx context.Context, identity IdentityFunc, ledger []LedgerEntry) ([]Duplicate, error) {
	d := NewDupIndex(identity)
	for _, e := range ledger {
		if err := d.Add(ctx, e); err != nil {
			return nil, err
		}
	}
	return d.Duplicates(), nil
}

// JournalDups is a journal of a world's answers (OpenJournal) with its
// duplicates index: built from the journal on first use, then told of every
// answer recorded through it (an instance sees its own writes; another
// instance's when opened again). It is safe for concurrent use.
type JournalDups struct {
	journal  *Ledgered
	identity IdentityFunc

	mu  sync.Mutex
	idx *DupIndex // nil: not built yet, or to rebuild
}

// NewJournalDups indexes journal's duplicates by identity.
func NewJournalDups(journal *Ledgered, identity IdentityFunc) *JournalDups {
	return &JournalDups{journal: journal, identity: identity}
}

// Record journals an answer (Ledgered.Record) and indexes it.
func (d *JournalDups) Record(ctx context.Context, e LedgerEntry) error {
	if err := d.journal.Record(ctx, e); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.idx != nil {
		e.Seq = d.journal.LedgerSeq()
		if err := d.idx.Add(ctx, e); err != nil {
			d.idx = nil // rebuilt from the journal on the next call, which reports the error
		}
	}
	return nil
}

// Duplicates lists the journal's duplicates.
func (d *JournalDups) Duplicates(ctx context.Context) ([]Duplicate, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.idx == nil {
		ledger, err := d.journal.Ledger(ctx)
		if err != nil {
			return nil, err
		}
		x := NewDupIndex(d.identity)
		for _, e := range ledger {
			if err := x.Add(ctx, e); err != nil {
				return nil, err
			}
		}
		d.idx = x
	}
	return d.idx.Duplicates(), nil
}
