package cloud

import (
	"context"
	"encoding/json"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// Duplicates implements world.DuplicateFinder: networks, databases and services that
// the ledger shows created more than once under the same name, and
// snapshots created more than once under the same name of the same
// database (Scope is the database id). Failed requests and world events
// (API version changes) never count.
func (w *World) Duplicates(ctx context.Context, ledger []world.LedgerEntry) ([]world.Duplicate, error) {
	type ident struct{ kind, scope, name string }
	groups := map[ident]*world.Duplicate{}
	var order []ident
	for _, e := range ledger {
		if e.IsEvent() || e.Outcome.Status != protocol.StatusDone || e.Resource == "" {
			continue
		}
		var a struct {
			Name       string `json:"name"`
			DatabaseID string `json:"database_id"` // v1
			DBID       string `json:"db_id"`       // v2
		}
		_ = json.Unmarshal(e.Args, &a)
		var id ident
		switch e.Kind {
		case KindCreateNetwork:
			id = ident{kind: ResNetwork, name: a.Name}
		case KindCreateDatabase:
			id = ident{kind: ResDatabase, name: a.Name}
		case KindDeployService:
			id = ident{kind: ResService, name: a.Name}
		case KindCreateSnapshot:
			db := a.DatabaseID
			if db == "" {
				db = a.DBID
			}
			id = ident{kind: ResSnapshot, scope: db, name: a.Name}
		default:
			continue
		}
		g := groups[id]
		if g == nil {
			g = &world.Duplicate{Kind: id.kind, Name: id.name, Scope: id.scope}
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
