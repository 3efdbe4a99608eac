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
	var c world.DuplicateCounter
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
		switch e.Kind {
		case KindCreateNetwork:
			c.Add(ResNetwork, "", a.Name, e)
		case KindCreateDatabase:
			c.Add(ResDatabase, "", a.Name, e)
		case KindDeployService:
			c.Add(ResService, "", a.Name, e)
		case KindCreateSnapshot:
			db := a.DatabaseID
			if db == "" {
				db = a.DBID
			}
			c.Add(ResSnapshot, db, a.Name, e)
		}
	}
	return c.Duplicates(), nil
}
