package world

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RequestLookup is a world that looks an in-doubt request up by more than
// its key: its kind and arguments — an HTTP API asks its upstream with a
// request built from them, a Router routes by kind. The harness's
// reconciliation prefers it to Lookup.
type RequestLookup interface {
	// LookupRequest reports, like Lookup, the outcome of the request with
	// req.Key and whether there was one. An error wrapping ErrCannotLookup
	// means the world cannot find out: the request stays in doubt.
	LookupRequest(ctx context.Context, req Request) (Outcome, bool, error)
}

// ErrCannotLookup is wrapped by a lookup that cannot say whether a request
// happened (an HTTP API that declares no lookup, or whose lookup was
// refused). The effect stays unknown; a retry under its key could do it a
// second time, so the harness does not run one.
var ErrCannotLookup = errors.New("the world cannot find out whether the request happened")

// LookupOf looks req up in w: through RequestLookup when w offers it,
// else by key.
func LookupOf(ctx context.Context, w World, req Request) (Outcome, bool, error) {
	if rl, ok := w.(RequestLookup); ok {
		return rl.LookupRequest(ctx, req)
	}
	return w.Lookup(ctx, req.Key)
}

// Journaling is a world out of process that keeps a journal of its answers
// in the harness's store (OpenJournal): the ledger a Router reads for it,
// whose seqs are the ones its commits wrote.
type Journaling interface {
	Journal() *Ledgered
}

// Route is one world of a Router and the effect kinds it serves.
type Route struct {
	// Prefix of the kinds it serves, such as "http.etcd."; "" serves every
	// kind no other prefix claims (a scenario's world:).
	Prefix string
	World  World
	// Slot is the world's number in the router's Order: the i it writes
	// through (Order.Store(i, ...)).
	Slot int
}

// Router is several worlds as one — a scenario's world: and its HTTP APIs
// — each effect kind routed to its world by prefix (the longest that
// matches). Its ledger is every world's ledger interleaved in arrival
// order, renumbered from 1: the order its worlds' commits were made in,
// kept in the same commits by the stores Order hands out, so a crash
// cannot lose it. Duplicates are every world's; the goal is the one given,
// else the unprefixed world's. A Router whose unprefixed world is
// Versioned is Versioned (see NewRouter).
type Router struct {
	name   string
	routes []Route
	order  *Order
	goal   func(ctx context.Context, task json.RawMessage) (Check, error)
}

var (
	_ World         = (*Router)(nil)
	_ Sequenced     = (*Router)(nil)
	_ RequestLookup = (*Router)(nil)
	_ Eventful      = (*Router)(nil)
)

// NewRouter routes to routes, whose stores came from order (Order.Store,
// each with its route's Slot),
// in the order their ledgers' entries were committed. goal, if not nil,
// judges goal-reached instead of the unprefixed world. The World returned
// is Versioned when the unprefixed world is.
func NewRouter(name string, order *Order, routes []Route, goal func(ctx context.Context, task json.RawMessage) (Check, error)) World {
	r := &Router{name: name, routes: routes, order: order, goal: goal}
	if base := r.base(); base != nil {
		if _, ok := base.(Versioned); ok {
			return versionedRouter{r}
		}
	}
	return r
}

// RouterOf is w as a Router (nil if it is not one).
func RouterOf(w World) *Router {
	switch r := w.(type) {
	case *Router:
		return r
	case versionedRouter:
		return r.Router
	}
	return nil
}

// Routes are the router's worlds.
func (r *Router) Routes() []Route { return append([]Route(nil), r.routes...) }

func (r *Router) base() World {
	for _, rt := range r.routes {
		if rt.Prefix == "" {
			return rt.World
		}
	}
	return nil
}

// route is the world serving kind (nil: none).
func (r *Router) route(kind string) World {
	var best *Route
	for i := range r.routes {
		rt := &r.routes[i]
		if strings.HasPrefix(kind, rt.Prefix) && (best == nil || len(rt.Prefix) > len(best.Prefix)) {
			best = rt
		}
	}
	if best == nil {
		return nil
	}
	return best.World
}

// Name implements World.
func (r *Router) Name() string { return r.name }

// Kinds implements World: every world's.
func (r *Router) Kinds() []KindInfo {
	var out []KindInfo
	for _, rt := range r.routes {
		out = append(out, rt.World.Kinds()...)
	}
	return out
}

