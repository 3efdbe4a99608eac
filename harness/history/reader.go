package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/httpworld"
	"github.com/overnight-dev/overnight/scenarios/world/mcpworld"
)

// ErrRunNotFound is returned for a run id the journal does not hold.
var ErrRunNotFound = errors.New("no such run")

// Reader is the read-only view of the runs in a journal.
type Reader struct {
	j      *journal.Journal
	worlds *world.Registry
	remote func(ctx context.Context, rec RunRecord, scen *scenarios.Scenario) (world.World, error)
}

// NewReader reads the runs in j. worlds opens a run's world to read its
// ledger (nil: Ledger and World are unavailable).
func NewReader(j *journal.Journal, worlds *world.Registry) *Reader {
	return &Reader{j: j, worlds: worlds}
}

// get reads key into v; found is false when the key is absent.
func get(j *journal.Journal, key []byte, v any) (found bool, err error) {
	b, err := j.Get(key)
	if errors.Is(err, journal.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("decode %s: %w", key, err)
	}
	return true, nil
}

// scan decodes every value under prefix, in key order.
func scan[T any](j *journal.Journal, prefix []byte) ([]T, error) {
	var out []T
	err := j.Scan(prefix, func(k, v []byte) error {
		var t T
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("decode %s: %w", k, err)
		}
		out = append(out, t)
		return nil
	})
	return out, err
}

// last decodes the last value under prefix; found is false when there is none.
func last[T any](j *journal.Journal, prefix []byte) (t T, found bool, err error) {
	_, v, err := j.Last(prefix)
	if errors.Is(err, journal.ErrNotFound) {
		return t, false, nil
	}
	if err != nil {
		return t, false, err
	}
	if err := json.Unmarshal(v, &t); err != nil {
		return t, false, fmt.Errorf("decode last of %s: %w", prefix, err)
	}
	return t, true, nil
}

// Runs returns every run's header, in key order.
func (r *Reader) Runs() ([]RunRecord, error) {
	recs, err := scan[RunRecord](r.j, []byte(prefixRun))
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	return recs, nil
}

// Run returns run id's header, or an error wrapping ErrRunNotFound.
func (r *Reader) Run(id string) (RunRecord, error) {
	var rec RunRecord
	found, err := get(r.j, runKey(id), &rec)
	if err != nil {
		return rec, fmt.Errorf("read run %s: %w", id, err)
	}
	if !found {
		return rec, fmt.Errorf("%w %q", ErrRunNotFound, id)
	}
	return rec, nil
}

// Attempts returns the run's attempts, in order.
func (r *Reader) Attempts(id string) ([]AttemptRecord, error) {
	return wrap(scan[AttemptRecord](r.j, runPrefix(prefixAttempt, id)))("attempts", id)
}

// Attempt returns attempt n of the run; found is false when there is none.
func (r *Reader) Attempt(id string, n int) (AttemptRecord, bool, error) {
	var a AttemptRecord
	found, err := get(r.j, seqKey(prefixAttempt, id, int64(n)), &a)
	return a, found, err
}

// Checkpoints returns the run's checkpoints, in order.
func (r *Reader) Checkpoints(id string) ([]CheckpointRecord, error) {
	return wrap(scan[CheckpointRecord](r.j, runPrefix(prefixCheckpoint, id)))("checkpoints", id)
}

// LastCheckpoint returns the run's latest checkpoint (seq 0 before the first).
func (r *Reader) LastCheckpoint(id string) (CheckpointRecord, error) {
	cp, _, err := last[CheckpointRecord](r.j, runPrefix(prefixCheckpoint, id))
	if err != nil {
		return cp, fmt.Errorf("read last checkpoint of run %s: %w", id, err)
	}
	return cp, nil
}

// CheckpointState returns a checkpoint's state: null before the first.
func (r *Reader) CheckpointState(cp CheckpointRecord) (json.RawMessage, error) {
	if cp.Seq == 0 {
		return json.RawMessage("null"), nil
	}
	if cp.StateBlob != "" {
		b, err := r.j.Blob(cp.StateBlob)
		if err != nil {
			return nil, fmt.Errorf("read state of checkpoint %d: %w", cp.Seq, err)
		}
		return b, nil
	}
	return cp.State, nil
}

