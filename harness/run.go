package harness

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// inlineStateLimit is the largest checkpoint state kept inline in its
// record; larger states go to a blob referenced by hash.
const inlineStateLimit = 64 << 10

// run is one live run: the gateway's backend, and the hub that wires its
// owned parts together. Each part keeps its own state and reaches the rest
// of the run through a narrow interface the run implements:
//
//	clock      virtualClock   clock.go      virtual time, the horizon, the idle jump
//	faults     faultEngine    faults.go     fire, heal, stacking, evidence of "met"
//	fx         effectPath     effects.go    intent → faults → gate → toxic → world → result
//	sup        attempts       supervisor.go attempts, tokens, containers, the next attempt
//	llm        llmPath        llmpath.go    the OpenAI-compatible endpoint, budget, recording
//	(judge)                   judge.go      the verdict, from history and the invariant registry
//
// Everything an agent can change is guarded by mu and written durably
// before the agent hears about it. No call to the Docker engine is made
// while mu is held: the parts queue engine work (see afterUnlock), and unlock
// makes it once mu is released, before the request that caused it is
// answered.
type run struct {
	h     *Harness
	w     *history.Writer
	log   *slog.Logger
	scen  *scenarios.Scenario
	world world.World
	task  json.RawMessage
	hooks Hooks

	mu      sync.Mutex
	pending []func() // engine work queued under mu (see afterUnlock)
	rec     history.RunRecord
	ended   bool
	cp      history.CheckpointRecord
	events  int64 // the last event's seq
	done    *history.DoneRecord
	doneCh  chan struct{} // closed once done is durable

	clock  virtualClock
	faults faultEngine
	fx     effectPath
	sup    attempts
	// standby holds the next attempts' sandboxes, started ahead
	// (standby.go); the supervisor's alone.
	standby standbys
	llm     *llmPath // nil: the run serves no model

	mcpCalls   mcpOrdinal           // the current attempt's mutating MCP calls, for keys: derived
	mcpChanged map[string]mcpChange // tools an mcp-tool-gone or mcp-schema fault changed, by <server>__<tool> (mcptools.go)
	// The gateways' MCP endpoints serving the run, told when the tools
	// change and when an attempt ends (mcpnotify.go).
	mcpListeners []gateway.MCPListener

	link    *chaos.Link // the agent's link to the gateway (nil until driven)
	network bool        // the run's sandboxes are on its network (sandbox: {network: internal})
	// Held replies (see HoldReply), under holdMu alone: a reply never waits
	// for mu.
	holdMu   sync.Mutex
	dying    map[int]time.Time     // attempts a process fault signalled -> how long their replies are held at most
	dead     map[int]chan struct{} // per attempt, closed once its container is seen dead (or never ran)
	stopCh   chan struct{}         // closed when the run ends: background fault work stops
	removals sync.WaitGroup        // dead containers being removed in the background
}

var (
	_ gateway.Backend  = (*run)(nil)
	_ gateway.Holder   = (*run)(nil)
	_ gateway.Observer = (*run)(nil)
)

// afterUnlock queues engine work to be done once mu is released; mu must be
// held. The work runs in the goroutine that releases mu, in order, before
// that goroutine answers anyone.
func (r *run) afterUnlock(op func()) { r.pending = append(r.pending, op) }

// outside runs fn with mu released — mu is held when it is called and
// when it returns — so that a call that may take long (the world's) never
// stalls the run's other requests. What fn's caller read under mu may have
// changed when it returns.
func (r *run) outside(fn func()) {
	r.unlock()
	defer r.mu.Lock()
	fn()
}

// unlock releases mu, then does the engine work queued under it.
func (r *run) unlock() {
	ops := r.pending
	r.pending = nil
	r.mu.Unlock()
	for _, op := range ops {
		op()
	}
}

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

// judgeClaims canonicalises an agent's claims and judges them against the
// world (see claimsJudge); mu must not be held. Nil claims: nothing.
func (r *run) judgeClaims(ctx context.Context, raw json.RawMessage) (json.RawMessage, *history.Consistency, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil, nil
	}
	claims := raw // compact, not canonical: nothing hashes claims
	if !compactJSON(raw) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, nil, fmt.Errorf("claims: %w", err)
		}
		claims = buf.Bytes()
	}
	if string(claims) == "null" {
		return nil, nil, nil
	}
	cons, err := claimsJudge{scen: r.scen, world: r.world}.judge(ctx, claims)
	if err != nil {
		return claims, nil, &claimsShapeError{err}
	}
	return claims, cons, nil
}

