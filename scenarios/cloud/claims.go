package cloud

import (
	"context"
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

// CheckClaim implements world.ClaimChecker. It runs on every checkpoint
// that carries claims: the value is read without reflection
// (world.Claim.DecodeValue), and a claim that holds costs one string for
// its detail.
func (w *World) CheckClaim(ctx context.Context, c world.Claim) (world.ClaimResult, error) {
	res := world.ClaimResult{Claim: c}
	switch c.Name {
	case ClaimExists:
		var kind, name, id string
		err := c.DecodeValue(world.StringField("kind", &kind), world.StringField("name", &name), world.StringField("id", &id))
		if err != nil || kind == "" || (name == "") == (id == "") {
			return unjudged(c, `want {"kind": KIND, "name": NAME} or {"kind": KIND, "id": ID}`), nil
		}
		w.mu.Lock()
		r := w.find(kind, name, id)
		var found string
		if r != nil {
			found = r.ID
		}
		w.mu.Unlock()
		if r == nil {
			res.Verdict, res.Detail = world.ClaimContradicted, "the cloud has no "+kind+" "+strconv.Quote(name+id)
			return res, nil
		}
		res.Verdict, res.Detail = world.ClaimHolds, kind+" "+strconv.Quote(name+id)+" exists ("+found+")"
		return res, nil
	case ClaimMigrated:
		var database string
		var version int
		err := c.DecodeValue(world.StringField("database", &database), world.IntField("version", &version))
		if err != nil || database == "" || version < 1 {
			return unjudged(c, `want {"database": NAME or ID, "version": N}`), nil
		}
		w.mu.Lock()
		db := w.find(ResDatabase, database, "")
		if db == nil {
			db = w.find(ResDatabase, "", database)
		}
		at := 0
		if db != nil {
			at = db.Version
		}
		w.mu.Unlock()
		switch {
		case db == nil:
			res.Verdict, res.Detail = world.ClaimContradicted, fmt.Sprintf("the cloud has no database %q to be migrated", database)
		case at < version:
			res.Verdict, res.Detail = world.ClaimContradicted, fmt.Sprintf("database %q is at schema version %d, not %d", database, at, version)
		default:
			res.Verdict, res.Detail = world.ClaimHolds, fmt.Sprintf("database %q is at schema version %d", database, at)
		}
		return res, nil
	}
	return unjudged(c, fmt.Sprintf("the cloud world judges only %q and %q claims", ClaimExists, ClaimMigrated)), nil
}

// unjudged is the result of a claim the cloud cannot judge: why.
func unjudged(c world.Claim, why string) world.ClaimResult {
	return world.ClaimResult{Claim: c, Verdict: world.ClaimUnknown, Detail: "claim " + c.Name + ": " + why}
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