// Effects returns the run's effects in the order they were first asked for.
func (r *Reader) Effects(id string) ([]EffectRecord, error) {
	fx, err := scan[EffectRecord](r.j, runPrefix(prefixEffect, id))
	if err != nil {
		return nil, fmt.Errorf("read effects of run %s: %w", id, err)
	}
	sort.SliceStable(fx, func(i, k int) bool { return fx[i].Order < fx[k].Order })
	return fx, nil
}

// Faults returns the run's fault schedule and what became of each, in
// schedule order.
func (r *Reader) Faults(id string) ([]FaultRecord, error) {
	return wrap(scan[FaultRecord](r.j, runPrefix(prefixFault, id)))("the fault log", id)
}

// LLM returns the run's LLM exchanges, in order.
func (r *Reader) LLM(id string) ([]LLMRecord, error) {
	return wrap(scan[LLMRecord](r.j, runPrefix(prefixLLM, id)))("LLM exchanges", id)
}

// LLMRequest returns an exchange's canonical request.
func (r *Reader) LLMRequest(rec LLMRecord) ([]byte, error) {
	if rec.RequestBlob == "" {
		return rec.Request, nil
	}
	b, err := r.j.Blob(rec.RequestBlob)
	if err != nil {
		return nil, fmt.Errorf("read recorded LLM request: %w", err)
	}
	return b, nil
}

// LLMResponse returns an exchange's answer as the model gave it (nil for
// an error).
func (r *Reader) LLMResponse(rec LLMRecord) ([]byte, error) {
	if rec.ResponseBlob == "" {
		return rec.Response, nil
	}
	b, err := r.j.Blob(rec.ResponseBlob)
	if err != nil {
		return nil, fmt.Errorf("read recorded LLM response: %w", err)
	}
	return b, nil
}

// Events returns the run's trajectory, in order.
func (r *Reader) Events(id string) ([]EventRecord, error) {
	return wrap(scan[EventRecord](r.j, runPrefix(prefixEvent, id)))("events", id)
}

// LastEvent returns the run's latest event; found is false before the first.
func (r *Reader) LastEvent(id string) (EventRecord, bool, error) {
	ev, found, err := last[EventRecord](r.j, runPrefix(prefixEvent, id))
	if err != nil {
		return ev, false, fmt.Errorf("read last event of run %s: %w", id, err)
	}
	return ev, found, nil
}

// Clock returns the run's virtual time; found is false before it moved.
func (r *Reader) Clock(id string) (time.Time, bool, error) {
	var c ClockRecord
	found, err := get(r.j, clockKey(id), &c)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read clock of run %s: %w", id, err)
	}
	return c.Now, found, nil
}

// Done returns the agent's claim, or nil when it made none (or the run went
// on after it: see DoneRecord.Withdrawn).
func (r *Reader) Done(id string) (*DoneRecord, error) {
	var d DoneRecord
	found, err := get(r.j, doneKey(id), &d)
	if err != nil {
		return nil, fmt.Errorf("read done of run %s: %w", id, err)
	}
	if !found || d.Withdrawn {
		return nil, nil
	}
	return &d, nil
}

// Blob returns a payload stored by hash.
func (r *Reader) Blob(hash string) ([]byte, error) { return r.j.Blob(hash) }

// Logs returns each attempt's stdout and stderr, kept before its container
// was removed.
func (r *Reader) Logs(id string) ([]AttemptLog, error) {
	atts, err := r.Attempts(id)
	if err != nil {
		return nil, err
	}
	out := make([]AttemptLog, 0, len(atts))
	for _, a := range atts {
		l := AttemptLog{Attempt: a.N, Container: a.Container, End: a.End, ExitCode: a.ExitCode, StartedAt: a.StartedAt, EndedAt: a.EndedAt}
		for _, p := range []struct {
			hash string
			dst  *string
		}{{a.StdoutBlob, &l.Stdout}, {a.StderrBlob, &l.Stderr}} {
			if p.hash == "" {
				continue
			}
			b, err := r.j.Blob(p.hash)
			if err != nil {
				return nil, fmt.Errorf("read logs of attempt %d: %w", a.N, err)
			}
			*p.dst = string(b)
		}
		out = append(out, l)
	}
	return out, nil
}