// compactJSON reports whether raw has no space outside its strings (what
// json.Compact would remove): the SDK's claims, which then need no copy.
// It does not check that raw is JSON; the claims' parser does.
func compactJSON(raw []byte) bool {
	str := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case str && c == '\\':
			i++
		case c == '"':
			str = !str
		case !str && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

// claimsShapeError is judgeClaims' error for claims that are JSON but not
// in the claims shape.
type claimsShapeError struct{ err error }

func (e *claimsShapeError) Error() string { return e.err.Error() }
func (e *claimsShapeError) Unwrap() error { return e.err }

// put writes entries durably (one commit).
func (r *run) put(ctx context.Context, entries ...history.Entry) error {
	return r.w.Put(ctx, entries...)
}

// Authenticate implements gateway.Backend. A request of an attempt whose
// sandbox the supervisor does not know yet — the agent runs, but the
// backend's Start has not returned — waits until it does: a fault the
// request triggers then finds the sandbox to act on, so where it lands
// does not depend on how late the engine answered.
func (r *run) Authenticate(token string) (gateway.Caller, bool) {
	var since time.Time
	for {
		r.mu.Lock()
		n, ok := r.sup.authenticate(token)
		pending := r.sup.startPending(n)
		r.mu.Unlock()
		if !ok || pending == nil {
			if !since.IsZero() {
				r.log.Debug("a request waited for the engine to answer the start of its attempt's sandbox", "attempt", n, "waited", time.Since(since))
			}
			return gateway.Caller{Attempt: n}, ok
		}
		if since.IsZero() {
			since = time.Now()
		}
		select {
		case <-pending: // and again, so that the sandbox is noted as running
		case <-r.stopCh:
			return gateway.Caller{Attempt: n}, ok
		}
	}
}

// acting checks, under mu, that c may act: write checkpoints, run effects,
// move the clock, call the model. Once the agent has reported done it may
// not.
func (r *run) acting(c gateway.Caller) error {
	if err := r.writable(c); err != nil {
		return err
	}
	if r.done != nil {
		return gateway.Errorf(http.StatusConflict, protocol.CodeRunEnded,
			"the agent reported done (%s) in attempt %d; no more effects, checkpoints or sleeps are accepted", r.done.Outcome, r.done.Attempt)
	}
	if r.clock.reached() {
		return gateway.Errorf(http.StatusConflict, protocol.CodeRunEnded,
			"run %s reached its virtual horizon (%s): no more effects, checkpoints or sleeps are accepted", r.rec.ID, history.VirtualSpan(r.clock.span()))
	}
	if why := r.llm.ending(); why != "" {
		return gateway.Errorf(http.StatusConflict, protocol.CodeRunEnded, "run %s is ending: %s", r.rec.ID, why)
	}
	return nil
}

// writable checks, under mu, that c may change the run.
func (r *run) writable(c gateway.Caller) error {
	if r.ended {
		return gateway.Errorf(http.StatusConflict, protocol.CodeRunEnded, "run %s has ended; nothing more is accepted", r.rec.ID)
	}
	return r.sup.owns(r.rec.ID, c.Attempt)
}

// RunInfo implements gateway.Backend.
func (r *run) RunInfo(ctx context.Context, c gateway.Caller) (protocol.RunInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return protocol.RunInfo{
		RunID: r.rec.ID, Attempt: c.Attempt, Scenario: r.rec.Scenario,
		Task: r.task, Lessons: r.sup.lessonsOf(c.Attempt), Now: r.clock.now,
	}, nil
}

// Checkpoint implements gateway.Backend.
func (r *run) Checkpoint(ctx context.Context, c gateway.Caller) (protocol.Checkpoint, error) {
	r.mu.Lock()
	cp := r.cp
	r.sup.resumed(c.Attempt)
	r.mu.Unlock()
	state, err := r.h.history.CheckpointState(cp)
	if err != nil {
		return protocol.Checkpoint{}, err
	}
	return protocol.Checkpoint{Seq: cp.Seq, Step: cp.Step, State: state}, nil
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
	claims, consistency, err := r.judgeClaims(ctx, req.Claims)
	if err != nil {
		return protocol.CheckpointAck{}, gateway.Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "checkpoint %v", err)
	}

	r.mu.Lock()
	defer r.unlock()
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
	rec := history.CheckpointRecord{Seq: last.Seq + 1, Step: req.Step, StateHash: stateHash, Attempt: c.Attempt, ExpectSeq: req.ExpectSeq, Virtual: r.clock.now,
		Intents: r.fx.intents, LLMCalls: r.llm.callCount(), Wall: time.Now().UTC(), Claims: claims, Consistency: consistency,
		EffectOrder: r.fx.order}
	if seq, err := world.LedgerSeq(ctx, r.world); err == nil {
		rec.WorldSeq = seq
	}
	if len(state) > inlineStateLimit {
		h, err := r.w.PutBlob(ctx, state)
		if err != nil {
			return protocol.CheckpointAck{}, fmt.Errorf("store checkpoint state: %w", err)
		}
		rec.StateBlob = h
	} else {
		rec.State = state
	}
	if err := r.put(ctx, history.CheckpointEntry(r.rec.ID, rec)); err != nil {
		return protocol.CheckpointAck{}, fmt.Errorf("store checkpoint %d: %w", rec.Seq, err)
	}
	r.cp = rec
	if rec.Poisoned() {
		r.failed(Failure{Kind: FailurePoisoned, Attempt: c.Attempt, Checkpoint: rec.Seq,
			Detail: fmt.Sprintf("checkpoint %d (step %d) is poisoned: %s", rec.Seq, rec.Step, consistency.Reason)})
	}
	r.faults.fireStep(ctx, req.Step)
	return protocol.CheckpointAck{Seq: rec.Seq}, nil
}

