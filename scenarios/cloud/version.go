package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// API versions the cloud world serves.
const (
	V1 = "v1" // the default
	V2 = "v2" // renamed field, removed endpoint, new required field, API keys
)

var apiVersions = []string{V1, V2}

func knownVersion(v string) bool { return slices.Contains(apiVersions, v) }

// Effect kinds offered by the cloud world. KindList exists in v1 only
// (v2 answers it 410 gone); KindListResources and KindIssueAPIKey exist in v2
// only.
const (
	KindCreateNetwork  = "cloud.create_network"
	KindCreateDatabase = "cloud.create_database"
	KindRunMigration   = "cloud.run_migration"
	KindDeployService  = "cloud.deploy_service"
	KindSetDNS         = "cloud.set_dns"
	KindCreateSnapshot = "cloud.create_snapshot"
	KindList           = "cloud.list"
	KindListResources  = "cloud.list_resources"
	KindIssueAPIKey    = "cloud.issue_api_key"
)

// Argument names that differ between versions, and the v2 key argument.
const (
	ArgDatabaseID    = "database_id"    // v1
	ArgDBID          = "db_id"          // v2's name for database_id
	ArgAPIKey        = "api_key"        // v2: required on mutating calls
	ArgRetentionDays = "retention_days" // v2: required by create_snapshot
)

// Error codes of the v2 changes, in error.code; the other refusals use
// unknown_kind, invalid_argument and not_found.
const (
	CodeGone         = "gone"          // 410: endpoint removed; details {"replacement"}
	CodeUnauthorized = "unauthorized"  // 401: api_key missing or unknown; details {"obtain", "field"}
	CodeFieldRenamed = "field_renamed" // 400: details {"renamed": {old: new}}
	CodeMissingField = "missing_field" // 400: details {"required": [...], "example": {...}}
)

const (
	codeInvalid     = "invalid_argument"
	codeUnknownKind = "unknown_kind"
	codeNotFound    = "not_found"

	statusBadRequest   = 400
	statusUnauthorized = 401
	statusNotFound     = 404
	statusGone         = 410

	retentionDaysMax = 3650
	// schemaVersionMax bounds run_migration's version: every version up
	// to it is applied, and listed, one by one.
	schemaVersionMax = 10000
	retentionExample = 7
)

var kindsV1 = []world.KindInfo{
	{Name: KindCreateNetwork, Identity: "args.name", Args: "{name}", Result: "{id, name}", Doc: "creates a network; not idempotent"},
	{Name: KindCreateDatabase, Identity: "args.name", Args: "{name, network_id}", Result: "{id, name, network_id}", Doc: "creates a database on a network; not idempotent"},
	{Name: KindRunMigration, Idempotent: true, Args: "{database_id, version}", Result: "{database_id, version, applied}", Doc: fmt.Sprintf("brings the schema up to version (1..%d)", schemaVersionMax)},
	{Name: KindDeployService, Identity: "args.name", Args: "{name, image, database_id}", Result: "{id, name, endpoint}", Doc: "deploys a service using a database; not idempotent"},
	{Name: KindSetDNS, Idempotent: true, Args: "{host, target}", Result: "{host, target}", Doc: "points host at target (a service's endpoint); upsert"},
	{Name: KindCreateSnapshot, Identity: "args.database_id + '/' + args.name", Args: "{database_id, name}", Result: "{id, name, database_id}", Doc: "snapshots a database; not idempotent"},
	{Name: KindList, Idempotent: true, ReadOnly: true, Args: "{kind: network|database|service|dns|snapshot}", Result: "{items}", Doc: "lists resources"},
}

var kindsV2 = []world.KindInfo{
	{Name: KindCreateNetwork, Identity: "args.name", Args: "{name, api_key}", Result: "{id, name}", Doc: "creates a network; not idempotent"},
	{Name: KindCreateDatabase, Identity: "args.name", Args: "{name, network_id, api_key}", Result: "{id, name, network_id}", Doc: "creates a database on a network; not idempotent"},
	{Name: KindRunMigration, Idempotent: true, Args: "{db_id, version, api_key}", Result: "{db_id, version, applied}", Doc: fmt.Sprintf("brings the schema up to version (1..%d)", schemaVersionMax)},
	{Name: KindDeployService, Identity: "args.name", Args: "{name, image, db_id, api_key}", Result: "{id, name, endpoint}", Doc: "deploys a service using a database; not idempotent"},
	{Name: KindSetDNS, Idempotent: true, Args: "{host, target, api_key}", Result: "{host, target}", Doc: "points host at target (a service's endpoint); upsert"},
	{Name: KindCreateSnapshot, Identity: "args.db_id + '/' + args.name", Args: "{db_id, name, retention_days: 1..3650, api_key}", Result: "{id, name, db_id}", Doc: "snapshots a database; not idempotent"},
	{Name: KindListResources, Idempotent: true, ReadOnly: true, Args: "{kind: network|database|service|dns|snapshot}", Result: "{items}", Doc: "lists resources; replaces cloud.list; no api_key needed"},
	{Name: KindIssueAPIKey, Args: "{}", Result: "{api_key}", Doc: "issues a new key each call (old keys stay valid); no api_key needed"},
}

func kindsOf(version string) []world.KindInfo {
	if version == V2 {
		return kindsV2
	}
	return kindsV1
}

func offered(version, kind string) bool {
	return slices.ContainsFunc(kindsOf(version), func(k world.KindInfo) bool { return k.Name == kind })
}

// takesDatabase lists the kinds whose database_id argument is db_id in v2.
var takesDatabase = []string{KindCreateSnapshot, KindRunMigration, KindDeployService}