// Scenario returns the scenario the run was made of, parsed again from the
// exact bytes it was recorded with.
func (r *Reader) Scenario(rec RunRecord) (*scenarios.Scenario, error) {
	raw, err := r.j.Blob(rec.ScenarioBlob)
	if err != nil {
		return nil, fmt.Errorf("read scenario of run %s: %w", rec.ID, err)
	}
	scen, err := scenarios.Parse(rec.Source, raw)
	if err != nil {
		return nil, fmt.Errorf("scenario of run %s no longer parses: %w", rec.ID, err)
	}
	if rec.WorldURL != "" { // the run was pointed at another world (--world)
		scen.World = scenarios.World{Name: scen.World.Name, URL: rec.WorldURL, Options: scen.World.Options}
	}
	return scen.ReplayingHTTP(rec.HTTPReplay).ReplayingMCP(rec.MCPReplay), nil
}

// World opens the run's world on its own key space, to read its state and
// ledger. Writing through it changes the run's world: only the harness that
// drives the run does that. A world served over the protocol is reached
// through the opener the harness set (SetRemote); without one, it is read
// from what the harness journaled of its answers (Journaled).
func (r *Reader) World(ctx context.Context, rec RunRecord, scen *scenarios.Scenario) (world.World, error) {
	if scen.World.Remote() || scen.HasAPIs() {
		if r.remote != nil {
			return r.remote(ctx, rec, scen)
		}
		return r.Journaled(rec, scen)
	}
	if r.worlds == nil {
		return nil, errors.New("history reader: no world registry to open the run's world")
	}
	store, prefix := NewWriter(r.j).WorldStore(rec.ID)
	return r.worlds.Open(ctx, scen.World.Name, store, prefix, scen.World.Options)
}

// SetRemote sets how World reaches a run's world served over the world
// protocol (the harness does, on its own reader).
func (r *Reader) SetRemote(open func(ctx context.Context, rec RunRecord, scen *scenarios.Scenario) (world.World, error)) {
	r.remote = open
}

// Journaled is run rec's world out of process as the harness journaled it:
// its ledger, and the outcome of each key, as the world answered them,
// readable when the world is gone. Calls only the world itself can answer
// (Execute, Duplicates, CheckGoal, Snapshot) fail, wrapping
// ErrWorldElsewhere.
func (r *Reader) Journaled(rec RunRecord, scen *scenarios.Scenario) (world.World, error) {
	store, prefix := NewWriter(r.j).WorldStore(rec.ID)
	if scen.HasAPIs() {
		// Several worlds: the scenario's world: (a built-in's state is in
		// the journal; one elsewhere is read from what was journaled of
		// it) and each HTTP API's and MCP server's journal of answers.
		return httpworld.Assemble(scen, store, nil, prefix, func(store world.Store, prefix []byte) (world.World, error) {
			if scen.World.Remote() {
				return r.journalOnly(scen, store, prefix)
			}
			if r.worlds == nil {
				return nil, errors.New("history reader: no world registry to open the run's world")
			}
			return r.worlds.Open(context.Background(), scen.World.Name, store, prefix, scen.World.Options)
		}, httpworld.OpenJournal, func(m scenarios.MCPServer, store world.Store, prefix []byte) (world.World, error) {
			return mcpworld.OpenJournal(m, store, prefix)
		})
	}
	return r.journalOnly(scen, store, prefix)
}

// journalOnly is a world out of process read from its journal in store
// under prefix.
func (r *Reader) journalOnly(scen *scenarios.Scenario, store world.Store, prefix []byte) (world.World, error) {
	name := scen.World.Name
	if name == "" {
		name = scen.World.Label()
	}
	l, err := world.OpenJournal(name, store, prefix)
	if err != nil {
		return nil, err
	}
	return journalOnly{Ledgered: l, label: "world " + scen.World.Label()}, nil
}

