package fleet

import (
	"encoding/json"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// Definition describes the fleet world: its one API version with its
// effect kinds and errors, and its examples.
func Definition() world.Definition {
	return world.Definition{
		Name:    Name,
		Summary: "a microservice fleet's logging: per service a log configuration, its volume, cost and error visibility, and candidates tried on staging before production",
		Open:    Open,
		Versions: []world.Version{
			{Name: "v1", Summary: "the fleet's one API", Kinds: kinds, Errors: errorsV1()},
		},
		Events: events,
		Goals: []world.Goal{{
			Name: "", Default: true,
			Judged: "the fleet's log cost per day is down by at least task.goal.cost_cut from its cost when the world was made, every service's error visibility is at least task.goal.visibility_floor, " +
				"and every tried candidate was applied or rolled back (none left half-applied)",
			Task:    goalFields,
			Example: json.RawMessage(goalExample),
		}},
		Examples:  examples,
		CheckTask: checkTask,
	}
}

func args(s string) json.RawMessage { return json.RawMessage(s) }

// examples succeed in order on a fresh fleet: one of each kind.
var examples = []world.Call{
	{Kind: KindDescribe, Args: args(`{}`)},
	{Kind: KindMeasure, Args: args(`{"service":"api"}`)},
	{Kind: KindProposeCandidate, Args: args(`{"id":"api-warn","service":"api","change":{"level":"warn"}}`)},
	{Kind: KindTryCandidate, Args: args(`{"id":"api-warn"}`)},
	{Kind: KindApplyCandidate, Args: args(`{"id":"api-warn"}`)},
	{Kind: KindRollbackCandidate, Args: args(`{"id":"api-warn"}`)},
}

func errorsV1() []world.ErrorInfo {
	propose := func(id, svc, change string) world.Call {
		return world.Call{Kind: KindProposeCandidate, Args: args(`{"id":"` + id + `","service":"` + svc + `","change":` + change + `}`)}
	}
	call := func(kind, id string) world.Call { return world.Call{Kind: kind, Args: args(`{"id":"` + id + `"}`)} }
	candidateKinds := []string{KindMeasure, KindTryCandidate, KindApplyCandidate, KindRollbackCandidate}
	return []world.ErrorInfo{
		{Code: CodeUnknownKind, Status: 400, When: "a kind the fleet world does not offer",
			Example: world.ErrorExample{Request: world.Call{Kind: "fleet.delete_service", Args: args(`{"name":"api"}`)}}},
		{Code: CodeInvalid, Status: 400, When: "arguments that are not the kind's, or a value out of range (a level, format, sampling in (0, 1], retention_days in 1..3650)",
			Example: world.ErrorExample{Request: propose("api-x", "api", `{"sampling":0}`)}},
		{Code: CodeNotFound, Status: 404, Kinds: append([]string{KindProposeCandidate}, candidateKinds...), When: "no service, or no candidate, of that name",
			Example: world.ErrorExample{Request: call(KindTryCandidate, "nope")}},
		{Code: CodeIDInUse, Status: 409, Kinds: []string{KindProposeCandidate}, Fields: []string{"id"}, When: "a candidate id proposed again with another service or change: propose it under a new id",
			Details: []world.Field{{Name: "id", Type: "string", Required: true, Doc: "the candidate"}, {Name: "service", Type: "string", Required: true, Doc: "its service"}, {Name: "change", Type: "object", Required: true, Doc: "its change"}},
			Example: world.ErrorExample{Setup: []world.Call{propose("api-warn", "api", `{"level":"warn"}`)}, Request: propose("api-warn", "api", `{"level":"error"}`)}},
		{Code: CodeNotTried, Status: 409, Kinds: []string{KindApplyCandidate}, When: "applying a candidate never tried: try it first",
			Example: world.ErrorExample{Setup: []world.Call{propose("api-warn", "api", `{"level":"warn"}`)}, Request: call(KindApplyCandidate, "api-warn")}},
		{Code: CodeTrialFailed, Status: 409, Kinds: []string{KindApplyCandidate}, When: "applying a candidate whose last trial failed: roll it back",
			Example: world.ErrorExample{Setup: []world.Call{propose("api-text", "api", `{"format":"text"}`), call(KindTryCandidate, "api-text")}, Request: call(KindApplyCandidate, "api-text")}},
		{Code: CodeStale, Status: 409, Kinds: []string{KindApplyCandidate, KindRollbackCandidate}, When: "the service's configuration changed since the candidate was proposed (applying) or applied (rolling back): roll it back and propose it again",
			Details: []world.Field{{Name: "changed", Type: "array", Required: true, Doc: "the fields that changed, as \"field old -> new\""}},
			Example: world.ErrorExample{Setup: []world.Call{propose("api-warn", "api", `{"level":"warn"}`), propose("api-30", "api", `{"retention_days":7}`),
				call(KindTryCandidate, "api-warn"), call(KindTryCandidate, "api-30"), call(KindApplyCandidate, "api-warn")}, Request: call(KindApplyCandidate, "api-30")}},
		{Code: CodeRolledBack, Status: 409, Kinds: []string{KindApplyCandidate}, When: "applying a candidate rolled back: propose it again under a new id",
			Example: world.ErrorExample{Setup: []world.Call{propose("api-warn", "api", `{"level":"warn"}`), call(KindRollbackCandidate, "api-warn")}, Request: call(KindApplyCandidate, "api-warn")}},
	}
}
