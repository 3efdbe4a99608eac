package cloud_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// An agent written for v1 meets the v2 API and corrects its request from the
// error details alone.
func ExampleWorld_SwitchAPIVersion() {
	ctx := context.Background()
	// The harness backs a world with its journal; in memory is enough here.
	w, err := cloud.Instance(ctx, world.NewMemStore(), []byte("world/example/"), map[string]any{cloud.OptionGoal: cloud.GoalMaintenance})
	if err != nil {
		fmt.Println(err)
		return
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	call := func(key, kind, args string) world.Outcome {
		o, err := w.Execute(ctx, world.Request{Key: key, Kind: kind, Args: json.RawMessage(args), Now: now})
		if err != nil {
			panic(err)
		}
		if o.Error != nil {
			fmt.Printf("%s: %d %s %s\n", kind, o.Error.Status, o.Error.Code, o.Error.Details)
		} else {
			fmt.Printf("%s: %s\n", kind, o.Result)
		}
		return o
	}
	call("k1", cloud.KindCreateNetwork, `{"name":"ops-net"}`)
	call("k2", cloud.KindCreateDatabase, `{"name":"ops-db","network_id":"net-1"}`)

	prev, err := w.(world.Versioned).SetAPIVersion(ctx, cloud.V2, now)
	fmt.Println("switched from", prev, err)

	call("k3", cloud.KindCreateSnapshot, `{"database_id":"db-1","name":"daily-1"}`)
	call("k4", cloud.KindIssueAPIKey, `{}`)
	call("k5", cloud.KindCreateSnapshot, `{"database_id":"db-1","name":"daily-1","api_key":"key-1"}`)
	call("k6", cloud.KindCreateSnapshot, `{"db_id":"db-1","name":"daily-1","api_key":"key-1"}`)
	call("k7", cloud.KindCreateSnapshot, `{"db_id":"db-1","name":"daily-1","api_key":"key-1","retention_days":7}`)
	call("k8", cloud.KindList, `{"kind":"snapshot"}`)

	chk, _ := w.CheckGoal(ctx, json.RawMessage(`{"network":"ops-net","database":"ops-db","days":2,"snapshot_prefix":"daily-"}`))
	fmt.Println(chk.OK, chk.Detail)
	// Output:
	// cloud.create_network: {"id":"net-1","name":"ops-net"}
	// cloud.create_database: {"id":"db-1","name":"ops-db","network_id":"net-1"}
	// switched from v1 <nil>
	// cloud.create_snapshot: 401 unauthorized {"field":"api_key","obtain":"cloud.issue_api_key"}
	// cloud.issue_api_key: {"api_key":"key-1"}
	// cloud.create_snapshot: 400 field_renamed {"renamed":{"database_id":"db_id"}}
	// cloud.create_snapshot: 400 missing_field {"example":{"retention_days":7},"required":["retention_days"]}
	// cloud.create_snapshot: {"db_id":"db-1","id":"snap-1","name":"daily-1"}
	// cloud.list: 410 gone {"replacement":"cloud.list_resources"}
	// false missing snapshots daily-2 of ops-db (db-1 on ops-net (net-1); 1 of 2 present)
}
