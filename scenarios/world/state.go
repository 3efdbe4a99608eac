package world

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// State is a world's state at a point of its ledger: the ledger up to that
// point — which rebuilds the world exactly, since a world answers the same
// requests in the same order the same way — and, for a person, the
// snapshot the rebuild gives.
type State struct {
	World    string          `json:"world"`
	Seq      int64           `json:"seq"` // the last ledger entry it includes (0: the empty world)
	Ledger   []LedgerEntry   `json:"ledger"`
	Snapshot json.RawMessage `json:"snapshot"`
}

// ErrNotReplayable is returned when a ledger does not rebuild the same
// world: replayed, a request is answered otherwise than it was recorded.
var ErrNotReplayable = errors.New("the world's ledger does not replay to the same state")

// StateAt returns the state of w right after its ledger entry seq (0: the
// empty world; past the end: the world as it is). It rebuilds the world
// from its ledger in memory, through the registry's definition of name
// opened with options, and checks the rebuild answered every request as
// recorded.
func (r *Registry) StateAt(ctx context.Context, name string, options map[string]any, w World, seq int64) (State, error) {
	ledger, err := w.Ledger(ctx)
	if err != nil {
		return State{}, err
	}
	var prefix []LedgerEntry
	for _, e := range ledger {
		if e.Seq <= seq {
			prefix = append(prefix, e)
		}
	}
	fresh, err := r.Open(ctx, name, NewMemStore(), []byte("state/"), options)
	if err != nil {
		return State{}, err
	}
	st := State{World: name, Ledger: prefix}
	if len(prefix) > 0 {
		st.Seq = prefix[len(prefix)-1].Seq
	}
	if err := Restore(ctx, fresh, st); err != nil {
		return State{}, err
	}
	if st.Snapshot, err = fresh.Snapshot(ctx); err != nil {
		return State{}, err
	}
	return st, nil
}

// Restore makes w — a world freshly opened on an empty key space of its
// own — hold st, by replaying st's ledger into it: every request again, in
// order and at its recorded time, and every world event (an API version
// change, for a Versioned world; any other, for an Eventful one, which
// must answer it as recorded). It fails with ErrNotReplayable when a
// request is answered otherwise than it was recorded.
func Restore(ctx context.Context, w World, st State) error {
	for _, e := range st.Ledger {
		if e.IsEvent() {
			if err := replayEvent(ctx, w, e); err != nil {
				return err
			}
			continue
		}
		out, err := w.Execute(ctx, Request{Key: e.Key, Kind: e.Kind, Args: e.Args, Now: e.At})
		if err != nil {
			return fmt.Errorf("restore %s: ledger entry %d (%s): %w", st.World, e.Seq, e.Kind, err)
		}
		got, _ := json.Marshal(out)
		want, _ := json.Marshal(e.Outcome)
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%w: entry %d (%s %s) was answered %s, and now %s", ErrNotReplayable, e.Seq, e.Kind, e.Args, want, got)
		}
	}
	return nil
}

func replayEvent(ctx context.Context, w World, e LedgerEntry) error {
	if e.Kind != EventAPIVersion {
		ew, ok := w.(Eventful)
		if !ok || !HasEvent(ew.Events(), e.Kind) {
			return fmt.Errorf("%w: world event %d is %s, which the world does not undergo", ErrNotReplayable, e.Seq, e.Kind)
		}
		out, err := ew.FireEvent(ctx, Event{Kind: e.Kind, Args: e.Args, Now: e.At})
		if err != nil {
			return fmt.Errorf("%w: world event %d (%s %s): %w", ErrNotReplayable, e.Seq, e.Kind, e.Args, err)
		}
		got, _ := json.Marshal(out)
		want, _ := json.Marshal(e.Outcome)
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%w: world event %d (%s %s) was answered %s, and now %s", ErrNotReplayable, e.Seq, e.Kind, e.Args, want, got)
		}
		return nil
	}
	v, ok := w.(Versioned)
	if !ok {
		return fmt.Errorf("%w: world event %d changes the API version of a world that has none", ErrNotReplayable, e.Seq)
	}
	var args struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(e.Args, &args); err != nil {
		return fmt.Errorf("restore: world event %d: %w", e.Seq, err)
	}
	_, err := v.SetAPIVersion(ctx, args.Version, e.At)
	return err
}

// Sequenced is a world that knows the seq of its last ledger entry without
// reading the ledger.
type Sequenced interface {
	LedgerSeq() int64
}

// LedgerSeq is the seq of the last entry of w's ledger (0: empty).
func LedgerSeq(ctx context.Context, w World) (int64, error) {
	if s, ok := w.(Sequenced); ok {
		return s.LedgerSeq(), nil
	}
	ledger, err := w.Ledger(ctx)
	if err != nil || len(ledger) == 0 {
		return 0, err
	}
	return ledger[len(ledger)-1].Seq, nil
}
