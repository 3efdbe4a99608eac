// Package cloud is the cloud world v1: an in-process simulator of a small
// cloud API with networks, databases, migrations, services and DNS records.
//
// Like many real cloud APIs without a client token, its create_* and
// deploy_* calls are NOT idempotent: a repeat creates a second resource.
// set_dns is an upsert, run_migration brings a database up to a version
// (a no-op when it is already there) and list is read-only.
//
// Every request is recorded in the world's own ledger and every resource is
// tagged with the idempotency key of the effect that created it; the
// request, the ledger entry and the state change are written in one durable
// commit inside Execute. The package must not know about runs, attempts or
// the gateway.
package cloud

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// Name is the world's registry name.
const Name = "cloud"

// Effect kinds offered by the cloud world v1.
const (
	KindCreateNetwork  = "cloud.create_network"
	KindCreateDatabase = "cloud.create_database"
	KindRunMigration   = "cloud.run_migration"
	KindDeployService  = "cloud.deploy_service"
	KindSetDNS         = "cloud.set_dns"
	KindList           = "cloud.list"
)

// Resource kinds, as they appear in Resource.Kind and cloud.list.
const (
	ResNetwork  = "network"
	ResDatabase = "database"
	ResService  = "service"
	ResDNS      = "dns"
)

var kinds = []world.KindInfo{
	{Name: KindCreateNetwork, Doc: "{name} -> {id, name}; not idempotent"},
	{Name: KindCreateDatabase, Doc: "{name, network_id} -> {id, name, network_id}; not idempotent"},
	{Name: KindRunMigration, Idempotent: true, Doc: "{database_id, version} -> {database_id, version, applied}; brings the schema up to version"},
	{Name: KindDeployService, Doc: "{name, image, database_id} -> {id, name, endpoint}; not idempotent"},
	{Name: KindSetDNS, Idempotent: true, Doc: "{host, target} -> {host, target}; upsert"},
	{Name: KindList, Idempotent: true, ReadOnly: true, Doc: "{kind: network|database|service|dns} -> {items}"},
}

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
	Seq      int64          `json:"seq"`
	Counters map[string]int `json:"counters"`
	Version  string         `json:"api_version"`
}

// World is the cloud simulator. It is safe for concurrent use; requests are
// applied one at a time.
type World struct {
	store  world.Store
	prefix []byte

	mu        sync.Mutex
	meta      meta
	resources map[string]*Resource // by id ("dns:<host>" for DNS records)
}

var _ world.World = (*World)(nil)

// Register adds the cloud world to a registry.
func Register(r *world.Registry) {
	r.Register(Name, "a cloud API: networks, databases, migrations, services, DNS (v1)", Open)
}

