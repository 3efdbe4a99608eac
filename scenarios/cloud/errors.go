package cloud

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// The refusals each API version answers with, as `overnight worlds` shows
// them. Their examples are answered by the world itself
// (world.Definition.Describe), which also checks every answer against the
// code, status and details described here.

// exampleKey is the api_key a fresh v2 world issues first: the setup issueKey
// makes it, and Describe fails if the world issues another.
const exampleKey = "key-1"

var issueKey = []world.Call{{Kind: KindIssueAPIKey, Args: args(`{}`)}}

func args(s string) json.RawMessage { return json.RawMessage(s) }

// takesResource lists the kinds whose arguments name another resource,
// which must exist.
var takesResource = []string{KindCreateDatabase, KindRunMigration, KindDeployService, KindCreateSnapshot}

// v2Kinds returns the kinds of v2 that keep, in the order v2 lists them.
func v2Kinds(keep func(kind string) bool) []string {
	var out []string
	for _, k := range kindsV2 {
		if keep(k.Name) {
			out = append(out, k.Name)
		}
	}
	return out
}

func errorsV1() []world.ErrorInfo {
	return []world.ErrorInfo{
		{
			Code: codeUnknownKind, Status: statusBadRequest,
			When:    "the kind is not one this version offers (cloud.list_resources and cloud.issue_api_key exist in v2 only); the message lists those it offers",
			Example: world.ErrorExample{Request: world.Call{Kind: KindListResources, Args: args(`{"kind":"network"}`)}},
		},
		{
			Code: codeInvalid, Status: statusBadRequest,
			When:    "the arguments are not a JSON object of the kind's arguments, or a value is out of its range (a name, a host, a version); the message names the argument. Correct it and send again under a new key",
			Example: world.ErrorExample{Request: world.Call{Kind: KindCreateNetwork, Args: args(`{"name":"Prod Net"}`)}},
		},
		{
			Code: codeNotFound, Status: statusNotFound, Kinds: takesResource, Fields: []string{"network_id", ArgDatabaseID},
			When:    "the network or database an argument names does not exist",
			Example: world.ErrorExample{Request: world.Call{Kind: KindCreateDatabase, Args: args(`{"name":"prod-db","network_id":"net-9"}`)}},
		},
	}
}

func errorsV2() []world.ErrorInfo {
	return []world.ErrorInfo{
		{
			Code: CodeGone, Status: statusGone, Kinds: []string{KindList},
			When: "the endpoint was removed in v2: send the kind in details.replacement, with the same arguments",
			Details: []world.Field{
				{Name: "replacement", Type: "string", Required: true, Doc: "the effect kind to send instead"},
			},
			Example: world.ErrorExample{Request: world.Call{Kind: KindList, Args: args(`{"kind":"network"}`)}},
		},
		{
			Code: codeUnknownKind, Status: statusBadRequest,
			When:    "the kind is not one v2 offers; the message lists those it offers",
			Example: world.ErrorExample{Request: world.Call{Kind: "cloud.delete_network", Args: args(`{"name":"prod-net"}`)}},
		},
		{
			Code: CodeUnauthorized, Status: statusUnauthorized, Kinds: v2Kinds(needsKey), Fields: []string{ArgAPIKey},
			When: "a mutating call carries no api_key, or one this cloud did not issue: send details.obtain {} once, and pass the api_key it returns as the argument details.field of every mutating call (keys stay valid)",
			Details: []world.Field{
				{Name: "obtain", Type: "string", Required: true, Doc: "the effect kind that issues a key (" + KindIssueAPIKey + "; it takes {} and needs no key)"},
				{Name: "field", Type: "string", Required: true, Doc: "the argument to pass the key in"},
			},
			Example: world.ErrorExample{Request: world.Call{Kind: KindCreateNetwork, Args: args(`{"name":"prod-net"}`)}},
		},
		{
			Code: CodeFieldRenamed, Status: statusBadRequest, Kinds: v2Kinds(func(k string) bool { return slices.Contains(takesDatabase, k) }), Fields: []string{ArgDatabaseID},
			When: fmt.Sprintf("an argument was renamed in v2 (%s is %s, in results too): send the same value under the new name", ArgDatabaseID, ArgDBID),
			Details: []world.Field{
				{Name: "renamed", Type: "object", Required: true, Doc: "each old argument name, with its new name as the value"},
			},
			Example: world.ErrorExample{Setup: issueKey,
				Request: world.Call{Kind: KindRunMigration, Args: args(`{"database_id":"db-1","version":3,"api_key":"` + exampleKey + `"}`)}},
		},
		{
			Code: CodeMissingField, Status: statusBadRequest, Kinds: []string{KindCreateSnapshot}, Fields: []string{ArgRetentionDays},
			When: fmt.Sprintf("an argument v2 requires is missing (%s, an integer 1..%d): add each field of details.required, e.g. with its value in details.example", ArgRetentionDays, retentionDaysMax),
			Details: []world.Field{
				{Name: "required", Type: "array", Required: true, Doc: "the names of the missing arguments"},
				{Name: "example", Type: "object", Required: true, Doc: "each missing argument with a value it may take"},
			},
			Example: world.ErrorExample{Setup: issueKey,
				Request: world.Call{Kind: KindCreateSnapshot, Args: args(`{"db_id":"db-1","name":"daily-1","api_key":"` + exampleKey + `"}`)}},
		},
		{
			Code: codeInvalid, Status: statusBadRequest,
			When:    "the arguments are not a JSON object of the kind's arguments (checked before unauthorized), or a value is out of its range; the message names the argument",
			Example: world.ErrorExample{Request: world.Call{Kind: KindListResources, Args: args(`{"kind":"volume"}`)}},
		},
		{
			Code: codeNotFound, Status: statusNotFound, Kinds: takesResource, Fields: []string{"network_id", ArgDBID},
			When: "the network or database an argument names does not exist",
			Example: world.ErrorExample{Setup: issueKey,
				Request: world.Call{Kind: KindCreateDatabase, Args: args(`{"name":"prod-db","network_id":"net-9","api_key":"` + exampleKey + `"}`)}},
		},
	}
}
