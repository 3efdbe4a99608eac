// Package cloud is the cloud world: an in-process simulator of a small
// cloud API with networks, databases, migrations, services, DNS records and
// database snapshots, served in two API versions.
//
// Like many real cloud APIs without a client token, its create_* and
// deploy_* calls are NOT idempotent: a repeat creates a second resource.
// set_dns is an upsert, run_migration brings a database up to a version
// (a no-op when it is already there) and list is read-only.
//
// # API versions
//
// The world starts in v1 and can be switched to v2 mid-run through
// world.Versioned (the api-version fault); the version is durable state and
// the switch is a world event in the ledger. v2 breaks v1 clients in four
// ways, each answered as a permanent 4xx failure whose error Details say how
// to correct the request:
//
//   - removed endpoint: cloud.list answers 410 "gone", details
//     {"replacement": "cloud.list_resources"}; cloud.list_resources takes the
//     same arguments and gives the same result;
//   - changed auth: every mutating call needs an api_key argument issued by
//     cloud.issue_api_key {} (itself keyless); missing or unknown keys
//     answer 401 "unauthorized", details {"obtain": "cloud.issue_api_key",
//     "field": "api_key"}; read-only calls need no key;
//   - renamed field: database_id is db_id, in arguments and results; sending
//     database_id answers 400 "field_renamed", details
//     {"renamed": {"database_id": "db_id"}};
//   - new required field: cloud.create_snapshot needs retention_days (an
//     integer 1..3650); without it, 400 "missing_field", details
//     {"required": ["retention_days"], "example": {"retention_days": 7}}.
//
// When several apply to one request, v2 checks in that order: gone, then
// auth, then renamed, then missing; so an agent that corrects one error at a
// time meets them in a fixed sequence. Unknown kinds and arguments that are
// not a JSON object are refused before any of them.
//
// Definition describes every error code of each version with the shape of
// its details and an example request (errors.go); `overnight worlds` shows
// them with the error the world answers each example with.
//
// # Goals
//
// The world option "goal" selects what CheckGoal judges: "deployment" (the
// default; the task is a Goal) or "maintenance" (the task is a
// MaintenanceGoal: daily snapshots of a database).
//
// Every request is recorded in the world's own ledger and every resource is
// tagged with the idempotency key of the effect that created it; the
// request, the ledger entry and the state change are written in one durable
// commit inside Execute. The package must not know about runs, attempts,
// faults or the gateway.
package cloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// Name is the world's registry name.
const Name = "cloud"

// Resource kinds, as they appear in Resource.Kind and cloud.list.
const (
	ResNetwork  = "network"
	ResDatabase = "database"
	ResService  = "service"
	ResDNS      = "dns"
	ResSnapshot = "snapshot"
	ResAPIKey   = "api_key" // v2 credentials; not listable
)

// Resource is one thing the cloud holds.
type Resource struct {
	ID        string            `json:"id"`
	Kind      string            `json:"kind"`
	Name      string            `json:"name"`
	Key       string            `json:"key"` // idempotency key of the effect that created (or last changed) it
	Fields    map[string]string `json:"fields,omitempty"`
	Version   int               `json:"version,omitempty"` // databases: schema version
	CreatedAt time.Time         `json:"created_at"`
}

type meta struct {
	Counters map[string]int `json:"counters"`
	Version  string         `json:"api_version"`
}

// World is the cloud simulator: a world.Model, which the harness wraps in
// the durable ledger. It is safe for concurrent use; the ledger applies
// requests one at a time.
type World struct {
	goal string // GoalDeployment or GoalMaintenance

	mu        sync.Mutex
	meta      meta
	resources map[string]*Resource // by id ("dns:<host>" for DNS records)
}

var (
	_ world.Model           = (*World)(nil)
	_ world.VersionedModel  = (*World)(nil)
	_ world.GoalJudge       = (*World)(nil)
	_ world.DuplicateFinder = (*World)(nil)
	_ world.Snapshotter     = (*World)(nil)
)

// Register adds the cloud world to a registry.
func Register(r *world.Registry) { r.Register(Definition()) }

