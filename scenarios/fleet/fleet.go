// Package fleet is the fleet world: an in-process simulator of a
// microservice fleet's logging, the world of the long task "optimise the
// logging of a whole microservice architecture".
//
// Each service uses a logging library and has a log configuration
// (Config: level, sampling, errors exempt from sampling, retention,
// format), the event rates it logs at each level, the formats its log
// shipper parses and the least retention compliance allows. From these the
// world measures, per service, the log volume and cost per day and the
// error visibility — the share of error events still logged — with one
// documented, deterministic formula (Measure).
//
// An agent changes a service's configuration through candidates: it
// proposes one (fleet.propose_candidate, written against the service's
// configuration as it is then), tries it on the service's staging copy
// (fleet.try_candidate: the trial passes or fails, and is measured), and
// either applies a passing one to production (fleet.apply_candidate) or
// rolls it back (fleet.rollback_candidate). A trial is not idempotent:
// each try is a new trial, and a candidate tried twice is what
// no-duplicate-effects reports. fleet.describe and fleet.measure are
// read-only.
//
// A trial fails when the candidate is stale (the service's configuration
// is no longer the one it was written against — another candidate was
// applied, or a dependency update changed a default), when its format is
// one the service's shipper cannot parse, or when its retention is below
// the service's compliance minimum.
//
// Every request is recorded in the world's ledger with the state change
// it makes, in one durable commit (world.Ledgered). The package must not
// know about runs, attempts, faults or the gateway.
package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// Name is the world's registry name.
const Name = "fleet"

// Service is one service of the fleet.
type Service struct {
	Name string `json:"name"`
	// Library is the logging library the service uses: its defaults are
	// the service's for every field not in Pinned.
	Library string `json:"library"`
	Rates   Rates  `json:"rates"`
	// Parsers are the formats the service's log shipper parses.
	Parsers []string `json:"parsers"`
	// MinRetentionDays is the least retention compliance allows.
	MinRetentionDays int `json:"min_retention_days"`
	// Config is the production configuration; Staging the staging copy's.
	Config  Config `json:"config"`
	Staging Config `json:"staging"`
	// Pinned are the configuration fields set explicitly (level, format):
	// a dependency update changes the others' defaults.
	Pinned []string `json:"pinned,omitempty"`
}

// Candidate statuses.
const (
	StatusProposed   = "proposed"
	StatusTried      = "tried" // tried and neither applied nor rolled back
	StatusApplied    = "applied"
	StatusRolledBack = "rolled_back"
)

// Change is a candidate's change to a service's configuration: the fields
// it sets (nil: left as they are).
type Change struct {
	Level         *string  `json:"level,omitempty"`
	Sampling      *float64 `json:"sampling,omitempty"`
	ExemptErrors  *bool    `json:"exempt_errors,omitempty"`
	RetentionDays *int     `json:"retention_days,omitempty"`
	Format        *string  `json:"format,omitempty"`
}

// Candidate is a configuration change proposed for a service.
type Candidate struct {
	ID      string `json:"id"`
	Service string `json:"service"`
	Change  Change `json:"change"`
	// Base is the service's production configuration when the candidate
	// was proposed; Config is Base with Change made.
	Base   Config `json:"base"`
	Config Config `json:"config"`
	Status string `json:"status"`
	// Trials counts the tries; Passed and Reason are the last one's, and
	// Figures what it measured on staging.
	Trials  int      `json:"trials"`
	Passed  bool     `json:"passed"`
	Reason  string   `json:"reason,omitempty"`
	Figures *Figures `json:"figures,omitempty"`
	Key     string   `json:"key"` // the key that proposed it
}

type meta struct {
	// StartCost is the fleet's log cost per day when the world was made.
	StartCost float64 `json:"start_cost_day"`
	// Libraries are the version of each logging library the fleet uses.
	Libraries map[string]string `json:"libraries"`
	// Trials counts every trial (trial ids are trial-N).
	Trials int `json:"trials"`
}

// World is the fleet simulator: a world.Model, which the harness wraps in
// the durable ledger. It is safe for concurrent use; the ledger applies
// requests one at a time.
type World struct {
	mu         sync.Mutex
	meta       meta
	services   map[string]*Service
	candidates map[string]*Candidate
	// stored: the world's state is in its store (a fresh world's seed is
	// written with its first change).
	stored bool
}

var (
	_ world.Model           = (*World)(nil)
	_ world.DuplicateFinder = (*World)(nil)
	_ world.Snapshotter     = (*World)(nil)
)

// Register adds the fleet world to a registry.
func Register(r *world.Registry) { r.Register(Definition()) }

// Instance opens the fleet world on store under prefix — its model
// wrapped in the durable ledger there, as the harness drives it.
func Instance(ctx context.Context, store world.Store, prefix []byte, options map[string]any) (world.World, error) {
	return Definition().Instance(ctx, store, prefix, options)
}

