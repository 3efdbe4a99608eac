package world

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Event is a world event: something that happens to a world rather than
// an effect an agent requested — a logging library's new release, say. Its
// Kind begins with "world." and is the ledger Kind it is recorded under
// (with an empty Key); an API version change (EventAPIVersion) is the
// one a Versioned world takes through SetAPIVersion instead.
type Event struct {
	Kind string
	Args json.RawMessage
	// Now is the run's virtual time when it happens.
	Now time.Time
}

// EventInfo describes a world event a world can undergo.
type EventInfo struct {
	// Name is the event's ledger Kind, e.g. "world.dep_update".
	Name string `json:"name"`
	// Fault is the chaos fault kind that fires it, e.g. "dep-update".
	Fault  string `json:"fault,omitempty"`
	Args   string `json:"args"`   // its arguments, e.g. "{library?}"
	Result string `json:"result"` // what it answers, e.g. "{library, previous, version}"
	Doc    string `json:"doc"`    // what it does to the world, for a person
}

// ErrUnknownEvent is wrapped by FireEvent's error for an event the world
// does not declare.
var ErrUnknownEvent = errors.New("unknown world event")

// EventModel is a model that world events besides API version changes
// happen to (the dep-update fault, say): it declares them and works each
// out as Apply works out a request. The ledger records each as a world
// event (key "", the event's Kind) with the change it makes, in one commit.
type EventModel interface {
	// Events lists the world events the model undergoes.
	Events() []EventInfo
	// ApplyEvent works out what ev does: its outcome (a failed outcome
	// is recorded like any) and the change. An error means it cannot
	// happen at all (an unknown event, arguments that name nothing, nothing
	// left to happen): nothing is recorded.
	ApplyEvent(ctx context.Context, ev Event) (Outcome, Change, error)
}

// Eventful is a world that world events can be fired at: a Ledgered
// around an EventModel, and a Router whose unprefixed world is one.
// Callers find it by type assertion and by its Events.
type Eventful interface {
	// Events lists the world events it undergoes (none: it takes none).
	Events() []EventInfo
	// FireEvent makes ev happen, durably, recorded in the world's ledger
	// as a world event; an event it does not declare is an error wrapping
	// ErrUnknownEvent.
	FireEvent(ctx context.Context, ev Event) (Outcome, error)
}

// EventsOf lists the world events w undergoes (nil: none).
func EventsOf(w World) []EventInfo {
	if e, ok := w.(Eventful); ok {
		return e.Events()
	}
	return nil
}

// HasEvent reports whether events declare the one called kind.
func HasEvent(events []EventInfo, kind string) bool {
	return slices.ContainsFunc(events, func(e EventInfo) bool { return e.Name == kind })
}

var _ Eventful = (*Ledgered)(nil)

// Events implements Eventful: the model's, if it is an EventModel.
func (l *Ledgered) Events() []EventInfo {
	if m, ok := l.model.(EventModel); ok {
		return m.Events()
	}
	return nil
}

// FireEvent implements Eventful: the model works ev out, and its change
// and the world event's ledger entry are one durable commit.
func (l *Ledgered) FireEvent(ctx context.Context, ev Event) (Outcome, error) {
	m, ok := l.model.(EventModel)
	if !ok || !HasEvent(m.Events(), ev.Kind) {
		return Outcome{}, fmt.Errorf("world %s: %w %q (it undergoes %s)", l.model.Name(), ErrUnknownEvent, ev.Kind, eventNames(l.Events()))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out, ch, err := m.ApplyEvent(ctx, ev)
	if err != nil {
		return Outcome{}, fmt.Errorf("world %s: event %s: %w", l.model.Name(), ev.Kind, err)
	}
	entry := LedgerEntry{Kind: ev.Kind, Args: compactJSON(ev.Args), Outcome: out, At: ev.Now.UTC(), Resource: ch.Resource}
	if err := l.record(ctx, entry, ch); err != nil {
		return Outcome{}, fmt.Errorf("world %s: record event %s: %w", l.model.Name(), ev.Kind, err)
	}
	return out, nil
}

func eventNames(events []EventInfo) string {
	if len(events) == 0 {
		return "none"
	}
	names := make([]string, len(events))
	for i, e := range events {
		names[i] = e.Name
	}
	return fmt.Sprint(names)
}
