package harness

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/harness/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// inlineStateLimit is the largest checkpoint state kept inline in its
// record; larger states go to a blob referenced by hash.
const inlineStateLimit = 64 << 10

// run is one live run: the gateway's backend and the supervisor's state.
// Everything an agent can change is guarded by mu and written durably
// before the agent hears about it.
type run struct {
	h     *Harness
	j     *journal.Journal
	log   *slog.Logger
	scen  *scenarios.Scenario
	world world.World
	task  json.RawMessage

	mu          sync.Mutex
	rec         RunRecord
	attempts    []AttemptRecord
	current     int            // the attempt allowed to write
	tokens      map[string]int // sha256(token) -> attempt
	container   string         // current attempt's container id
	killedBy    map[int]string // attempt -> fault that killed it
	cp          CheckpointRecord
	effects     map[string]*EffectRecord
	effectOrder int64
	unkeyed     int
	eventSeq    int64
	clock       time.Time
	horizon     time.Time
	done        *DoneRecord
	doneCh      chan struct{} // closed once done is durable
	horizonCh   chan struct{} // closed when the virtual horizon is reached
	faults      []*faultState
	ended       bool

	// Faults and the discrete-event clock.
	link         *chaos.Link       // the agent's link to the gateway
	firing       *faultState       // the fault being injected, for the Target's evidence
	intents      int               // effect intents journaled so far (the effect:N trigger counts them)
	toxic        chaos.EffectToxic // the effect path's active toxic
	toxicFault   *faultState       // the fault that set it
	inflight     int               // agent requests in flight
	lastActivity time.Time         // when one last started or finished
	seen         map[int]bool      // attempts that have made a request
	downUntil    time.Time         // a stop fault's down window: no attempt before it
	paused       string            // the container a pause fault froze
	killIssued   map[int]time.Time // when a fault's kill or stop was issued, per attempt

	// Held replies (see HoldReply), under holdMu alone: a reply never waits
	// for mu.
	holdMu   sync.Mutex
	dying    map[int]time.Time        // attempts a process fault signalled -> how long their replies are held at most
	dead     map[int]chan struct{}    // per attempt, closed once its container is seen dead (or never ran)
	stopCh   chan struct{}            // closed when the run ends: background fault work stops
	removals sync.WaitGroup           // dead containers being removed in the background
	llm      *llmState                // the LLM path: model, recording, budget
	stacks   map[string][]*faultState // active faults per target (link, effect, llm), newest last
	network  string                   // the sandbox network of the run ("": none)
	starting string                   // the current attempt's container, created, maybe not yet running
	detached string                   // the container a disconnect fault detached
}

var (
	_ gateway.Backend = (*run)(nil)
	_ gateway.Holder  = (*run)(nil)
)

func hashHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// canonicalJSON re-encodes raw with sorted object keys and no spaces, so
// equal values hash equally whatever their formatting.
func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("null"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep <, > and & as the agent sent them
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Authenticate implements gateway.Backend.
func (r *run) Authenticate(token string) (gateway.Caller, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.tokens[hashHex([]byte(token))]
	if ok {
		r.seen[n] = true
		if n == r.current && r.container == "" && r.starting != "" {
			// A request from the attempt proves its container runs, even if
			// the supervisor has not yet noted that Start returned.
			r.container = r.starting
		}
	}
	return gateway.Caller{Attempt: n}, ok
}

// acting checks, under mu, that c may act: write checkpoints, run effects,
// move the clock. Once the agent has reported done it may not.
func (r *run) acting(c gateway.Caller) error {
	if err := r.writable(c); err != nil {
		return err
	}
	if r.done != nil {
		return gateway.Errorf(http.StatusConflict, protocol.CodeRunEnded,
			"the agent reported done (%s) in attempt %d; no more effects, checkpoints or sleeps are accepted", r.done.Outcome, r.done.Attempt)
	}
	select {
	case <-r.horizonCh:
		return gateway.Errorf(http.StatusConflict, protocol.CodeRunEnded,
			"run %s reached its virtual horizon (%s): no more effects, checkpoints or sleeps are accepted", r.rec.ID, r.horizon.Sub(r.rec.VirtualStart))
	default:
	}
	if l := r.llm; l != nil && (l.exceeded != "" || l.diverged != "") {
		why := l.exceeded
		if why == "" {
			why = l.diverged
		}
		return gateway.Errorf(http.StatusConflict, protocol.CodeRunEnded, "run %s is ending: %s", r.rec.ID, why)
	}
	return nil
}

// writable checks, under mu, that c may change the run.
func (r *run) writable(c gateway.Caller) error {
	if r.ended {
		return gateway.Errorf(http.StatusConflict, protocol.CodeRunEnded, "run %s has ended; nothing more is accepted", r.rec.ID)
	}
	if r.current == 0 {
		return gateway.Errorf(http.StatusConflict, protocol.CodeFenced,
			"attempt %d's token is fenced: run %s was reloaded and no attempt owns it until the next one starts", c.Attempt, r.rec.ID)
	}
	if c.Attempt != r.current {
		return gateway.Errorf(http.StatusConflict, protocol.CodeFenced,
			"this token belongs to attempt %d, but attempt %d owns run %s now: stop", c.Attempt, r.current, r.rec.ID)
	}
	return nil
}

// RunInfo implements gateway.Backend.
func (r *run) RunInfo(ctx context.Context, c gateway.Caller) (protocol.RunInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return protocol.RunInfo{
		RunID: r.rec.ID, Attempt: c.Attempt, Scenario: r.rec.Scenario,
		Task: r.task, Lessons: []protocol.Lesson{}, Now: r.clock,
	}, nil
}

// Checkpoint implements gateway.Backend.
func (r *run) Checkpoint(ctx context.Context, c gateway.Caller) (protocol.Checkpoint, error) {
	r.mu.Lock()
	cp := r.cp
	if c.Attempt >= 1 && c.Attempt <= len(r.attempts) && r.attempts[c.Attempt-1].FirstResumedAt.IsZero() {
		// Timing only (for the recovery benchmark): recorded with the
		// attempt's end, not synced on its own.
		r.attempts[c.Attempt-1].FirstResumedAt = time.Now().UTC()
	}
	r.mu.Unlock()
	state, err := r.checkpointState(cp)
	if err != nil {
		return protocol.Checkpoint{}, err
	}
	return protocol.Checkpoint{Seq: cp.Seq, Step: cp.Step, State: state}, nil
}

func (r *run) checkpointState(cp CheckpointRecord) (json.RawMessage, error) {
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

// PutCheckpoint implements gateway.Backend. The checkpoint is durable
// before the reply, and step-triggered faults fire after it is durable and
// before the reply, so they land at the same point of the history every
// time.
func (r *run) PutCheckpoint(ctx context.Context, c gateway.Caller, req protocol.PutCheckpoint) (protocol.CheckpointAck, error) {
	ctx = context.WithoutCancel(ctx)
	state, err := canonicalJSON(req.State)
	if err != nil {
		return protocol.CheckpointAck{}, gateway.Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "checkpoint state: %v", err)
	}
	stateHash := hashHex(state)

	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.acting(c); err != nil {
		return protocol.CheckpointAck{}, err
	}
	last := r.cp
	if last.Seq > 0 && last.Attempt == c.Attempt && last.Step == req.Step && last.StateHash == stateHash && sameSeq(last.ExpectSeq, req.ExpectSeq) {
		return protocol.CheckpointAck{Seq: last.Seq}, nil // a retry of the last committed write
	}
	if req.ExpectSeq != nil && *req.ExpectSeq != last.Seq {
		return protocol.CheckpointAck{}, gateway.Errorf(http.StatusConflict, protocol.CodeConflict,
			"expect_seq %d, but the last checkpoint is seq %d (step %d): read it again with GET /v1/checkpoint", *req.ExpectSeq, last.Seq, last.Step)
	}
	rec := CheckpointRecord{Seq: last.Seq + 1, Step: req.Step, StateHash: stateHash, Attempt: c.Attempt, ExpectSeq: req.ExpectSeq, Virtual: r.clock}
	if len(state) > inlineStateLimit {
		h, err := r.j.PutBlob(ctx, state)
		if err != nil {
			return protocol.CheckpointAck{}, fmt.Errorf("store checkpoint state: %w", err)
		}
		rec.StateBlob = h
	} else {
		rec.State = state
	}
	if err := put(ctx, r.j, checkpointKey(r.rec.ID, rec.Seq), rec); err != nil {
		return protocol.CheckpointAck{}, fmt.Errorf("store checkpoint %d: %w", rec.Seq, err)
	}
	r.cp = rec
	r.fireStep(ctx, req.Step)
	return protocol.CheckpointAck{Seq: rec.Seq}, nil
}

func sameSeq(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// Effect implements gateway.Backend: intent, gate, execute once per key,
// result — each durable before the next.
func (r *run) Effect(ctx context.Context, c gateway.Caller, req protocol.EffectRequest) (protocol.EffectResult, error) {
	ctx = context.WithoutCancel(ctx)
	args, err := canonicalJSON(req.Args)
	if err != nil {
		return protocol.EffectResult{}, gateway.Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "effect args: %v", err)
	}
	if len(args) > gateway.MaxEffectArgsBytes {
		return protocol.EffectResult{}, gateway.Errorf(http.StatusRequestEntityTooLarge, protocol.CodeTooLarge,
			"effect args are %d bytes; at most %d", len(args), gateway.MaxEffectArgsBytes)
	}
	argsHash := hashHex(append([]byte(req.Kind+"\x00"), args...))

	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.acting(c); err != nil {
		return protocol.EffectResult{}, err
	}
	var id string
	if req.Key == "" {
		r.unkeyed++
		id = unkeyedID(r.unkeyed)
	} else {
		id = keyedID(req.Key)
	}
	rec := r.effects[id]
	if rec != nil {
		if rec.ArgsHash != argsHash {
			return protocol.EffectResult{}, gateway.Errorf(http.StatusConflict, protocol.CodeKeyReused,
				"key %q was used for %s with other arguments; a corrected request is a new effect with a new key", req.Key, rec.Kind)
		}
		if !rec.final() {
			if err := r.reconcile(ctx, rec); err != nil {
				return protocol.EffectResult{}, err
			}
		}
		if rec.final() {
			rec.Replays++
			if err := put(ctx, r.j, effectKey(r.rec.ID, id), rec); err != nil {
				return protocol.EffectResult{}, fmt.Errorf("record replay of effect %q: %w", req.Key, err)
			}
			return protocol.EffectResult{Key: req.Key, Status: rec.Status, Result: rec.Result, Error: rec.Error, Replayed: true}, nil
		}
	} else {
		r.effectOrder++
		rec = &EffectRecord{ID: id, Key: req.Key, Order: r.effectOrder, Kind: req.Kind, Args: args, ArgsHash: argsHash, Unkeyed: req.Key == ""}
	}
	rec.Status, rec.Result, rec.Error = effectIntent, nil, nil
	rec.Attempt, rec.Virtual = c.Attempt, r.clock
	rec.Intents++
	if err := put(ctx, r.j, effectKey(r.rec.ID, id), rec); err != nil {
		return protocol.EffectResult{}, fmt.Errorf("journal intent of effect %s: %w", effectLabel(id), err)
	}
	r.effects[id] = rec
	r.intents++
	n := r.intents
	// Effect-triggered faults land at the same point every time: after the
	// intent (before), after the world acted (mid), after the result
	// (after) — always before the reply.
	r.fireEffect(ctx, n, chaos.PhaseBefore)

	// The gate: every effect is allowed in this version (the reflection
	// loop adds holds and denials). Then the effect path's toxics.
	var out world.Outcome
	if failed := r.applyToxic(); failed != nil {
		out = *failed
	} else {
		out, err = r.world.Execute(ctx, world.Request{Key: id, Kind: req.Kind, Args: args, Now: r.clock})
		rec.Executions++
		if err != nil {
			rec.Status = protocol.StatusUnknown
			rec.Error = &protocol.EffectError{Code: "unknown", Message: err.Error(), Status: http.StatusInternalServerError, Transient: true}
			_ = put(ctx, r.j, effectKey(r.rec.ID, id), rec)
			return protocol.EffectResult{Key: req.Key, Status: rec.Status, Error: rec.Error}, nil
		}
	}
	r.fireEffect(ctx, n, chaos.PhaseMid)
	rec.Status, rec.Result, rec.Error = out.Status, out.Result, out.Error
	if err := put(ctx, r.j, effectKey(r.rec.ID, id), rec); err != nil {
		return protocol.EffectResult{}, fmt.Errorf("journal result of effect %s: %w", effectLabel(id), err)
	}
	r.fireEffect(ctx, n, chaos.PhaseAfter)
	return protocol.EffectResult{Key: req.Key, Status: rec.Status, Result: rec.Result, Error: rec.Error}, nil
}

// reconcile resolves an effect in doubt (an intent without a result, or
// unknown) by asking the world whether it received the key.
func (r *run) reconcile(ctx context.Context, rec *EffectRecord) error {
	if rec.Status != effectIntent && rec.Status != protocol.StatusUnknown {
		return nil
	}
	out, found, err := r.world.Lookup(ctx, rec.ID)
	if err != nil {
		return fmt.Errorf("reconcile effect %s with the world: %w", effectLabel(rec.ID), err)
	}
	rec.Reconciled = true
	if found {
		// The world acted on this intent; the harness died before it could
		// count that.
		if rec.Executions < rec.Intents {
			rec.Executions++
		}
		rec.Status, rec.Result, rec.Error = out.Status, out.Result, out.Error
	} else {
		rec.Status, rec.Result = protocol.StatusFailed, nil
		rec.Error = &protocol.EffectError{Code: "not_executed", Status: http.StatusServiceUnavailable, Transient: true,
			Message: "the world never received this effect (the harness stopped before executing it); retrying with the same key runs it"}
	}
	if err := put(ctx, r.j, effectKey(r.rec.ID, rec.ID), rec); err != nil {
		return fmt.Errorf("record reconciliation of effect %s: %w", effectLabel(rec.ID), err)
	}
	_ = r.appendEventLocked(ctx, "harness.reconcile", fmt.Sprintf("effect %s reconciled: %s", effectLabel(rec.ID), rec.Status), nil)
	return nil
}

// Clock implements gateway.Backend.
func (r *run) Clock(ctx context.Context, c gateway.Caller) (protocol.Clock, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return protocol.Clock{Now: r.clock}, nil
}

// Sleep implements gateway.Backend: virtual time moves to the wake time at
// once, durably, firing every scheduled event on the way at its own instant
// and never passing the run's horizon. If an event on the way kills the
// sleeper or cuts its connection, the advance stops there.
func (r *run) Sleep(ctx context.Context, c gateway.Caller, req protocol.SleepRequest) (protocol.Clock, error) {
	reqCtx := ctx
	ctx = context.WithoutCancel(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.acting(c); err != nil {
		return protocol.Clock{}, err
	}
	var target time.Time
	if req.Until != nil {
		target = req.Until.UTC()
	} else {
		target = r.clock.Add(time.Duration(*req.Seconds * float64(time.Second)))
	}
	if !target.After(r.clock) {
		return protocol.Clock{Now: r.clock}, nil
	}
	stop := func() bool {
		_, killed := r.killedBy[c.Attempt]
		frozen := r.paused != "" && r.paused == r.container
		return killed || frozen || reqCtx.Err() != nil || r.current != c.Attempt
	}
	if err := r.advanceTo(ctx, target, stop); err != nil {
		return protocol.Clock{}, err
	}
	if r.clock.Before(target) && !r.clock.Equal(r.horizon) {
		// A fault on the way stopped the sleep: say so rather than let the
		// sleeper believe it has woken. (A frozen sleeper hears it when it
		// is thawed, and sleeps again.)
		return protocol.Clock{Now: r.clock}, gateway.Errorf(http.StatusConflict, protocol.CodeInterrupted,
			"the sleep until %s was interrupted at %s by a fault", target.Format(time.RFC3339), r.clock.Format(time.RFC3339))
	}
	return protocol.Clock{Now: r.clock}, nil
}

// Event implements gateway.Backend.
func (r *run) Event(ctx context.Context, c gateway.Caller, ev protocol.Event) error {
	ctx = context.WithoutCancel(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.writable(c); err != nil {
		return err
	}
	if len(ev.Data) > 0 {
		data, err := canonicalJSON(ev.Data)
		if err != nil {
			return gateway.Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "event data: %v", err)
		}
		ev.Data = data
	}
	return r.appendEventLocked(ctx, ev.Type, ev.Message, ev.Data)
}

// appendEventLocked appends to the trajectory durably; mu must be held.
func (r *run) appendEventLocked(ctx context.Context, typ, msg string, data any) error {
	var raw json.RawMessage
	switch d := data.(type) {
	case nil:
	case json.RawMessage:
		raw = d
	default:
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		raw = b
	}
	ev := EventRecord{Seq: r.eventSeq + 1, Attempt: r.current, Type: typ, Message: msg, Data: raw, Virtual: r.clock, Wall: time.Now().UTC()}
	if err := put(ctx, r.j, eventKey(r.rec.ID, ev.Seq), ev); err != nil {
		return fmt.Errorf("append event: %w", err)
	}
	r.eventSeq = ev.Seq
	return nil
}

// appendEvent is appendEventLocked for callers not holding mu.
func (r *run) appendEvent(ctx context.Context, typ, msg string, data any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.appendEventLocked(context.WithoutCancel(ctx), typ, msg, data); err != nil {
		r.log.Warn("append harness event", "type", typ, "err", err)
	}
}

// Done implements gateway.Backend.
func (r *run) Done(ctx context.Context, c gateway.Caller, d protocol.Done) error {
	ctx = context.WithoutCancel(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil {
		if c.Attempt == r.done.Attempt && d.Outcome == r.done.Outcome {
			return nil // a retry
		}
		return gateway.Errorf(http.StatusConflict, protocol.CodeRunEnded,
			"the agent already reported done (%s) in attempt %d", r.done.Outcome, r.done.Attempt)
	}
	if err := r.writable(c); err != nil {
		return err
	}
	if len(d.Claims) > 0 {
		claims, err := canonicalJSON(d.Claims)
		if err != nil {
			return gateway.Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "done claims: %v", err)
		}
		d.Claims = claims
	}
	rec := DoneRecord{Outcome: d.Outcome, Summary: d.Summary, Claims: d.Claims, Attempt: c.Attempt, Virtual: r.clock}
	if err := put(ctx, r.j, doneKey(r.rec.ID), rec); err != nil {
		return fmt.Errorf("record done: %w", err)
	}
	r.done = &rec
	_ = r.appendEventLocked(ctx, "done", d.Summary, map[string]any{"outcome": d.Outcome})
	close(r.doneCh)
	return nil
}
