package world

import (
	"context"
	"errors"
	"fmt"
)

// ErrJournalOnly is what a journal of a world elsewhere answers a request
// with: it records what that world answered, it does not apply requests.
var ErrJournalOnly = errors.New("a journal of a world out of process records its answers, it does not apply requests")

// journalModel is the model of a journal: nothing but a name.
type journalModel struct{ name string }

func (m journalModel) Name() string      { return m.name }
func (m journalModel) Kinds() []KindInfo { return nil }
func (m journalModel) Apply(context.Context, Request) (Outcome, Change, error) {
	return Outcome{}, Change{}, ErrJournalOnly
}

// OpenJournal opens, in store under prefix, the journal the harness keeps
// of a world out of process: every answer the world gave, recorded with
// Record in the ledger's own format, so that a run's ledger, and the
// outcome of each of its keys, can be read when the world itself is gone
// (a report, a stopped command world). It is a Ledgered whose Execute
// refuses (ErrJournalOnly); the world's own ledger stays authoritative.
func OpenJournal(name string, store Store, prefix []byte) (*Ledgered, error) {
	return NewLedgered(journalModel{name: name}, store, prefix)
}

// Record appends an entry another world answered — the request, or world
// event, and its outcome — with the next seq, durably, and indexes its
// key's outcome for Lookup. Only a journal (OpenJournal) takes Record; a
// world that applies requests records them itself.
func (l *Ledgered) Record(ctx context.Context, e LedgerEntry) error {
	if _, ok := l.model.(journalModel); !ok {
		return fmt.Errorf("world %s: Record is for a journal of a world out of process, not a world that applies requests", l.model.Name())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e.Args = compactJSON(e.Args)
	e.At = e.At.UTC()
	return l.record(ctx, e, Change{Resource: e.Resource})
}