// needsKey reports whether a v2 call must carry an api_key: every call
// with a side effect except the one that issues keys.
func needsKey(kind string) bool {
	if kind == KindIssueAPIKey {
		return false
	}
	i := slices.IndexFunc(kindsV2, func(k world.KindInfo) bool { return k.Name == kind })
	return i >= 0 && !kindsV2[i].ReadOnly
}

// unknownKind refuses a kind the current version does not offer.
func unknownKind(version, kind string) world.Outcome {
	names := make([]string, 0, len(kindsOf(version)))
	for _, k := range kindsOf(version) {
		names = append(names, k.Name)
	}
	in := ""
	if version != V1 {
		in = " in API " + version
	}
	return world.Failed(statusBadRequest, codeUnknownKind, "the cloud world has no effect %q%s (it offers %s)",
		kind, in, strings.Join(names, ", "))
}

// gateV2 applies the v2 checks that come before a kind's own argument
// decoding, in the documented order: gone, auth, renamed, missing. It
// returns the arguments without api_key (which the kinds' own decoding does
// not know), or the refusal.
func (w *World) gateV2(kind string, raw json.RawMessage) (json.RawMessage, *world.Outcome) {
	refuse := func(o world.Outcome) (json.RawMessage, *world.Outcome) { return nil, &o }
	if kind == KindList {
		return refuse(world.FailedWith(statusGone, CodeGone, map[string]any{"replacement": KindListResources},
			"%s was removed in API v2; send %s with the same arguments instead", KindList, KindListResources))
	}
	if !offered(V2, kind) {
		return refuse(unknownKind(V2, kind))
	}
	args := map[string]json.RawMessage{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil {
			return refuse(world.Failed(statusBadRequest, codeInvalid, "arguments: want a JSON object: %v", err))
		}
	}
	if needsKey(kind) {
		if msg := w.checkKey(args[ArgAPIKey]); msg != "" {
			return refuse(world.FailedWith(statusUnauthorized, CodeUnauthorized,
				map[string]any{"obtain": KindIssueAPIKey, "field": ArgAPIKey},
				"%s in API v2: %s; obtain a key with %s {} and pass it as the %s argument", kind, msg, KindIssueAPIKey, ArgAPIKey))
		}
	}
	if _, old := args[ArgDatabaseID]; old && slices.Contains(takesDatabase, kind) {
		return refuse(world.FailedWith(statusBadRequest, CodeFieldRenamed,
			map[string]any{"renamed": map[string]string{ArgDatabaseID: ArgDBID}},
			"%s: argument %s was renamed to %s in API v2; send the same value as %s", kind, ArgDatabaseID, ArgDBID, ArgDBID))
	}
	if kind == KindCreateSnapshot {
		if v, ok := args[ArgRetentionDays]; !ok || string(v) == "null" {
			return refuse(world.FailedWith(statusBadRequest, CodeMissingField,
				map[string]any{"required": []string{ArgRetentionDays}, "example": map[string]int{ArgRetentionDays: retentionExample}},
				"%s: %s is required in API v2 (an integer 1..%d, e.g. %d)", kind, ArgRetentionDays, retentionDaysMax, retentionExample))
		}
	}
	delete(args, ArgAPIKey) // optional and unchecked on calls that need no key
	b, err := json.Marshal(args)
	if err != nil {
		return refuse(world.Failed(statusBadRequest, codeInvalid, "arguments: %v", err))
	}
	return b, nil
}

// checkKey says what is wrong with an api_key argument, or "" when it is a
// key this cloud issued.
func (w *World) checkKey(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "api_key is required"
	}
	var key string
	if err := json.Unmarshal(raw, &key); err != nil {
		return fmt.Sprintf("api_key %s is not a string", raw)
	}
	if r := w.resources[key]; r == nil || r.Kind != ResAPIKey {
		return fmt.Sprintf("api_key %q was not issued by this cloud", key)
	}
	return ""
}

// dbField is the name of the database id, in arguments and results, in the
// current version.
func (w *World) dbField() string {
	if w.meta.Version == V2 {
		return ArgDBID
	}
	return ArgDatabaseID
}

// present returns a resource as the current version shows it: in v2 a
// database_id field reads db_id. Stored resources always use database_id.
func (w *World) present(r *Resource) *Resource {
	if w.meta.Version != V2 {
		return r
	}
	if _, ok := r.Fields[ArgDatabaseID]; !ok {
		return r
	}
	out := *r
	out.Fields = make(map[string]string, len(r.Fields))
	for k, v := range r.Fields {
		if k == ArgDatabaseID {
			k = ArgDBID
		}
		out.Fields[k] = v
	}
	return &out
}

// APIVersion implements world.VersionedModel.
func (w *World) APIVersion() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.meta.Version
}

// SwitchAPIVersion implements world.VersionedModel: the change writes the
// new version; the ledger records the switch as a world event (kind
// world.EventAPIVersion, key ""), which no effect count includes.
func (w *World) SwitchAPIVersion(ctx context.Context, version string, now time.Time) (string, world.Change, error) {
	if !knownVersion(version) {
		return "", world.Change{}, fmt.Errorf("cloud world: set API version %q: %w (known: %s)", version, world.ErrUnknownAPIVersion, strings.Join(apiVersions, ", "))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	previous := w.meta.Version
	if previous == version {
		return previous, world.Change{}, nil
	}
	next := w.nextMeta()
	next.Version = version
	ch, err := w.stateChange(next, nil)
	return previous, ch, err
}