func sameSeq(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// Effect implements gateway.Backend: see effectPath.
func (r *run) Effect(ctx context.Context, c gateway.Caller, req protocol.EffectRequest) (res protocol.EffectResult, err error) {
	r.mu.Lock()
	ctx = r.attemptContext(ctx)
	r.mu.Unlock()
	ctx, span := r.h.tracer().Start(ctx, SpanEffect, trace.WithAttributes(AttrRunID.String(r.rec.ID), AttrAttempt.Int(c.Attempt),
		AttrEffectKey.String(req.Key), AttrKind.String(req.Kind)))
	defer func() {
		span.SetAttributes(AttrStatus.String(res.Status), AttrReplayed.Bool(res.Replayed))
		if res.Error != nil {
			span.SetAttributes(attribute.String("error.type", res.Error.Code))
		}
		endSpan(span, err)
	}()
	return r.fx.do(ctx, c, req)
}

// Clock implements gateway.Backend.
func (r *run) Clock(ctx context.Context, c gateway.Caller) (protocol.Clock, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return protocol.Clock{Now: r.clock.now}, nil
}

// Sleep implements gateway.Backend: virtual time moves to the wake time at
// once, durably, firing every scheduled event on the way at its own instant
// and never passing the run's horizon. If an event on the way kills the
// sleeper or cuts its connection, the advance stops there.
func (r *run) Sleep(ctx context.Context, c gateway.Caller, req protocol.SleepRequest) (protocol.Clock, error) {
	reqCtx := ctx
	ctx = context.WithoutCancel(ctx)
	r.mu.Lock()
	defer r.unlock()
	if err := r.acting(c); err != nil {
		return protocol.Clock{}, err
	}
	var target time.Time
	if req.Until != nil {
		target = req.Until.UTC()
	} else {
		target = r.clock.now.Add(time.Duration(*req.Seconds * float64(time.Second)))
	}
	if !target.After(r.clock.now) {
		return protocol.Clock{Now: r.clock.now}, nil
	}
	stop := func() bool {
		return r.sup.cutOff(c.Attempt) || reqCtx.Err() != nil
	}
	if err := r.clock.advanceTo(ctx, target, &r.faults, stop); err != nil {
		return protocol.Clock{}, err
	}
	if r.clock.now.Before(target) && !r.clock.now.Equal(r.clock.horizon) {
		// A fault on the way stopped the sleep: say so rather than let the
		// sleeper believe it has woken. (A frozen sleeper hears it when it
		// is thawed, and sleeps again.)
		return protocol.Clock{Now: r.clock.now}, gateway.Errorf(http.StatusConflict, protocol.CodeInterrupted,
			"the sleep until %s was interrupted at %s by a fault", target.Format(time.RFC3339), r.clock.now.Format(time.RFC3339))
	}
	return protocol.Clock{Now: r.clock.now}, nil
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
	ev := history.EventRecord{Seq: r.events + 1, Attempt: r.sup.current, Type: typ, Message: msg, Data: raw, Virtual: r.clock.now, Wall: time.Now().UTC()}
	if err := r.put(ctx, history.EventEntry(r.rec.ID, ev)); err != nil {
		return fmt.Errorf("append event: %w", err)
	}
	r.events = ev.Seq
	return nil
}

// event appends a harness event, under mu, logging a failure to journal it.
func (r *run) event(ctx context.Context, typ, msg string, data any) {
	if err := r.appendEventLocked(context.WithoutCancel(ctx), typ, msg, data); err != nil {
		r.log.Warn("append harness event", "type", typ, "err", err)
	}
}

// appendEvent is event for callers not holding mu.
func (r *run) appendEvent(ctx context.Context, typ, msg string, data any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.event(ctx, typ, msg, data)
}

// Done implements gateway.Backend.
func (r *run) Done(ctx context.Context, c gateway.Caller, d protocol.Done) error {
	ctx = context.WithoutCancel(ctx)
	claims, consistency, err := r.judgeClaims(ctx, d.Claims)
	var shape *claimsShapeError
	switch {
	case errors.As(err, &shape):
		// Free-form claims, as done has always accepted: kept, not judged.
		consistency = &history.Consistency{Verdict: history.ConsistencyUnknown, Reason: "not judged: " + err.Error()}
	case err != nil:
		return gateway.Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "done %v", err)
	}
	// The report file is read before the claim is durable, and outside the
	// run's lock: the claim's record carries it.
	report, err := r.copyReport(ctx, c.Attempt)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.unlock()
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
	rec := history.DoneRecord{Outcome: d.Outcome, Summary: d.Summary, Claims: claims, Consistency: consistency, Attempt: c.Attempt, Virtual: r.clock.now, Report: report}
	if err := r.put(ctx, history.DoneEntry(r.rec.ID, rec)); err != nil {
		return fmt.Errorf("record done: %w", err)
	}
	r.done = &rec
	r.event(ctx, "done", d.Summary, map[string]any{"outcome": d.Outcome})
	if report != nil {
		r.event(ctx, "harness.report", reportEventText(report), map[string]any{"path": report.Path, "status": report.Status, "bytes": report.Bytes})
	}
	close(r.doneCh)
	if d.Outcome == protocol.OutcomeFailure {
		r.failed(Failure{Kind: FailureDone, Attempt: c.Attempt, Detail: d.Summary})
	}
	if consistency.Poisoned() {
		r.failed(Failure{Kind: FailurePoisoned, Attempt: c.Attempt, Detail: "the claims sent with done are poisoned: " + consistency.Reason})
	}
	return nil
}

// RequestStarted and RequestFinished (gateway.Observer) track agent
// requests in flight, for the idle jump of the clock.
func (r *run) RequestStarted() {
	r.mu.Lock()
	r.clock.requestStarted()
	r.mu.Unlock()
}

// RequestFinished is RequestStarted's other half.
func (r *run) RequestFinished() {
	r.mu.Lock()
	r.clock.requestFinished()
	r.mu.Unlock()
}

// progress prints a line for a person watching the run; an isolated
// re-run's lines are marked as its shadow's, so they do not read as the
// real run's.
func (r *run) progress(format string, args ...any) {
	if iso := r.rec.Isolated; iso != nil {
		format = "  [" + shadowName(r.rec.ID, iso) + "] " + format
	}
	r.h.progress(format, args...)
}

// shadowName names an isolated run for a progress line.
func shadowName(id string, iso *history.Isolation) string {
	if iso.Purpose != "" {
		return iso.Purpose
	}
	return "isolated run " + id
}
