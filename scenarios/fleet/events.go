package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// EventDepUpdate is the ledger Kind of a dependency update: a logging
// library moves to its next release, whose defaults (level or format)
// change on every service that uses it and does not pin that field. A
// candidate written for the old default is stale after it: its trial
// fails.
const EventDepUpdate = "world.dep_update"

// FaultDepUpdate is the chaos fault kind that fires EventDepUpdate.
const FaultDepUpdate = "dep-update"

var events = []world.EventInfo{{
	Name: EventDepUpdate, Fault: FaultDepUpdate,
	Args:   "{library?}",
	Result: "{library, previous, version, defaults: {field: {from, to}}, services}",
	Doc: "a logging library moves to its next release (library, else the first in name order with one left: logkit 2.0.0 logs ecs by default, zlog 1.0.0 debug); " +
		"every service on it that does not pin the changed field takes the new default, in production and staging, and a candidate written for the old one is stale (its trial fails)",
}}

var _ world.EventModel = (*World)(nil)

// Events implements world.EventModel.
func (w *World) Events() []world.EventInfo { return slices.Clone(events) }

// ApplyEvent implements world.EventModel: EventDepUpdate.
func (w *World) ApplyEvent(ctx context.Context, ev world.Event) (world.Outcome, world.Change, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ev.Kind != EventDepUpdate {
		return world.Outcome{}, world.Change{}, fmt.Errorf("%w %q", world.ErrUnknownEvent, ev.Kind)
	}
	var a struct {
		Library string `json:"library"`
	}
	if len(ev.Args) > 0 && string(ev.Args) != "null" {
		if err := json.Unmarshal(ev.Args, &a); err != nil {
			return world.Outcome{}, world.Change{}, fmt.Errorf("dep_update arguments %s: %w", ev.Args, err)
		}
	}
	lib := a.Library
	next := func(name string) int {
		rels := libraries[name]
		at := slices.IndexFunc(rels, func(r release) bool { return r.Version == w.meta.Libraries[name] })
		if at < 0 || at+1 >= len(rels) {
			return -1
		}
		return at + 1
	}
	names := slices.Sorted(maps.Keys(libraries))
	switch {
	case lib == "":
		for _, n := range names {
			if next(n) >= 0 {
				lib = n
				break
			}
		}
		if lib == "" {
			return world.Outcome{}, world.Change{}, fmt.Errorf("no library has a release left to update to (%v)", w.meta.Libraries)
		}
	case libraries[lib] == nil:
		return world.Outcome{}, world.Change{}, fmt.Errorf("no logging library %q in the fleet (libraries: %v)", lib, names)
	case next(lib) < 0:
		return world.Outcome{}, world.Change{}, fmt.Errorf("library %s is at its last release, %s", lib, w.meta.Libraries[lib])
	}
	rels := libraries[lib]
	i := next(lib)
	from, to := rels[i-1], rels[i]
	type move struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
	defaults := map[string]move{}
	if from.Level != to.Level {
		defaults["level"] = move{from.Level, to.Level}
	}
	if from.Format != to.Format {
		defaults["format"] = move{from.Format, to.Format}
	}
	m := w.meta
	m.Libraries = maps.Clone(w.meta.Libraries)
	m.Libraries[lib] = to.Version
	p := pending{meta: &m, resource: lib + "@" + to.Version}
	changed := []string{}
	for _, n := range w.names() {
		old := w.services[n]
		if old.Library != lib {
			continue
		}
		s := *old
		for field, mv := range defaults {
			if slices.Contains(s.Pinned, field) {
				continue
			}
			set := func(c *Config) {
				if field == "level" {
					c.Level = mv.To
				} else {
					c.Format = mv.To
				}
			}
			set(&s.Config)
			set(&s.Staging)
		}
		if s.Config != old.Config || s.Staging != old.Staging {
			changed = append(changed, s.Name)
			p.services = append(p.services, &s)
		}
	}
	out, err := world.Done(map[string]any{"library": lib, "previous": from.Version, "version": to.Version, "defaults": defaults, "services": changed})
	if err != nil {
		return world.Outcome{}, world.Change{}, err
	}
	ch, err := w.change(p)
	return out, ch, err
}
