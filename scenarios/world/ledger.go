package world

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Ledgered is a Model wrapped in the durable ledger: the World the harness
// drives. Every request — and every world event, such as an API version
// change — is recorded in arrival order with its outcome, together with
// the model's own change to its state, in one commit of the store; the
// outcome of each request is indexed by its key for Lookup. It is safe for
// concurrent use: requests are applied one at a time.
//
// Its key space, under the world's prefix: "ledger/<seq>" (the entries),
// "bykey/<key>" (the outcome of the last request of each key), and
// whatever the model writes (its keys must not begin with "ledger/" or
// "bykey/").
type Ledgered struct {
	model  Model
	store  Store
	prefix []byte

	mu  sync.Mutex   // one request (or event) at a time
	seq atomic.Int64 // the last entry's; read without mu, so a slow model never stalls LedgerSeq
}

var (
	_ World     = (*Ledgered)(nil)
	_ Sequenced = (*Ledgered)(nil)
)

// Ledger key spaces under a world's prefix.
const (
	ledgerSpace = "ledger/"
	byKeySpace  = "bykey/"
)

// NewLedgered wraps model, whose state lives in store under prefix, in the
// ledger there, recovering its seq.
func NewLedgered(model Model, store Store, prefix []byte) (*Ledgered, error) {
	l := &Ledgered{model: model, store: store, prefix: bytes.Clone(prefix)}
	var last []byte
	err := store.Scan(l.key(ledgerSpace), func(k, _ []byte) error {
		last = k
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("world %s: read its ledger: %w", model.Name(), err)
	}
	if last != nil {
		seq, err := hex.DecodeString(string(last[len(l.key(ledgerSpace)):]))
		if err != nil || len(seq) != 8 {
			return nil, fmt.Errorf("world %s: a ledger key %q is not a seq", model.Name(), last)
		}
		l.seq.Store(int64(binary.BigEndian.Uint64(seq)))
	}
	return l, nil
}

// Model is the wrapped model (for its own capabilities: a world's
// resources, say).
func (l *Ledgered) Model() Model { return l.model }

func (l *Ledgered) key(parts ...string) []byte {
	k := bytes.Clone(l.prefix)
	for _, p := range parts {
		k = append(k, p...)
	}
	return k
}

func seqKey(seq int64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(seq))
	return hex.EncodeToString(b[:])
}

// Name implements World.
func (l *Ledgered) Name() string { return l.model.Name() }

// Kinds implements World.
func (l *Ledgered) Kinds() []KindInfo { return l.model.Kinds() }

// Execute implements World: the model works the request out, and its
// change, the ledger entry and the key's outcome are made durable in one
// commit before the change is made visible.
func (l *Ledgered) Execute(ctx context.Context, req Request) (Outcome, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out, ch, err := l.model.Apply(ctx, req)
	if err != nil {
		return Outcome{}, fmt.Errorf("world %s: apply %s (key %q): %w", l.model.Name(), req.Kind, req.Key, err)
	}
	entry := LedgerEntry{Kind: req.Kind, Key: req.Key, Args: compactJSON(req.Args), Outcome: out, At: req.Now.UTC(), Resource: ch.Resource}
	if err := l.record(ctx, entry, ch); err != nil {
		return Outcome{}, fmt.Errorf("world %s: record %s (key %q): %w", l.model.Name(), req.Kind, req.Key, err)
	}
	return out, nil
}

// record commits entry (with the next seq) and ch's writes at once, then
// makes ch visible (l.mu held).
func (l *Ledgered) record(ctx context.Context, entry LedgerEntry, ch Change) error {
	entry.Seq = l.seq.Load() + 1
	entries := make([]Entry, 0, len(ch.Writes)+2)
	for _, w := range ch.Writes {
		if bytes.HasPrefix(w.Key, []byte(ledgerSpace)) || bytes.HasPrefix(w.Key, []byte(byKeySpace)) {
			return fmt.Errorf("the model writes %q, in the ledger's own key space", w.Key)
		}
		entries = append(entries, Entry{Key: l.key(string(w.Key)), Value: w.Value})
	}
	lb, err := json.Marshal(entry)
	if err != nil {
		return err
	}
	entries = append(entries, Entry{Key: l.key(ledgerSpace, seqKey(entry.Seq)), Value: lb})
	if entry.Key != "" {
		ob, err := json.Marshal(entry.Outcome)
		if err != nil {
			return err
		}
		entries = append(entries, Entry{Key: l.key(byKeySpace, entry.Key), Value: ob})
	}
	if err := l.store.Commit(ctx, entries...); err != nil {
		return err
	}
	l.seq.Store(entry.Seq)
	if ch.Commit != nil {
		ch.Commit()
	}
	return nil
}

// Lookup implements World.
func (l *Ledgered) Lookup(ctx context.Context, key string) (Outcome, bool, error) {
	if key == "" {
		return Outcome{}, false, nil // world events have no key: nothing an agent sent
	}
	b, err := l.store.Get(l.key(byKeySpace, key))
	if errors.Is(err, ErrNotFound) {
		return Outcome{}, false, nil
	}
	if err != nil {
		return Outcome{}, false, fmt.Errorf("world %s: look up key %q: %w", l.model.Name(), key, err)
	}
	var o Outcome
	if err := json.Unmarshal(b, &o); err != nil {
		return Outcome{}, false, fmt.Errorf("world %s: decode the outcome of key %q: %w", l.model.Name(), key, err)
	}
	return o, true, nil
}

