package cloud

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// Definition describes the cloud world: its options, its two API versions
// with their effect kinds, its goals with the task each needs, and the
// check of a scenario's task against the goal it selects.
func Definition() world.Definition {
	return world.Definition{
		Name:    Name,
		Summary: "a cloud API: networks, databases, migrations, services, DNS, snapshots (v1, v2)",
		Open:    Open,
		Options: []world.Field{{Name: OptionGoal, Type: "string", Doc: "which goal goal-reached judges: " + strings.Join(goals, " or ") + " (default " + GoalDeployment + ")"}},
		Versions: []world.Version{
			{Name: V1, Summary: "the version every run starts in; create_* and deploy_* are not idempotent (a repeat makes a second resource)", Kinds: kindsV1, Errors: errorsV1()},
			{Name: V2, Summary: "after an api-version:v2 fault: database_id is renamed db_id; cloud.list answers 410 (use cloud.list_resources); create_snapshot requires retention_days; every mutating call needs an api_key from cloud.issue_api_key. Each refusal is a permanent 4xx whose details say what to change", Kinds: kindsV2, Errors: errorsV2()},
		},
		Goals: []world.Goal{
			{
				Name: GoalDeployment, Default: true,
				Judged: "the DNS record for task.dns points at the endpoint of a service named task.service.name (with image task.service.image), whose database is named task.database, sits on the network named task.network and is migrated to at least task.migration",
				Task: []world.Field{
					{Name: "dns", Type: "string", Required: true, Doc: "the host whose DNS record must point at the service"},
					{Name: "service.name", Type: "string", Required: true, Doc: "the service's name"},
					{Name: "service.image", Type: "string", Doc: "the service's image (any when empty)"},
					{Name: "database", Type: "string", Doc: "the database's name (any when empty)"},
					{Name: "network", Type: "string", Doc: "the network's name (any when empty)"},
					{Name: "migration", Type: "integer", Doc: "the least schema version (0 when absent)"},
				},
				Example: json.RawMessage(`{"network":"prod-net","database":"prod-db","migration":3,"service":{"name":"api","image":"registry.local/api:1.4.2"},"dns":"api.example.com"}`),
			},
			{
				Name:   GoalMaintenance,
				Judged: "a database named task.database exists on the network named task.network, with a snapshot named task.snapshot_prefix + d for every day d in 1..task.days",
				Task: []world.Field{
					{Name: "database", Type: "string", Required: true, Doc: "the database's name"},
					{Name: "snapshot_prefix", Type: "string", Required: true, Doc: "snapshot d is named snapshot_prefix followed by d"},
					{Name: "days", Type: "integer", Required: true, Doc: fmt.Sprintf("how many daily snapshots, 1..%d", retentionDaysMax)},
					{Name: "network", Type: "string", Doc: "the network's name (any when empty)"},
				},
				Example: json.RawMessage(`{"network":"ops-net","database":"ops-db","days":7,"snapshot_prefix":"daily-"}`),
			},
		},
		Examples:  examples,
		CheckTask: checkTask,
	}
}

// examples are requests that succeed in order on a fresh cloud (v1): one
// of each kind v1 offers, each naming what the ones before it made.
var examples = []world.Call{
	{Kind: KindCreateNetwork, Args: args(`{"name":"prod-net"}`)},
	{Kind: KindCreateDatabase, Args: args(`{"name":"prod-db","network_id":"net-1"}`)},
	{Kind: KindRunMigration, Args: args(`{"database_id":"db-1","version":3}`)},
	{Kind: KindDeployService, Args: args(`{"name":"api","image":"registry.local/api:1.4.2","database_id":"db-1"}`)},
	{Kind: KindSetDNS, Args: args(`{"host":"api.example.com","target":"svc-1.cloud.internal"}`)},
	{Kind: KindCreateSnapshot, Args: args(`{"database_id":"db-1","name":"daily-1"}`)},
	{Kind: KindList, Args: args(`{"kind":"network"}`)},
}

// checkTask checks a task against the goal the options select: every
// required field present, every field of the type the goal reads.
func checkTask(options map[string]any, task json.RawMessage) []world.Problem {
	goal, err := parseOptions(options)
	if err != nil {
		return nil // the options are refused when the world opens, with their own message
	}
	var g world.Goal
	for _, x := range Definition().Goals {
		if x.Name == goal {
			g = x
		}
	}
	var v map[string]any
	if err := json.Unmarshal(task, &v); err != nil || v == nil {
		return []world.Problem{{Message: fmt.Sprintf("the %s goal needs a task object like %s", goal, g.Example)}}
	}
	var problems []world.Problem
	for _, f := range g.Task {
		val, found := lookup(v, f.Name)
		ptr := "/" + strings.ReplaceAll(f.Name, ".", "/")
		switch {
		case !found && f.Required:
			problems = append(problems, world.Problem{Pointer: ptr, Message: fmt.Sprintf("missing: the cloud world's %s goal needs %s (%s: %s); the task's shape is %s",
				goal, f.Name, f.Type, f.Doc, g.Example)})
		case found && !f.Holds(val):
			problems = append(problems, world.Problem{Pointer: ptr, Message: fmt.Sprintf("want a %s (%s), got %s", f.Type, f.Doc, describe(val))})
		case found && f.Required && f.Type == "string" && val == "":
			problems = append(problems, world.Problem{Pointer: ptr, Message: fmt.Sprintf("must not be empty (%s)", f.Doc)})
		}
	}
	if goal == GoalMaintenance {
		if d, ok := v["days"].(float64); ok && (d < 1 || d > retentionDaysMax) {
			problems = append(problems, world.Problem{Pointer: "/days", Message: fmt.Sprintf("want 1..%d, got %v", retentionDaysMax, d)})
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return problems
}

// lookup finds a dotted field in a decoded object.
func lookup(v map[string]any, dotted string) (any, bool) {
	parts := strings.Split(dotted, ".")
	var cur any = v
	for _, p := range parts {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", x)
	case float64:
		return fmt.Sprintf("the number %v", x)
	case bool:
		return fmt.Sprintf("%v", x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