// Open opens (or recovers) the cloud world's model from its state. The one
// option is OptionGoal (default GoalDeployment).
func Open(ctx context.Context, state world.Reader, options map[string]any) (world.Model, error) {
	goal, err := parseOptions(options)
	if err != nil {
		return nil, err
	}
	w := &World{goal: goal, resources: map[string]*Resource{}}
	w.meta = meta{Counters: map[string]int{}, Version: V1}
	b, err := state.Get(key("meta"))
	switch {
	case errors.Is(err, world.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("read cloud world state: %w", err)
	default:
		if err := json.Unmarshal(b, &w.meta); err != nil {
			return nil, fmt.Errorf("decode cloud world state: %w", err)
		}
		if !knownVersion(w.meta.Version) {
			return nil, fmt.Errorf("cloud world state has API version %q, which this build does not know (it knows %s)",
				w.meta.Version, strings.Join(apiVersions, ", "))
		}
	}
	if w.meta.Counters == nil {
		w.meta.Counters = map[string]int{}
	}
	err = state.Scan(key("res/"), func(_, v []byte) error {
		var r Resource
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		w.resources[r.ID] = &r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read cloud world resources: %w", err)
	}
	return w, nil
}

// key is a key of the world's state, relative to its key space.
func key(parts ...string) []byte { return []byte(strings.Join(parts, "")) }

// Name implements world.Model.
func (w *World) Name() string { return Name }

// Kinds implements world.Model: the kinds the current API version offers.
func (w *World) Kinds() []world.KindInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]world.KindInfo(nil), kindsOf(w.meta.Version)...)
}

// change is what one request does to the world, applied only once durable.
type change struct {
	outcome  world.Outcome
	resource *Resource // created or updated
	counter  string    // counter consumed, if any
}

// Apply implements world.Model: the request's outcome, and the change —
// the resource it creates or updates, and the counters and API version —
// which the ledger commits with the request's entry.
func (w *World) Apply(ctx context.Context, req world.Request) (world.Outcome, world.Change, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, err := w.apply(req)
	if err != nil {
		return world.Outcome{}, world.Change{}, err
	}
	next := w.nextMeta()
	if ch.counter != "" {
		next.Counters[ch.counter]++
	}
	wc, err := w.stateChange(next, ch.resource)
	return ch.outcome, wc, err
}

// nextMeta copies the metadata (w.mu held).
func (w *World) nextMeta() meta {
	next := w.meta
	next.Counters = make(map[string]int, len(w.meta.Counters))
	for k, v := range w.meta.Counters {
		next.Counters[k] = v
	}
	return next
}

// stateChange is the world.Change that writes next and res and, once
// durable, makes them the world's (w.mu held).
func (w *World) stateChange(next meta, res *Resource) (world.Change, error) {
	var ch world.Change
	if res != nil {
		rb, err := json.Marshal(res)
		if err != nil {
			return ch, err
		}
		ch.Resource = res.ID
		ch.Writes = append(ch.Writes, world.Entry{Key: key("res/", res.ID), Value: rb})
	}
	mb, err := json.Marshal(next)
	if err != nil {
		return ch, err
	}
	ch.Writes = append(ch.Writes, world.Entry{Key: key("meta"), Value: mb})
	ch.Commit = func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.meta = next
		if res != nil {
			w.resources[res.ID] = res
		}
	}
	return ch, nil
}

// sorted returns the resources ordered by kind then numeric id.
func (w *World) sorted() []*Resource {
	out := make([]*Resource, 0, len(w.resources))
	for _, r := range w.resources {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		if len(out[i].ID) != len(out[j].ID) {
			return len(out[i].ID) < len(out[j].ID)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Resources returns every resource, ordered by kind and id.
func (w *World) Resources() []Resource {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Resource
	for _, r := range w.sorted() {
		out = append(out, *r)
	}
	return out
}

// Snapshot implements world.Snapshotter: the API version and every
// resource. (Requests refused change nothing here: the ledger records
// them.)
func (w *World) Snapshot(ctx context.Context) (json.RawMessage, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return json.Marshal(struct {
		APIVersion string      `json:"api_version"`
		Resources  []*Resource `json:"resources"`
	}{w.meta.Version, w.sorted()})
}

// Instance opens the cloud world on store under prefix — its model
// wrapped in the durable ledger there, as the harness drives it.
func Instance(ctx context.Context, store world.Store, prefix []byte, options map[string]any) (world.World, error) {
	return Definition().Instance(ctx, store, prefix, options)
}
