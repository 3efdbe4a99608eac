package cloud

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"

	"github.com/overnight-dev/overnight/scenarios/world"
)

var (
	nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	hostRE = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`)
)

func decodeArgs(raw json.RawMessage, v any) *world.Outcome {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		o := world.Failed(statusBadRequest, codeInvalid, "arguments: %v", err)
		return &o
	}
	return nil
}

// decodeVersioned decodes arguments in the v1 shape T, or, in v2, in the v2
// shape U converted to T.
func decodeVersioned[T, U any](version string, raw json.RawMessage, conv func(U) T) (T, *world.Outcome) {
	var t T
	if version != V2 {
		return t, decodeArgs(raw, &t)
	}
	var u U
	if f := decodeArgs(raw, &u); f != nil {
		return t, f
	}
	return conv(u), nil
}

// Argument shapes per kind; a ...V2 type differs from its v1 type only in
// its JSON names, so it converts.
type (
	migrationArgs struct {
		DatabaseID string `json:"database_id"`
		Version    int    `json:"version"`
	}
	migrationArgsV2 struct {
		DatabaseID string `json:"db_id"`
		Version    int    `json:"version"`
	}
	serviceArgs struct {
		Name       string `json:"name"`
		Image      string `json:"image"`
		DatabaseID string `json:"database_id"`
	}
	serviceArgsV2 struct {
		Name       string `json:"name"`
		Image      string `json:"image"`
		DatabaseID string `json:"db_id"`
	}
	snapshotArgs struct {
		DatabaseID    string `json:"database_id"`
		Name          string `json:"name"`
		RetentionDays int    `json:"-"` // v2 only; 0 in v1
	}
	snapshotArgsV2 struct {
		DatabaseID    string `json:"db_id"`
		Name          string `json:"name"`
		RetentionDays int    `json:"retention_days"`
	}
)

func fail(o world.Outcome) (change, error) { return change{outcome: o}, nil }

func badName(name string) world.Outcome {
	return world.Failed(statusBadRequest, codeInvalid, "name %q: want 1-63 of [a-z0-9-], starting with a letter", name)
}

// apply computes the change a request makes, without touching state.
func (w *World) apply(req world.Request) (change, error) {
	version := w.meta.Version
	if version == V2 {
		args, refusal := w.gateV2(req.Kind, req.Args)
		if refusal != nil {
			return fail(*refusal)
		}
		req.Args = args
	} else if !offered(version, req.Kind) {
		return fail(unknownKind(version, req.Kind))
	}
	switch req.Kind {
	case KindCreateNetwork:
		var a struct {
			Name string `json:"name"`
		}
		if f := decodeArgs(req.Args, &a); f != nil {
			return fail(*f)
		}
		if !nameRE.MatchString(a.Name) {
			return fail(badName(a.Name))
		}
		r := w.newResource(ResNetwork, "net", a.Name, req, nil)
		return w.created(r, "net", map[string]any{"id": r.ID, "name": r.Name})
	case KindCreateDatabase:
		var a struct {
			Name      string `json:"name"`
			NetworkID string `json:"network_id"`
		}
		if f := decodeArgs(req.Args, &a); f != nil {
			return fail(*f)
		}
		if !nameRE.MatchString(a.Name) {
			return fail(badName(a.Name))
		}
		if n := w.resources[a.NetworkID]; n == nil || n.Kind != ResNetwork {
			return fail(world.Failed(statusNotFound, codeNotFound, "network %q does not exist", a.NetworkID))
		}
		r := w.newResource(ResDatabase, "db", a.Name, req, map[string]string{"network_id": a.NetworkID})
		return w.created(r, "db", map[string]any{"id": r.ID, "name": r.Name, "network_id": a.NetworkID})
	case KindRunMigration:
		a, f := decodeVersioned(version, req.Args, func(b migrationArgsV2) migrationArgs { return migrationArgs(b) })
		if f != nil {
			return fail(*f)
		}
		return w.migrate(req, a)
	case KindDeployService:
		a, f := decodeVersioned(version, req.Args, func(b serviceArgsV2) serviceArgs { return serviceArgs(b) })
		if f != nil {
			return fail(*f)
		}
		return w.deploy(req, a)
	case KindSetDNS:
		return w.setDNS(req)
	case KindCreateSnapshot:
		a, f := decodeVersioned(version, req.Args, func(b snapshotArgsV2) snapshotArgs { return snapshotArgs(b) })
		if f != nil {
			return fail(*f)
		}
		return w.snapshot(req, a)
	case KindList, KindListResources:
		return w.list(req)
	case KindIssueAPIKey:
		var a struct{}
		if f := decodeArgs(req.Args, &a); f != nil {
			return fail(*f)
		}
		r := w.newResource(ResAPIKey, "key", "", req, nil)
		r.Name = r.ID
		return w.created(r, "key", map[string]any{"api_key": r.ID})
	default: // offered by a version but not handled: a programming error
		return change{}, fmt.Errorf("cloud world: kind %s is offered but has no handler", req.Kind)
	}
}

func (w *World) migrate(req world.Request, a migrationArgs) (change, error) {
	if a.Version < 1 || a.Version > schemaVersionMax {
		return fail(world.Failed(statusBadRequest, codeInvalid, "version %d: want 1..%d", a.Version, schemaVersionMax))
	}
	db := w.resources[a.DatabaseID]
	if db == nil || db.Kind != ResDatabase {
		return fail(world.Failed(statusNotFound, codeNotFound, "database %q does not exist", a.DatabaseID))
	}
	applied := []int{}
	for v := db.Version + 1; v <= a.Version; v++ {
		applied = append(applied, v)
	}
	if len(applied) == 0 {
		o, err := world.Done(map[string]any{w.dbField(): db.ID, "version": db.Version, "applied": applied})
		return change{outcome: o}, err
	}
	up := *db
	up.Fields = cloneFields(db.Fields)
	up.Version = a.Version
	up.Fields["migrated_by"] = req.Key
	o, err := world.Done(map[string]any{w.dbField(): db.ID, "version": a.Version, "applied": applied})
	return change{outcome: o, resource: &up}, err
}

func (w *World) deploy(req world.Request, a serviceArgs) (change, error) {
	if !nameRE.MatchString(a.Name) {
		return fail(badName(a.Name))
	}
	if a.Image == "" {
		return fail(world.Failed(statusBadRequest, codeInvalid, "image is required"))
	}
	if d := w.resources[a.DatabaseID]; d == nil || d.Kind != ResDatabase {
		return fail(world.Failed(statusNotFound, codeNotFound, "database %q does not exist", a.DatabaseID))
	}
	id := fmt.Sprintf("svc-%d", w.meta.Counters["svc"]+1)
	r := w.newResource(ResService, "svc", a.Name, req, map[string]string{
		"image": a.Image, ArgDatabaseID: a.DatabaseID, "endpoint": id + ".cloud.internal",
	})
	return w.created(r, "svc", map[string]any{"id": r.ID, "name": r.Name, "endpoint": r.Fields["endpoint"]})
}

func (w *World) setDNS(req world.Request) (change, error) {
	var a struct {
		Host   string `json:"host"`
		Target string `json:"target"`
	}
	if f := decodeArgs(req.Args, &a); f != nil {
		return fail(*f)
	}
	if !hostRE.MatchString(a.Host) {
		return fail(world.Failed(statusBadRequest, codeInvalid, "host %q is not a DNS name", a.Host))
	}
	if a.Target == "" {
		return fail(world.Failed(statusBadRequest, codeInvalid, "target is required"))
	}
	r := &Resource{ID: "dns:" + a.Host, Kind: ResDNS, Name: a.Host, Key: req.Key,
		Fields: map[string]string{"target": a.Target}, CreatedAt: req.Now.UTC()}
	if old := w.resources[r.ID]; old != nil {
		r.CreatedAt = old.CreatedAt
	}
	o, err := world.Done(map[string]any{"host": a.Host, "target": a.Target})
	return change{outcome: o, resource: r}, err
}

// snapshot creates a snapshot of a database; like every create, a repeat
// makes a second one.
func (w *World) snapshot(req world.Request, a snapshotArgs) (change, error) {
	if !nameRE.MatchString(a.Name) {
		return fail(badName(a.Name))
	}
	if w.meta.Version == V2 && (a.RetentionDays < 1 || a.RetentionDays > retentionDaysMax) {
		return fail(world.Failed(statusBadRequest, codeInvalid, "%s %d: want an integer 1..%d", ArgRetentionDays, a.RetentionDays, retentionDaysMax))
	}
	if d := w.resources[a.DatabaseID]; d == nil || d.Kind != ResDatabase {
		return fail(world.Failed(statusNotFound, codeNotFound, "database %q does not exist", a.DatabaseID))
	}
	fields := map[string]string{ArgDatabaseID: a.DatabaseID}
	if a.RetentionDays > 0 {
		fields[ArgRetentionDays] = strconv.Itoa(a.RetentionDays)
	}
	r := w.newResource(ResSnapshot, "snap", a.Name, req, fields)
	return w.created(r, "snap", map[string]any{"id": r.ID, "name": r.Name, w.dbField(): a.DatabaseID})
}

// list answers cloud.list (v1) and cloud.list_resources (v2) alike.
func (w *World) list(req world.Request) (change, error) {
	var a struct {
		Kind string `json:"kind"`
	}
	if f := decodeArgs(req.Args, &a); f != nil {
		return fail(*f)
	}
	switch a.Kind {
	case ResNetwork, ResDatabase, ResService, ResDNS, ResSnapshot:
	default:
		return fail(world.Failed(statusBadRequest, codeInvalid, "kind %q: want network, database, service, dns or snapshot", a.Kind))
	}
	items := []*Resource{}
	for _, r := range w.sorted() {
		if r.Kind == a.Kind {
			items = append(items, w.present(r))
		}
	}
	o, err := world.Done(map[string]any{"items": items})
	return change{outcome: o}, err
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