func (r *Router) noWorld(kind string) Outcome {
	var prefixes []string
	for _, rt := range r.routes {
		if rt.Prefix != "" {
			prefixes = append(prefixes, rt.Prefix+"*")
		}
	}
	return Failed(http.StatusBadRequest, "unknown_kind", "no world of this run serves effect kind %q (its worlds serve %s)", kind, strings.Join(prefixes, ", "))
}

// Execute implements World: the request goes to its kind's world.
func (r *Router) Execute(ctx context.Context, req Request) (Outcome, error) {
	w := r.route(req.Kind)
	if w == nil {
		return r.noWorld(req.Kind), nil
	}
	return w.Execute(ctx, req)
}

// LookupRequest implements RequestLookup: the request's kind's world is
// asked.
func (r *Router) LookupRequest(ctx context.Context, req Request) (Outcome, bool, error) {
	w := r.route(req.Kind)
	if w == nil {
		return Outcome{}, false, nil
	}
	return LookupOf(ctx, w, req)
}

// Lookup implements World: the first world that knows the key.
func (r *Router) Lookup(ctx context.Context, key string) (Outcome, bool, error) {
	for _, rt := range r.routes {
		out, found, err := rt.World.Lookup(ctx, key)
		if err != nil || found {
			return out, found, err
		}
	}
	return Outcome{}, false, nil
}

// Ledger implements World: every world's entries in arrival order,
// renumbered from 1.
func (r *Router) Ledger(ctx context.Context) ([]LedgerEntry, error) {
	ledgers := map[int]map[int64]LedgerEntry{}
	names := map[int]string{}
	for _, rt := range r.routes {
		var l []LedgerEntry
		var err error
		if j, ok := rt.World.(Journaling); ok {
			l, err = j.Journal().Ledger(ctx)
		} else {
			l, err = rt.World.Ledger(ctx)
		}
		if err != nil {
			return nil, err
		}
		byseq := make(map[int64]LedgerEntry, len(l))
		for _, e := range l {
			byseq[e.Seq] = e
		}
		ledgers[rt.Slot], names[rt.Slot] = byseq, rt.World.Name()
	}
	pos, err := r.order.positions()
	if err != nil {
		return nil, err
	}
	out := make([]LedgerEntry, 0, len(pos))
	for _, p := range pos {
		l, ok := ledgers[p.World]
		if !ok {
			return nil, fmt.Errorf("world %s: its arrival order names world %d, which it does not route to", r.name, p.World)
		}
		e, ok := l[p.Seq]
		if !ok {
			return nil, fmt.Errorf("world %s: its arrival order names entry %d of %s's ledger, which is not there", r.name, p.Seq, names[p.World])
		}
		e.Seq = int64(len(out) + 1)
		out = append(out, e)
	}
	return out, nil
}

// LedgerSeq implements Sequenced: how many entries its worlds' ledgers hold.
func (r *Router) LedgerSeq() int64 { return r.order.seq.Load() }

// Duplicates implements World: every world's.
func (r *Router) Duplicates(ctx context.Context) ([]Duplicate, error) {
	var out []Duplicate
	for _, rt := range r.routes {
		d, err := rt.World.Duplicates(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, d...)
	}
	return out, nil
}

// CheckGoal implements World: the router's goal, else the unprefixed
// world's.
func (r *Router) CheckGoal(ctx context.Context, task json.RawMessage) (Check, error) {
	if r.goal != nil {
		return r.goal(ctx, task)
	}
	if base := r.base(); base != nil {
		return base.CheckGoal(ctx, task)
	}
	return Check{}, fmt.Errorf("world %s: %w (declare goal: in the scenario)", r.name, ErrNoGoal)
}

// Snapshot implements World: every world's, by its prefix ("world" for
// the unprefixed one).
func (r *Router) Snapshot(ctx context.Context) (json.RawMessage, error) {
	snaps := map[string]json.RawMessage{}
	for _, rt := range r.routes {
		s, err := rt.World.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(rt.Prefix, ".")
		if name == "" {
			name = "world"
		}
		snaps[name] = s
	}
	return json.Marshal(snaps)
}

// Events implements Eventful: the unprefixed world's.
func (r *Router) Events() []EventInfo {
	if base := r.base(); base != nil {
		return EventsOf(base)
	}
	return nil
}

