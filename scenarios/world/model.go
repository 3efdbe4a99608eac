package world

import (
	"context"
	"encoding/json"
	"time"
)

// Model is a world as its author writes it, the required part of the
// plug-in: its name, its effect kinds, and what a request does to its
// state. Everything else — a goal, duplicates, API versions, a snapshot —
// is an optional capability found by type assertion (GoalJudge,
// DuplicateFinder, VersionedModel, Snapshotter), as a chaos fault's are.
//
// The harness wraps every model in the durable ledger (Ledgered): the
// record of every request, the seq, the lookup by idempotency key for
// reconciling an effect in doubt after a crash — written in the same
// commit as the model's own state change, so that a crash can never leave
// an executed request without its record (which would run it twice) nor a
// record without its change. A model writes nothing itself: Apply returns
// the change, and the ledger commits it.
//
// What a model sees of a request: its kind and arguments (as the agent
// sent them, canonical JSON), the run's virtual time, and its identity,
// Request.Key — the harness's name for the effect ("k/<the agent's key>",
// or "u/<n>" for an effect sent without one), stable across the run's
// attempts, replays and resumes. A model tags what it creates with it; it
// must not know about runs, attempts, tokens or the gateway.
type Model interface {
	// Name is the world's registry name, e.g. "cloud".
	Name() string
	// Kinds lists the effect kinds offered now (an API version change may
	// change them).
	Kinds() []KindInfo
	// Apply works out what req does: the world's answer and the change to
	// its state that makes it so — without making the change visible (the
	// ledger calls Change.Commit once it is durable). A refusal is an
	// Outcome (Failed), not an error; an error means the model could not
	// work the request out at all (the effect is then unknown). The ledger
	// calls Apply one request at a time.
	Apply(ctx context.Context, req Request) (Outcome, Change, error)
}

// Change is what one request, or one world event, does to a model's state.
type Change struct {
	// Writes are the model's own state entries, keys relative to its key
	// space (what its ModelFactory reads back when the world is opened
	// again). They are committed with the request's ledger entry, at once.
	Writes []Entry
	// Resource is the id of the resource the request created or changed
	// ("" : none), recorded in the ledger entry.
	Resource string
	// Commit makes the change visible in the model's memory, once it is
	// durable. Nil: nothing to do.
	Commit func()
}

// ModelFactory opens a model on its key space: state reads back what its
// earlier Changes wrote (nothing, for a new world). Options come from the
// scenario's world options.
type ModelFactory func(ctx context.Context, state Reader, options map[string]any) (Model, error)

// Reader is the read side of a Store.
type Reader interface {
	// Get returns the value under key, or an error wrapping ErrNotFound.
	Get(key []byte) ([]byte, error)
	// Scan calls fn for every key under prefix, in key order.
	Scan(prefix []byte, fn func(key, value []byte) error) error
}

// GoalJudge is a model that judges a task's goal from its own state (the
// goal-reached invariant).
type GoalJudge interface {
	CheckGoal(ctx context.Context, task json.RawMessage) (Check, error)
}

// DuplicateFinder is a model that says which logical resources its ledger
// shows created more than once (the no-duplicate-effects invariant). It is
// given the ledger the world keeps for it.
type DuplicateFinder interface {
	Duplicates(ctx context.Context, ledger []LedgerEntry) ([]Duplicate, error)
}

// Snapshotter is a model that gives its whole state as JSON, for a person
// and for fingerprinting the state a verification was made against.
type Snapshotter interface {
	Snapshot(ctx context.Context) (json.RawMessage, error)
}

// VersionedModel is a model whose API can change version mid-run (the
// api-version fault). The ledger records each switch as a world event.
type VersionedModel interface {
	// APIVersion is the version the model serves now, e.g. "v1".
	APIVersion() string
	// SwitchAPIVersion works out the switch to version: the previous
	// version and the change (nothing to write, and no event, when it is
	// the current one). An unknown version is an error wrapping
	// ErrUnknownAPIVersion that names the known ones.
	SwitchAPIVersion(ctx context.Context, version string, now time.Time) (previous string, ch Change, err error)
}
