package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// Claims the cloud world judges (world.ClaimChecker):
//
//	{"exists":   {"kind": "database", "name": "prod-db"}}   a resource of the kind, by name (or "id")
//	{"migrated": {"database": "prod-db", "version": 3}}    a database's schema at least at the version
//
// Kinds are those of Resource.Kind: network, database, service, dns
// (named by its host), snapshot.
const (
	ClaimExists   = "exists"
	ClaimMigrated = "migrated"
)

var _ world.ClaimChecker = (*World)(nil)

// CheckClaim implements world.ClaimChecker.
func (w *World) CheckClaim(ctx context.Context, c world.Claim) (world.ClaimResult, error) {
	res := world.ClaimResult{Claim: c}
	bad := func(format string, args ...any) (world.ClaimResult, error) {
		res.Verdict, res.Detail = world.ClaimUnknown, fmt.Sprintf("claim %s: ", c.Name)+fmt.Sprintf(format, args...)
		return res, nil
	}
	verdict := func(ok bool, format string, args ...any) (world.ClaimResult, error) {
		res.Verdict, res.Detail = world.ClaimContradicted, fmt.Sprintf(format, args...)
		if ok {
			res.Verdict = world.ClaimHolds
		}
		return res, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch c.Name {
	case ClaimExists:
		var a struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
			ID   string `json:"id"`
		}
		if err := strictJSON(c.Value, &a); err != nil || a.Kind == "" || (a.Name == "") == (a.ID == "") {
			return bad(`want {"kind": KIND, "name": NAME} or {"kind": KIND, "id": ID}`)
		}
		r := w.find(a.Kind, a.Name, a.ID)
		what := a.Kind + " " + strconv.Quote(a.Name+a.ID)
		if r == nil {
			res.Verdict, res.Detail = world.ClaimContradicted, "the cloud has no "+what
			return res, nil
		}
		res.Verdict, res.Detail = world.ClaimHolds, what+" exists ("+r.ID+")"
		return res, nil
	case ClaimMigrated:
		var a struct {
			Database string `json:"database"`
			Version  int    `json:"version"`
		}
		if err := strictJSON(c.Value, &a); err != nil || a.Database == "" || a.Version < 1 {
			return bad(`want {"database": NAME or ID, "version": N}`)
		}
		db := w.find(ResDatabase, a.Database, "")
		if db == nil {
			db = w.find(ResDatabase, "", a.Database)
		}
		switch {
		case db == nil:
			return verdict(false, "the cloud has no database %q to be migrated", a.Database)
		case db.Version < a.Version:
			return verdict(false, "database %q is at schema version %d, not %d", a.Database, db.Version, a.Version)
		}
		return verdict(true, "database %q is at schema version %d", a.Database, db.Version)
	}
	return bad("the cloud world judges only %q and %q claims", ClaimExists, ClaimMigrated)
}

// find returns the resource of kind named name or with id; mu is held.
func (w *World) find(kind, name, id string) *Resource {
	if id != "" {
		if r := w.resources[id]; r != nil && r.Kind == kind {
			return r
		}
		return nil
	}
	var found *Resource // the lowest id of that name, as sorted() would give it
	for _, r := range w.resources {
		if r.Kind == kind && r.Name == name && (found == nil || len(r.ID) < len(found.ID) || len(r.ID) == len(found.ID) && r.ID < found.ID) {
			found = r
		}
	}
	return found
}

// strictJSON decodes a claim's value, refusing one that is not an object.
func strictJSON(raw json.RawMessage, v any) error {
	if len(raw) == 0 || raw[0] != '{' {
		return fmt.Errorf("not an object")
	}
	return json.Unmarshal(raw, v)
}