// FireEvent implements Eventful: the unprefixed world's.
func (r *Router) FireEvent(ctx context.Context, ev Event) (Outcome, error) {
	base, ok := r.base().(Eventful)
	if !ok {
		return Outcome{}, fmt.Errorf("world %s: %w %q (its world takes no world events)", r.name, ErrUnknownEvent, ev.Kind)
	}
	return base.FireEvent(ctx, ev)
}

// versionedRouter is a Router whose unprefixed world is Versioned.
type versionedRouter struct{ *Router }

var _ Versioned = versionedRouter{}

// APIVersion implements Versioned: the unprefixed world's.
func (v versionedRouter) APIVersion() string { return v.base().(Versioned).APIVersion() }

// SetAPIVersion implements Versioned: the unprefixed world's.
func (v versionedRouter) SetAPIVersion(ctx context.Context, version string, now time.Time) (string, error) {
	return v.base().(Versioned).SetAPIVersion(ctx, version, now)
}

// Order keeps the arrival order of several ledgers in one store: every
// commit a world makes through one of its stores (Store) that writes a
// ledger entry also writes, in the same commit, the entry's place in the
// order. Its key space, under its prefix: "<seq>" -> {"w": world, "seq":
// the entry's seq in that world's ledger}.
type Order struct {
	store  Store
	prefix []byte
	mu     sync.Mutex // one commit through its stores at a time, so places follow commits
	seq    atomic.Int64
}

// position is one entry's place in the order.
type position struct {
	World int   `json:"w"`
	Seq   int64 `json:"seq"`
}

// NewOrder opens the order kept in store under prefix, recovering its
// length.
func NewOrder(store Store, prefix []byte) (*Order, error) {
	o := &Order{store: store, prefix: bytes.Clone(prefix)}
	var n int64
	if err := store.Scan(o.prefix, func(_, _ []byte) error { n++; return nil }); err != nil {
		return nil, fmt.Errorf("read the worlds' arrival order: %w", err)
	}
	o.seq.Store(n)
	return o, nil
}

// Store is the store world i of the order writes through, its keys under
// sub (the prefix the world is opened with): a commit that writes entries
// of its ledger records their places too, in the same commit. The commits
// go to inner (nil: the order's own store), which must hold the same keys
// — the same journal written another way (without waiting for a sync,
// say).
func (o *Order) Store(i int, sub []byte, inner Store) Store {
	if inner == nil {
		inner = o.store
	}
	return orderedStore{o: o, i: i, ledger: append(bytes.Clone(sub), ledgerSpace...), inner: inner}
}

func (o *Order) positions() ([]position, error) {
	var out []position
	err := o.store.Scan(o.prefix, func(_, v []byte) error {
		var p position
		if err := json.Unmarshal(v, &p); err != nil {
			return err
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the worlds' arrival order: %w", err)
	}
	return out, nil
}

type orderedStore struct {
	o      *Order
	i      int
	ledger []byte // the world's ledger key space
	inner  Store  // where its commits go
}

func (s orderedStore) Commit(ctx context.Context, entries ...Entry) error {
	o := s.o
	o.mu.Lock()
	defer o.mu.Unlock()
	n := o.seq.Load()
	all := entries
	for _, e := range entries {
		rest, ok := bytes.CutPrefix(e.Key, s.ledger)
		if !ok {
			continue
		}
		raw, err := hex.DecodeString(string(rest))
		if err != nil || len(raw) != 8 {
			return fmt.Errorf("world store: ledger key %q is not a seq", e.Key)
		}
		n++
		v, _ := json.Marshal(position{World: s.i, Seq: int64(binary.BigEndian.Uint64(raw))})
		all = append(all[:len(all):len(all)], Entry{Key: append(bytes.Clone(o.prefix), seqKey(n)...), Value: v})
	}
	if err := s.inner.Commit(ctx, all...); err != nil {
		return err
	}
	o.seq.Store(n)
	return nil
}

func (s orderedStore) Get(key []byte) ([]byte, error) { return s.inner.Get(key) }

func (s orderedStore) Scan(prefix []byte, fn func(key, value []byte) error) error {
	return s.inner.Scan(prefix, fn)
}

// LedgerHash fingerprints a ledger: what a world with no state of its own
// to show (a journal of an HTTP API's answers) gives as its Snapshot.
func LedgerHash(ledger []LedgerEntry) string {
	h := sha256.New()
	for _, e := range ledger {
		b, _ := json.Marshal(e)
		h.Write(b)
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}