// Open opens (or recovers) the cloud world stored under prefix.
func Open(ctx context.Context, store world.Store, prefix []byte, options map[string]any) (world.World, error) {
	for k := range options {
		return nil, fmt.Errorf("cloud world: unknown option %q (it takes none in v1)", k)
	}
	w := &World{store: store, prefix: append([]byte(nil), prefix...), resources: map[string]*Resource{}}
	w.meta = meta{Counters: map[string]int{}, Version: "v1"}
	b, err := store.Get(w.key("meta"))
	switch {
	case errors.Is(err, journal.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("read cloud world state: %w", err)
	default:
		if err := json.Unmarshal(b, &w.meta); err != nil {
			return nil, fmt.Errorf("decode cloud world state: %w", err)
		}
	}
	err = store.Scan(w.key("res/"), func(_, v []byte) error {
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

func (w *World) key(parts ...string) []byte {
	return append(append([]byte(nil), w.prefix...), strings.Join(parts, "")...)
}

func seqKey(seq int64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(seq))
	return fmt.Sprintf("%x", b)
}

// Name implements world.World.
func (w *World) Name() string { return Name }

// Kinds implements world.World.
func (w *World) Kinds() []world.KindInfo { return append([]world.KindInfo(nil), kinds...) }

var (
	nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	hostRE = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`)
)

// change is what one request does to the world, applied only once durable.
type change struct {
	outcome  world.Outcome
	resource *Resource // created or updated
	counter  string    // counter consumed, if any
}

// Execute implements world.World.
func (w *World) Execute(ctx context.Context, req world.Request) (world.Outcome, error) {
	w.mu.Lock()
	defer w.mu.Unlock()

	ch, err := w.apply(req)
	if err != nil {
		return world.Outcome{}, err
	}
	next := w.meta
	next.Counters = make(map[string]int, len(w.meta.Counters))
	for k, v := range w.meta.Counters {
		next.Counters[k] = v
	}
	if ch.counter != "" {
		next.Counters[ch.counter]++
	}
	next.Seq++
	entry := world.LedgerEntry{Seq: next.Seq, Key: req.Key, Kind: req.Kind, Args: compact(req.Args), Outcome: ch.outcome, At: req.Now.UTC()}
	var entries []journal.Entry
	if ch.resource != nil {
		entry.Resource = ch.resource.ID
		rb, err := json.Marshal(ch.resource)
		if err != nil {
			return world.Outcome{}, err
		}
		entries = append(entries, journal.Entry{Key: w.key("res/", ch.resource.ID), Value: rb})
	}
	lb, err := json.Marshal(entry)
	if err != nil {
		return world.Outcome{}, err
	}
	ob, err := json.Marshal(ch.outcome)
	if err != nil {
		return world.Outcome{}, err
	}
	mb, err := json.Marshal(next)
	if err != nil {
		return world.Outcome{}, err
	}
	entries = append(entries,
		journal.Entry{Key: w.key("ledger/", seqKey(next.Seq)), Value: lb},
		journal.Entry{Key: w.key("bykey/", req.Key), Value: ob},
		journal.Entry{Key: w.key("meta"), Value: mb},
	)
	if err := w.store.Commit(ctx, entries...); err != nil {
		return world.Outcome{}, fmt.Errorf("cloud world: record %s (key %q): %w", req.Kind, req.Key, err)
	}
	w.meta = next
	if ch.resource != nil {
		w.resources[ch.resource.ID] = ch.resource
	}
	return ch.outcome, nil
}

func compact(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}

func decodeArgs(raw json.RawMessage, v any) *world.Outcome {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		o := world.Failed(400, "invalid_argument", "arguments: %v", err)
		return &o
	}
	return nil
}

// apply computes the change a request makes, without touching state.
func (w *World) apply(req world.Request) (change, error) {
	switch req.Kind {
	case KindCreateNetwork:
		var a struct {
			Name string `json:"name"`
		}
		if f := decodeArgs(req.Args, &a); f != nil {
			return change{outcome: *f}, nil
		}
		if !nameRE.MatchString(a.Name) {
			return change{outcome: world.Failed(400, "invalid_argument", "name %q: want 1-63 of [a-z0-9-], starting with a letter", a.Name)}, nil
		}
		r := w.newResource(ResNetwork, "net", a.Name, req, nil)
		return w.created(r, "net", map[string]any{"id": r.ID, "name": r.Name})
	case KindCreateDatabase:
		var a struct {
			Name      string `json:"name"`
			NetworkID string `json:"network_id"`
		}
		if f := decodeArgs(req.Args, &a); f != nil {
			return change{outcome: *f}, nil
		}
		if !nameRE.MatchString(a.Name) {
			return change{outcome: world.Failed(400, "invalid_argument", "name %q: want 1-63 of [a-z0-9-], starting with a letter", a.Name)}, nil
		}
		if n := w.resources[a.NetworkID]; n == nil || n.Kind != ResNetwork {
			return change{outcome: world.Failed(404, "not_found", "network %q does not exist", a.NetworkID)}, nil
		}
		r := w.newResource(ResDatabase, "db", a.Name, req, map[string]string{"network_id": a.NetworkID})
		return w.created(r, "db", map[string]any{"id": r.ID, "name": r.Name, "network_id": a.NetworkID})
	case KindRunMigration:
		var a struct {
			DatabaseID string `json:"database_id"`
			Version    int    `json:"version"`
		}
		if f := decodeArgs(req.Args, &a); f != nil {
			return change{outcome: *f}, nil
		}
		if a.Version < 1 {
			return change{outcome: world.Failed(400, "invalid_argument", "version %d: want >= 1", a.Version)}, nil
		}
		db := w.resources[a.DatabaseID]
		if db == nil || db.Kind != ResDatabase {
			return change{outcome: world.Failed(404, "not_found", "database %q does not exist", a.DatabaseID)}, nil
		}
		applied := []int{}
		for v := db.Version + 1; v <= a.Version; v++ {
			applied = append(applied, v)
		}
		if len(applied) == 0 {
			o, err := world.Done(map[string]any{"database_id": db.ID, "version": db.Version, "applied": applied})
			return change{outcome: o}, err
		}
		up := *db
		up.Fields = cloneFields(db.Fields)
		up.Version = a.Version
		up.Fields["migrated_by"] = req.Key
		o, err := world.Done(map[string]any{"database_id": db.ID, "version": a.Version, "applied": applied})
		return change{outcome: o, resource: &up}, err
	case KindDeployService:
		var a struct {
			Name       string `json:"name"`
			Image      string `json:"image"`
			DatabaseID string `json:"database_id"`
		}
		if f := decodeArgs(req.Args, &a); f != nil {
			return change{outcome: *f}, nil
		}
		if !nameRE.MatchString(a.Name) {
			return change{outcome: world.Failed(400, "invalid_argument", "name %q: want 1-63 of [a-z0-9-], starting with a letter", a.Name)}, nil
		}
		if a.Image == "" {
			return change{outcome: world.Failed(400, "invalid_argument", "image is required")}, nil
		}
		if d := w.resources[a.DatabaseID]; d == nil || d.Kind != ResDatabase {
			return change{outcome: world.Failed(404, "not_found", "database %q does not exist", a.DatabaseID)}, nil
		}
		id := fmt.Sprintf("svc-%d", w.meta.Counters["svc"]+1)
		r := w.newResource(ResService, "svc", a.Name, req, map[string]string{
			"image": a.Image, "database_id": a.DatabaseID, "endpoint": id + ".cloud.internal",
		})
		return w.created(r, "svc", map[string]any{"id": r.ID, "name": r.Name, "endpoint": r.Fields["endpoint"]})
	case KindSetDNS:
		var a struct {
			Host   string `json:"host"`
			Target string `json:"target"`
		}
		if f := decodeArgs(req.Args, &a); f != nil {
			return change{outcome: *f}, nil
		}
		if !hostRE.MatchString(a.Host) {
			return change{outcome: world.Failed(400, "invalid_argument", "host %q is not a DNS name", a.Host)}, nil
		}
		if a.Target == "" {
			return change{outcome: world.Failed(400, "invalid_argument", "target is required")}, nil
		}
		r := &Resource{ID: "dns:" + a.Host, Kind: ResDNS, Name: a.Host, Key: req.Key,
			Fields: map[string]string{"target": a.Target}, CreatedAt: req.Now.UTC()}
		if old := w.resources[r.ID]; old != nil {
			r.CreatedAt = old.CreatedAt
		}
		o, err := world.Done(map[string]any{"host": a.Host, "target": a.Target})
		return change{outcome: o, resource: r}, err
	case KindList:
		var a struct {
			Kind string `json:"kind"`
		}
		if f := decodeArgs(req.Args, &a); f != nil {
			return change{outcome: *f}, nil
		}
		switch a.Kind {
		case ResNetwork, ResDatabase, ResService, ResDNS:
		default:
			return change{outcome: world.Failed(400, "invalid_argument", "kind %q: want network, database, service or dns", a.Kind)}, nil
		}
		items := []*Resource{}
		for _, r := range w.sorted() {
			if r.Kind == a.Kind {
				items = append(items, r)
			}
		}
		o, err := world.Done(map[string]any{"items": items})
		return change{outcome: o}, err
	default:
		names := make([]string, len(kinds))
		for i, k := range kinds {
			names[i] = k.Name
		}
		return change{outcome: world.Failed(400, "unknown_kind", "the cloud world has no effect %q (it offers %s)", req.Kind, strings.Join(names, ", "))}, nil
	}
}

func cloneFields(f map[string]string) map[string]string {
	out := make(map[string]string, len(f)+1)
	for k, v := range f {
		out[k] = v
	}
	return out
}

func (w *World) newResource(kind, prefix, name string, req world.Request, fields map[string]string) *Resource {
	if fields == nil {
		fields = map[string]string{}
	}
	return &Resource{
		ID: fmt.Sprintf("%s-%d", prefix, w.meta.Counters[prefix]+1), Kind: kind, Name: name,
		Key: req.Key, Fields: fields, CreatedAt: req.Now.UTC(),
	}
}

func (w *World) created(r *Resource, counter string, result map[string]any) (change, error) {
	o, err := world.Done(result)
	return change{outcome: o, resource: r, counter: counter}, err
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

// Lookup implements world.World.
func (w *World) Lookup(ctx context.Context, key string) (world.Outcome, bool, error) {
	b, err := w.store.Get(w.key("bykey/", key))
	if errors.Is(err, journal.ErrNotFound) {
		return world.Outcome{}, false, nil
	}
	if err != nil {
		return world.Outcome{}, false, fmt.Errorf("cloud world: look up key %q: %w", key, err)
	}
	var o world.Outcome
	if err := json.Unmarshal(b, &o); err != nil {
		return world.Outcome{}, false, fmt.Errorf("cloud world: decode outcome of key %q: %w", key, err)
	}
	return o, true, nil
}

// Ledger implements world.World.
func (w *World) Ledger(ctx context.Context) ([]world.LedgerEntry, error) {
	var out []world.LedgerEntry
	err := w.store.Scan(w.key("ledger/"), func(_, v []byte) error {
		var e world.LedgerEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return err
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cloud world: read ledger: %w", err)
	}
	return out, nil
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

// Duplicates implements world.World: networks, databases and services that
// the ledger shows created more than once under the same name.
func (w *World) Duplicates(ctx context.Context) ([]world.Duplicate, error) {
	ledger, err := w.Ledger(ctx)
	if err != nil {
		return nil, err
	}
	type ident struct{ kind, name string }
	groups := map[ident]*world.Duplicate{}
	var order []ident
	for _, e := range ledger {
		var kind string
		switch e.Kind {
		case KindCreateNetwork:
			kind = ResNetwork
		case KindCreateDatabase:
			kind = ResDatabase
		case KindDeployService:
			kind = ResService
		default:
			continue
		}
		if e.Outcome.Status != "done" || e.Resource == "" {
			continue
		}
		var a struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(e.Args, &a)
		id := ident{kind, a.Name}
		g := groups[id]
		if g == nil {
			g = &world.Duplicate{Kind: kind, Name: a.Name}
			groups[id] = g
			order = append(order, id)
		}
		g.IDs = append(g.IDs, e.Resource)
		g.Keys = append(g.Keys, e.Key)
		g.Count++
	}
	var out []world.Duplicate
	for _, id := range order {
		if g := groups[id]; g.Count > 1 {
			out = append(out, *g)
		}
	}
	return out, nil
}

// Goal is the deployment a task asks for, as the cloud world checks it.
type Goal struct {
	Network   string `json:"network"`
	Database  string `json:"database"`
	Migration int    `json:"migration"`
	Service   struct {
		Name  string `json:"name"`
		Image string `json:"image"`
	} `json:"service"`
	DNS string `json:"dns"`
}

// CheckGoal implements world.World: the DNS name points at the endpoint of
// a service of the wanted name and image, whose database has the wanted
// name, sits on the wanted network and is migrated to at least the wanted
// version.
func (w *World) CheckGoal(ctx context.Context, task json.RawMessage) (world.Check, error) {
	var g Goal
	if err := json.Unmarshal(task, &g); err != nil {
		return world.Check{}, fmt.Errorf("cloud world: task is not a deployment goal: %w", err)
	}
	if g.DNS == "" || g.Service.Name == "" {
		return world.Check{}, fmt.Errorf("cloud world: task lacks dns or service.name; cannot judge the goal")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	rec := w.resources["dns:"+g.DNS]
	if rec == nil {
		return world.Check{Detail: fmt.Sprintf("no DNS record for %s", g.DNS)}, nil
	}
	target := rec.Fields["target"]
	var svc *Resource
	for _, r := range w.sorted() {
		if r.Kind == ResService && r.Fields["endpoint"] == target {
			svc = r
		}
	}
	if svc == nil {
		return world.Check{Detail: fmt.Sprintf("%s points at %q, which is no service's endpoint", g.DNS, target)}, nil
	}
	if svc.Name != g.Service.Name || (g.Service.Image != "" && svc.Fields["image"] != g.Service.Image) {
		return world.Check{Detail: fmt.Sprintf("%s points at service %s (%s, image %s), want %s with image %s",
			g.DNS, svc.ID, svc.Name, svc.Fields["image"], g.Service.Name, g.Service.Image)}, nil
	}
	db := w.resources[svc.Fields["database_id"]]
	if db == nil || (g.Database != "" && db.Name != g.Database) {
		return world.Check{Detail: fmt.Sprintf("service %s uses database %q, want one named %s", svc.ID, svc.Fields["database_id"], g.Database)}, nil
	}
	if db.Version < g.Migration {
		return world.Check{Detail: fmt.Sprintf("database %s is at schema version %d, want >= %d", db.ID, db.Version, g.Migration)}, nil
	}
	net := w.resources[db.Fields["network_id"]]
	if net == nil || (g.Network != "" && net.Name != g.Network) {
		return world.Check{Detail: fmt.Sprintf("database %s is on network %q, want one named %s", db.ID, db.Fields["network_id"], g.Network)}, nil
	}
	return world.Check{OK: true, Detail: fmt.Sprintf("%s -> %s (%s %s) -> %s v%d on %s",
		g.DNS, svc.ID, svc.Name, svc.Fields["image"], db.ID, db.Version, net.ID)}, nil
}

// Snapshot implements world.World.
func (w *World) Snapshot(ctx context.Context) (json.RawMessage, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return json.Marshal(struct {
		APIVersion string      `json:"api_version"`
		Seq        int64       `json:"seq"`
		Resources  []*Resource `json:"resources"`
	}{w.meta.Version, w.meta.Seq, w.sorted()})
}