// Open opens (or recovers) the fleet world's model from its state. It
// takes no options.
func Open(ctx context.Context, state world.Reader, options map[string]any) (world.Model, error) {
	if len(options) > 0 {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range options {
				if !yield(k) {
					return
				}
			}
		})
		return nil, fmt.Errorf("fleet world: unknown option %q (it takes none)", keys[0])
	}
	w := &World{services: map[string]*Service{}, candidates: map[string]*Candidate{}}
	b, err := state.Get([]byte("meta"))
	switch {
	case errors.Is(err, world.ErrNotFound):
		w.seed()
		return w, nil
	case err != nil:
		return nil, fmt.Errorf("read fleet world state: %w", err)
	}
	if err := json.Unmarshal(b, &w.meta); err != nil {
		return nil, fmt.Errorf("decode fleet world state: %w", err)
	}
	w.stored = true
	err = state.Scan([]byte("svc/"), func(_, v []byte) error {
		var s Service
		if err := json.Unmarshal(v, &s); err != nil {
			return err
		}
		w.services[s.Name] = &s
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read fleet world services: %w", err)
	}
	err = state.Scan([]byte("cand/"), func(_, v []byte) error {
		var c Candidate
		if err := json.Unmarshal(v, &c); err != nil {
			return err
		}
		w.candidates[c.ID] = &c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read fleet world candidates: %w", err)
	}
	return w, nil
}

// seed makes the fleet every new world starts with (nothing written until
// the first request: a fresh world is always this one).
func (w *World) seed() {
	w.meta = meta{Libraries: map[string]string{}}
	for name, rel := range libraries {
		w.meta.Libraries[name] = rel[0].Version
	}
	for _, s := range initialServices() {
		w.services[s.Name] = s
	}
	w.meta.StartCost = w.totalCost()
}

// Name implements world.Model.
func (w *World) Name() string { return Name }

// Kinds implements world.Model.
func (w *World) Kinds() []world.KindInfo { return append([]world.KindInfo(nil), kinds...) }

// names are the services' names, sorted.
func (w *World) names() []string {
	out := make([]string, 0, len(w.services))
	for n := range w.services {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// totalCost is the fleet's production log cost per day (w.mu held, or
// before the world is shared).
func (w *World) totalCost() float64 {
	var sum float64
	for _, n := range w.names() {
		s := w.services[n]
		sum += Measure(s.Rates, s.Config).CostPerDay
	}
	return round(sum, 4)
}

// pending is what one request or event does to the world: new copies of
// what it changes, made the world's once durable.
type pending struct {
	meta       *meta
	services   []*Service
	candidates []*Candidate
	resource   string
}

// change is the world.Change that writes p and, once durable, makes it
// the world's (w.mu held).
func (w *World) change(p pending) (world.Change, error) {
	ch := world.Change{Resource: p.resource}
	put := func(key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		ch.Writes = append(ch.Writes, world.Entry{Key: []byte(key), Value: b})
		return nil
	}
	if !w.stored {
		// The first write of a world: its seed goes with it, so a world
		// opened again finds the whole fleet.
		if p.meta == nil {
			m := w.meta
			p.meta = &m
		}
		for _, n := range w.names() {
			if !slices.ContainsFunc(p.services, func(s *Service) bool { return s.Name == n }) {
				p.services = append(p.services, w.services[n])
			}
		}
	}
	if p.meta != nil {
		if err := put("meta", p.meta); err != nil {
			return ch, err
		}
	}
	for _, s := range p.services {
		if err := put("svc/"+s.Name, s); err != nil {
			return ch, err
		}
	}
	for _, c := range p.candidates {
		if err := put("cand/"+c.ID, c); err != nil {
			return ch, err
		}
	}
	ch.Commit = func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.stored = true
		if p.meta != nil {
			w.meta = *p.meta
		}
		for _, s := range p.services {
			w.services[s.Name] = s
		}
		for _, c := range p.candidates {
			w.candidates[c.ID] = c
		}
	}
	return ch, nil
}

// Apply implements world.Model.
func (w *World) Apply(ctx context.Context, req world.Request) (world.Outcome, world.Change, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out, p, err := w.apply(req)
	if err != nil || out.Status != "done" || (p.meta == nil && len(p.services) == 0 && len(p.candidates) == 0) {
		return out, world.Change{Resource: p.resource}, err
	}
	ch, err := w.change(p)
	return out, ch, err
}

// Services returns every service, sorted by name.
func (w *World) Services() []Service {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Service, 0, len(w.services))
	for _, n := range w.names() {
		out = append(out, *w.services[n])
	}
	return out
}

// Candidates returns every candidate, sorted by id.
func (w *World) Candidates() []Candidate {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sortedCandidates()
}

func (w *World) sortedCandidates() []Candidate {
	out := make([]Candidate, 0, len(w.candidates))
	for _, c := range w.candidates {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Snapshot implements world.Snapshotter: what fleet.describe answers.
func (w *World) Snapshot(ctx context.Context) (json.RawMessage, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return json.Marshal(w.describe())
}

// Duplicates implements world.DuplicateFinder: a candidate tried more
// than once (fleet.try_candidate is not idempotent: each try is a new
// trial on staging). Failed requests and world events never count.
func (w *World) Duplicates(ctx context.Context, ledger []world.LedgerEntry) ([]world.Duplicate, error) {
	var c world.DuplicateCounter
	for _, e := range ledger {
		if e.IsEvent() || e.Outcome.Status != "done" || e.Kind != KindTryCandidate {
			continue
		}
		var a struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(e.Args, &a)
		c.Add("trial", "", a.ID, e)
	}
	return c.Duplicates(), nil
}

// fieldsDiffering names the fields in which a and b differ, as "field
// old -> new".
func fieldsDiffering(a, b Config) []string {
	var out []string
	add := func(f string, x, y any) {
		if x != y {
			out = append(out, fmt.Sprintf("%s %v -> %v", f, x, y))
		}
	}
	add("level", a.Level, b.Level)
	add("sampling", a.Sampling, b.Sampling)
	add("exempt_errors", a.ExemptErrors, b.ExemptErrors)
	add("retention_days", a.RetentionDays, b.RetentionDays)
	add("format", a.Format, b.Format)
	return out
}

// joinOr is "a, b or c".
func joinOr(xs []string) string {
	if len(xs) <= 1 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}