// Ledger implements World.
func (l *Ledgered) Ledger(ctx context.Context) ([]LedgerEntry, error) {
	var out []LedgerEntry
	err := l.store.Scan(l.key(ledgerSpace), func(_, v []byte) error {
		var e LedgerEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return err
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("world %s: read its ledger: %w", l.model.Name(), err)
	}
	return out, nil
}

// LedgerSeq implements Sequenced.
func (l *Ledgered) LedgerSeq() int64 { return l.seq.Load() }

// Duplicates implements World: what the model finds in the ledger (a
// DuplicateFinder), else none — a world that cannot tell its logical
// resources apart has nothing to say.
func (l *Ledgered) Duplicates(ctx context.Context) ([]Duplicate, error) {
	f, ok := l.model.(DuplicateFinder)
	if !ok {
		return nil, nil
	}
	ledger, err := l.Ledger(ctx)
	if err != nil {
		return nil, err
	}
	return f.Duplicates(ctx, ledger)
}

// ErrNoGoal is CheckGoal's error for a world whose model judges no goal.
var ErrNoGoal = errors.New("the world judges no goal")

// CheckGoal implements World through the model's GoalJudge.
func (l *Ledgered) CheckGoal(ctx context.Context, task json.RawMessage) (Check, error) {
	g, ok := l.model.(GoalJudge)
	if !ok {
		return Check{}, fmt.Errorf("world %s: %w", l.model.Name(), ErrNoGoal)
	}
	return g.CheckGoal(ctx, task)
}

// Snapshot implements World through the model's Snapshotter; a model
// without one is summed up by its ledger's length.
func (l *Ledgered) Snapshot(ctx context.Context) (json.RawMessage, error) {
	if s, ok := l.model.(Snapshotter); ok {
		return s.Snapshot(ctx)
	}
	return json.Marshal(map[string]any{"world": l.model.Name(), "ledger_seq": l.LedgerSeq()})
}

// Versioned is the ledger's side of a VersionedModel: a world whose API can
// change version mid-run.
type versionedLedger struct{ *Ledgered }

var _ Versioned = versionedLedger{}

// APIVersion implements Versioned.
func (v versionedLedger) APIVersion() string { return v.model.(VersionedModel).APIVersion() }

// SetAPIVersion implements Versioned: the switch and its world event
// (kind EventAPIVersion, key "") are one durable commit; switching to the
// current version changes and records nothing.
func (v versionedLedger) SetAPIVersion(ctx context.Context, version string, now time.Time) (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	vm := v.model.(VersionedModel)
	previous, ch, err := vm.SwitchAPIVersion(ctx, version, now)
	if err != nil || previous == version {
		return previous, err
	}
	args, err := json.Marshal(map[string]string{"version": version})
	if err != nil {
		return "", err
	}
	out, err := Done(map[string]string{"previous": previous, "version": version})
	if err != nil {
		return "", err
	}
	entry := LedgerEntry{Kind: EventAPIVersion, Args: args, Outcome: out, At: now.UTC()}
	if err := v.record(ctx, entry, ch); err != nil {
		return "", fmt.Errorf("world %s: record the API version change %s -> %s: %w", v.model.Name(), previous, version, err)
	}
	return previous, nil
}

// Wrap wraps model in the ledger of store under prefix, with the model's
// optional capabilities: a VersionedModel gives a Versioned world.
func Wrap(model Model, store Store, prefix []byte) (World, error) {
	l, err := NewLedgered(model, store, prefix)
	if err != nil {
		return nil, err
	}
	if _, ok := model.(VersionedModel); ok {
		return versionedLedger{l}, nil
	}
	return l, nil
}

func compactJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}

// prefixed is the read side of a store under a prefix, with keys relative
// to it: what a model reads its state back through.
type prefixed struct {
	store  Store
	prefix []byte
}

func (p prefixed) Get(key []byte) ([]byte, error) {
	return p.store.Get(append(bytes.Clone(p.prefix), key...))
}

func (p prefixed) Scan(prefix []byte, fn func(key, value []byte) error) error {
	return p.store.Scan(append(bytes.Clone(p.prefix), prefix...), func(k, v []byte) error {
		return fn(k[len(p.prefix):], v)
	})
}

// Instance opens the model of d on store under prefix (recovering its state)
// and wraps it in the ledger there: a world of d's, as the harness drives it.
func (d Definition) Instance(ctx context.Context, store Store, prefix []byte, options map[string]any) (World, error) {
	m, err := d.Open(ctx, prefixed{store, bytes.Clone(prefix)}, options)
	if err != nil {
		return nil, err
	}
	return Wrap(m, store, prefix)
}

// ModelOf is the model a world wraps (nil for a world that is not a
// model in the ledger): for a model's own methods, a simulator's resources
// say.
func ModelOf(w World) Model {
	switch l := w.(type) {
	case *Ledgered:
		return l.model
	case versionedLedger:
		return l.model
	}
	return nil
}
