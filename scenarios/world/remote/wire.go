// Package remote carries the world plug-in over HTTP+JSON: a world in any
// language, in its own process or container, served to the harness. The
// protocol is documented in docs/world-protocol.md; this file is its
// normative shape.
//
// Every call is an HTTP POST of a JSON object to <base URL>/v1/<call>
// (describe also answers GET). A success is 200 with the call's answer.
// A refusal of the call itself (not of an effect: an effect's refusal is a
// failed Outcome inside a 200) is a non-2xx status with an ErrorBody.
//
// Every call but describe names an Instance: "" is the world itself (the
// real one, which nothing ever resets); any other name is an isolated
// instance made by create_instance, for a shadow. A call on an instance
// that does not exist is refused with 404 and code unknown_instance.
package remote

import (
	"encoding/json"
	"time"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// Protocol is the protocol name and version a world's describe answers.
const Protocol = "overnight-world/1"

// Call paths, relative to the world's base URL.
const (
	PathDescribe       = "/v1/describe"
	PathApply          = "/v1/apply"
	PathLookup         = "/v1/lookup"
	PathLedger         = "/v1/ledger"
	PathState          = "/v1/state"
	PathGoal           = "/v1/goal"
	PathDuplicates     = "/v1/duplicates"
	PathSetVersion     = "/v1/set_version"
	PathEvent          = "/v1/event"
	PathCreateInstance = "/v1/create_instance"
	PathDropInstance   = "/v1/drop_instance"
)

// Error codes of a refused call (ErrorBody.Error.Code).
const (
	CodeBadRequest       = "bad_request"        // 400: the body is not the call's shape
	CodeUnknownInstance  = "unknown_instance"   // 404
	CodeInstanceExists   = "instance_exists"    // 409: create_instance of a name in use
	CodeUnsupported      = "unsupported"        // 501: a capability the world does not declare
	CodeUnknownVersion   = "unknown_version"    // 400: set_version to a version not declared
	CodeUnknownEvent     = "unknown_event"      // 400: event of a kind the world does not declare
	CodeReplayDiffers    = "replay_differs"     // 409: a restored ledger answered otherwise than recorded
	CodeInternal         = "internal"           // 500
	CodeNotFound         = "not_found"          // 404: no such call (the message lists the calls)
	CodeMethodNotAllowed = "method_not_allowed" // 405: a call is a POST (describe also a GET)
)

// ErrorBody is the body of a refused call.
type ErrorBody struct {
	Error CallError `json:"error"`
}

// CallError says what was wrong with a call.
type CallError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Description is describe's answer: what the world is and can do.
type Description struct {
	// Protocol is the value of the constant Protocol.
	Protocol string `json:"protocol"`
	// Name is the world's name, e.g. "inventory".
	Name    string `json:"name"`
	Summary string `json:"summary,omitempty"`
	// Versions are the API versions the world serves, the first the one a
	// new instance starts in, each with its kinds. A world with one
	// version gives one. set_version moves between them.
	Versions []Version `json:"versions"`
	// Capabilities the world offers beyond apply, lookup, ledger and
	// state (which every world answers).
	Capabilities Capabilities `json:"capabilities"`
	// APIVersion is the version the world itself (instance "") serves
	// now; empty means the first of Versions. Added after the first
	// draft: a client dialling a world that has moved to another version
	// knows it without a state call.
	APIVersion string `json:"api_version,omitempty"`
	// Options are the world options this world was started with (the
	// values, for a person and for the harness's checks: "goal" selects a
	// goal on worlds with several).
	Options map[string]any `json:"options,omitempty"`
	// Examples are requests that succeed, in this order, on a fresh
	// instance (in the first version): what the conformance kit
	// (`overnight world check`, package scenarios/world/worldtest) applies
	// to check the world's promises — repeated keys, lookup, restoring an
	// instance, surviving a crash. Optional: without them the kit skips the
	// rules that need a request to apply, saying so. One of each kind the
	// world offers is best; an example may name what an earlier one made
	// (e.g. the id "net-1" the first example's network gets).
	Examples []world.Call `json:"examples,omitempty"`
	// Events are the world events besides API version changes the world
	// undergoes (capability events): each fired by event, recorded in the
	// instance's ledger like set_version's.
	Events []world.EventInfo `json:"events,omitempty"`
}

// Version is one API version and the effect kinds it offers.
type Version struct {
	Name  string           `json:"name"`
	Kinds []world.KindInfo `json:"kinds"`
}

// Capabilities are the optional calls a world answers.
type Capabilities struct {
	Goal       bool `json:"goal"`       // goal: judges a task from its state
	Duplicates bool `json:"duplicates"` // duplicates: names resources created twice
	Versions   bool `json:"versions"`   // set_version
	Instances  bool `json:"instances"`  // create_instance, drop_instance
	Events     bool `json:"events"`     // event (added after the first draft)
}

// ApplyRequest is apply's body: one effect request.
type ApplyRequest struct {
	Instance string          `json:"instance"`
	Key      string          `json:"key"`
	Kind     string          `json:"kind"`
	Args     json.RawMessage `json:"args"`
	Now      time.Time       `json:"now"`
}

// ApplyResponse is apply's answer: the world's outcome of the request,
// durable (recorded in its ledger under the key) before it answers.
type ApplyResponse struct {
	Outcome world.Outcome `json:"outcome"`
	Seq     int64         `json:"seq"`
}

// InstanceRequest is the body of calls that name only an instance
// (ledger, state, duplicates, drop_instance).
type InstanceRequest struct {
	Instance string `json:"instance"`
}

// LookupRequest is lookup's body.
type LookupRequest struct {
	Instance string `json:"instance"`
	Key      string `json:"key"`
}

// LookupResponse is lookup's answer: the outcome of the last request
// received with the key, if any.
type LookupResponse struct {
	Found   bool           `json:"found"`
	Outcome *world.Outcome `json:"outcome,omitempty"`
}

// LedgerResponse is ledger's answer: every request (and world event) the
// instance received, in order.
type LedgerResponse struct {
	Entries []world.LedgerEntry `json:"entries"`
}

// StateResponse is state's answer.
type StateResponse struct {
	// State is the instance's whole state as JSON, for a person, for
	// fingerprinting, and for the goal's probe.
	State json.RawMessage `json:"state"`
	// APIVersion is the version the instance serves now.
	APIVersion string `json:"api_version"`
}

// GoalRequest is goal's body.
type GoalRequest struct {
	Instance string          `json:"instance"`
	Task     json.RawMessage `json:"task"`
}

// GoalResponse is goal's answer.
type GoalResponse = world.Check

// DuplicatesResponse is duplicates' answer.
type DuplicatesResponse struct {
	Duplicates []world.Duplicate `json:"duplicates"`
}

// SetVersionRequest is set_version's body. The switch is a world event
// in the instance's ledger (kind world.EventAPIVersion, key ""); to the
// current version it changes and records nothing.
type SetVersionRequest struct {
	Instance string    `json:"instance"`
	Version  string    `json:"version"`
	Now      time.Time `json:"now"`
}

// SetVersionResponse is set_version's answer.
type SetVersionResponse struct {
	Previous string `json:"previous"`
	Version  string `json:"version"`
}

// EventRequest is event's body: a world event the instance undergoes (a
// dependency update, say), one of the description's events. It is
// recorded in the instance's ledger as a world event (key "", its kind)
// with the change it makes.
type EventRequest struct {
	Instance string          `json:"instance"`
	Kind     string          `json:"kind"`
	Args     json.RawMessage `json:"args"`
	Now      time.Time       `json:"now"`
}

// EventResponse is event's answer: the event's outcome, durable in the
// instance's ledger before it answers.
type EventResponse struct {
	Outcome world.Outcome `json:"outcome"`
}

// CreateInstanceRequest is create_instance's body: a new isolated
// instance, empty, or — with Ledger — restored by applying the ledger's
// requests and events in order, each answered as recorded (else 409
// replay_differs, and no instance is left).
type CreateInstanceRequest struct {
	Instance string              `json:"instance"`
	Ledger   []world.LedgerEntry `json:"ledger,omitempty"`
}

// CreateInstanceResponse is create_instance's answer: the instance made,
// the version it serves after its ledger was restored, and the seq of its
// last ledger entry (0: empty).
type CreateInstanceResponse struct {
	Instance   string `json:"instance"`
	APIVersion string `json:"api_version"`
	Seq        int64  `json:"seq"`
}

// DropInstanceResponse is drop_instance's answer.
type DropInstanceResponse struct {
	Instance string `json:"instance"`
}