// ErrWorldElsewhere is wrapped by a journaled world's answer to a call only
// the world itself answers.
var ErrWorldElsewhere = errors.New("the world runs out of process: this view reads only what the harness journaled of its answers")

// journalOnly is a world out of process read from the journal alone.
type journalOnly struct {
	*world.Ledgered
	label string
}

func (j journalOnly) Execute(context.Context, world.Request) (world.Outcome, error) {
	return world.Outcome{}, fmt.Errorf("%s: %w", j.label, ErrWorldElsewhere)
}
func (j journalOnly) Duplicates(context.Context) ([]world.Duplicate, error) {
	return nil, fmt.Errorf("%s: %w", j.label, ErrWorldElsewhere)
}
func (j journalOnly) CheckGoal(context.Context, json.RawMessage) (world.Check, error) {
	return world.Check{}, fmt.Errorf("%s: %w", j.label, ErrWorldElsewhere)
}
func (j journalOnly) Snapshot(context.Context) (json.RawMessage, error) {
	return nil, fmt.Errorf("%s: %w", j.label, ErrWorldElsewhere)
}

// Run is the typed view of one run: everything the journal holds about it.
type Run struct {
	Record      RunRecord           `json:"record"`
	Attempts    []AttemptRecord     `json:"attempts"`
	Checkpoints []CheckpointRecord  `json:"checkpoints"`
	Effects     []EffectRecord      `json:"effects"` // in the order they were first asked for
	Faults      []FaultRecord       `json:"faults"`
	LLM         []LLMRecord         `json:"llm"`
	Events      []EventRecord       `json:"events"`
	Done        *DoneRecord         `json:"done,omitempty"` // nil: the agent claimed nothing
	Clock       time.Time           `json:"clock"`          // virtual time where the run stands
	Ledger      []world.LedgerEntry `json:"ledger,omitempty"`
}

// Load reads the whole of run id, the world's ledger included when the
// reader has a world registry.
func (r *Reader) Load(ctx context.Context, id string) (*Run, error) {
	return r.load(ctx, id, r.worlds != nil)
}

// load reads the whole of run id; ledger says whether to open its world for
// the ledger.
func (r *Reader) load(ctx context.Context, id string, ledger bool) (*Run, error) {
	rec, err := r.Run(id)
	if err != nil {
		return nil, err
	}
	out := &Run{Record: rec, Clock: rec.VirtualStart}
	if out.Attempts, err = r.Attempts(id); err != nil {
		return nil, err
	}
	if out.Checkpoints, err = r.Checkpoints(id); err != nil {
		return nil, err
	}
	if out.Effects, err = r.Effects(id); err != nil {
		return nil, err
	}
	if out.Faults, err = r.Faults(id); err != nil {
		return nil, err
	}
	if out.LLM, err = r.LLM(id); err != nil {
		return nil, err
	}
	if out.Events, err = r.Events(id); err != nil {
		return nil, err
	}
	if out.Done, err = r.Done(id); err != nil {
		return nil, err
	}
	if now, found, err := r.Clock(id); err != nil {
		return nil, err
	} else if found {
		out.Clock = now
	}
	if ledger {
		scen, err := r.Scenario(rec)
		if err != nil {
			return nil, err
		}
		var w world.World
		if scen.World.Remote() || scen.HasAPIs() {
			w, err = r.Journaled(rec, scen) // a report reads what was journaled: the world may be gone
		} else {
			w, err = r.World(ctx, rec, scen)
		}
		if err != nil {
			return nil, err
		}
		if out.Ledger, err = w.Ledger(ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// LastCheckpoint is the run's latest checkpoint (seq 0 before the first).
func (run *Run) LastCheckpoint() CheckpointRecord {
	if len(run.Checkpoints) == 0 {
		return CheckpointRecord{}
	}
	return run.Checkpoints[len(run.Checkpoints)-1]
}

func wrap[T any](v T, err error) func(what, id string) (T, error) {
	return func(what, id string) (T, error) {
		if err != nil {
			return v, fmt.Errorf("read %s of run %s: %w", what, id, err)
		}
		return v, nil
	}
}
