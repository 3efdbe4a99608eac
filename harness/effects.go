package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/invariant"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// effectPath is the path of a real-world action, a chain of stages each
// durable before the next:
//
//	admit     the request is well formed, the caller may act, and a repeat
//	          of a key with a final result is answered from the journal
//	intent    the intent is journaled; effect:N:before faults fire
//	gate      the run's Gate allows it, holds it, or denies it
//	toxic     the effect path's active fault answers instead, or delays it
//	execute   the world acts (once per key); effect:N faults fire
//	record    the result is journaled; effect:N:after faults fire
//
// Its state is guarded by the run's lock, which is released while the
// world is called (execute, reconcile, the duplicates check) and while an
// effect-slow fault delays an effect: a world that takes seconds never
// stalls the run's other requests (checkpoints, the clock, events, LLM
// calls). Effects themselves take the run's effect lane one at a time, in
// arrival order — so effect:N triggers, the effects' order and the history
// digest are what they were, and a repeat of a key in flight waits for the
// first.
type effectPath struct {
	r           *run
	lane        *sync.Mutex // one effect of the run down the path at a time
	effects     map[string]*history.EffectRecord
	order       int64 // the last effect's order
	unkeyed     int   // effects sent without a key so far
	intents     int   // effect intents journaled so far (the effect:N trigger counts them)
	toxic       chaos.EffectToxic
	toxicFault  *faultState // the fault that set the toxic
	mcp         mcpToxic    // the MCP path's toxic (mcpfaults.go)
	lost        *lostAnswer // the effect under way meets a world-crash fault
	dupReported bool        // no-duplicate-effects already reported violated live
}

// lostAnswer is what a world-crash fault fired at the effect under way
// does to it: it never reaches the world (before), or the world's answer
// to it is lost. Either way the effect is unknown, and reconciled by
// lookup on the world started again when the agent retries its key.
type lostAnswer struct {
	by     string // the fault
	before bool
}

// outcome is the effect's answer: in doubt.
func (l *lostAnswer) outcome() *protocol.EffectError {
	msg := fmt.Sprintf("the world crashed (fault %s) after it acted, and its answer was lost; retry with the same key: the harness asks the world, started again, what it did", l.by)
	if l.before {
		msg = fmt.Sprintf("the world crashed (fault %s) before the effect reached it; retry with the same key: the harness asks the world, started again, whether it has it", l.by)
	}
	return &protocol.EffectError{Code: "unknown", Message: msg, Status: http.StatusInternalServerError, Transient: true}
}

func newEffectPath(r *run, recs []history.EffectRecord) effectPath {
	p := effectPath{r: r, effects: map[string]*history.EffectRecord{}, lane: &sync.Mutex{}}
	for i := range recs {
		e := &recs[i]
		p.effects[e.ID] = e
		p.order = max(p.order, e.Order)
		p.intents += max(e.Intents, e.Executions)
		if e.Unkeyed {
			p.unkeyed++
		}
	}
	return p
}

// effect is one effect on its way down the path.
type effect struct {
	c        gateway.Caller
	req      protocol.EffectRequest
	args     []byte
	argsHash string
	rec      *history.EffectRecord
	n        int // its intent's number, for effect:N faults
}

func (e *effect) answer() protocol.EffectResult {
	return protocol.EffectResult{Key: e.req.Key, Status: e.rec.Status, Result: e.rec.Result, Error: e.rec.Error}
}

// do runs one effect down the path.
func (p *effectPath) do(ctx context.Context, c gateway.Caller, req protocol.EffectRequest) (protocol.EffectResult, error) {
	ctx = context.WithoutCancel(ctx)
	args, err := canonicalJSON(req.Args)
	if err != nil {
		return protocol.EffectResult{}, gateway.Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "effect args: %v", err)
	}
	if len(args) > gateway.MaxEffectArgsBytes {
		return protocol.EffectResult{}, gateway.Errorf(http.StatusRequestEntityTooLarge, protocol.CodeTooLarge,
			"effect args are %d bytes; at most %d", len(args), gateway.MaxEffectArgsBytes)
	}
	e := &effect{c: c, req: req, args: args, argsHash: hashHex(append([]byte(req.Kind+"\x00"), args...))}

	r := p.r
	p.lane.Lock()
	defer p.lane.Unlock()
	r.mu.Lock()
	defer r.unlock()
	if replayed, err := p.admit(ctx, e); err != nil || replayed != nil {
		return deref(replayed), err
	}
	if err := p.intent(ctx, e); err != nil {
		return protocol.EffectResult{}, err
	}
	if err := p.gate(ctx, e); err != nil {
		return protocol.EffectResult{}, err
	}
	if e.rec.Status == protocol.StatusDenied {
		return e.answer(), nil
	}
	out, err := p.execute(ctx, e)
	if err != nil {
		return protocol.EffectResult{}, err
	}
	if out == nil { // the world could not record it: in doubt
		return e.answer(), nil
	}
	if err := p.record(ctx, e, *out); err != nil {
		return protocol.EffectResult{}, err
	}
	return e.answer(), nil
}

func deref(r *protocol.EffectResult) protocol.EffectResult {
	if r == nil {
		return protocol.EffectResult{}
	}
	return *r
}

// admit checks that the caller may act and finds the effect's record: a
// repeat of a key whose result is final is answered from the journal, and
// touches nothing else (not the gate, not the world).
func (p *effectPath) admit(ctx context.Context, e *effect) (*protocol.EffectResult, error) {
	r := p.r
	if err := r.acting(e.c); err != nil {
		return nil, err
	}
	var id string
	if e.req.Key == "" {
		p.unkeyed++
		id = history.UnkeyedID(p.unkeyed)
	} else {
		id = history.KeyedID(e.req.Key)
	}
	rec := p.effects[id]
	if rec == nil {
		p.order++
		e.rec = &history.EffectRecord{ID: id, Key: e.req.Key, Order: p.order, Kind: e.req.Kind, Args: e.args, ArgsHash: e.argsHash, Unkeyed: e.req.Key == ""}
		return nil, nil
	}
	e.rec = rec
	if rec.ArgsHash != e.argsHash {
		return nil, gateway.Errorf(http.StatusConflict, protocol.CodeKeyReused,
			"key %q was used for %s with other arguments; a corrected request is a new effect with a new key", e.req.Key, rec.Kind)
	}
	if !rec.Final() {
		if err := p.reconcile(ctx, rec); err != nil {
			return nil, err
		}
	}
	if !rec.Final() {
		return nil, nil
	}
	rec.Replays++
	if err := p.put(ctx, rec); err != nil {
		return nil, fmt.Errorf("record replay of effect %q: %w", e.req.Key, err)
	}
	return &protocol.EffectResult{Key: e.req.Key, Status: rec.Status, Result: rec.Result, Error: rec.Error, Replayed: true}, nil
}

// intent journals the effect's intent, then fires the faults of
// effect:N:before. A process fault there ends the attempt before the world
// sees the effect: the intent stays without a result, to be reconciled.
func (p *effectPath) intent(ctx context.Context, e *effect) error {
	r := p.r
	rec := e.rec
	rec.Status, rec.Result, rec.Error = history.EffectIntent, nil, nil
	rec.Attempt, rec.Virtual = e.c.Attempt, r.clock.now
	rec.Intents++
	if err := p.put(ctx, rec); err != nil {
		return fmt.Errorf("journal intent of effect %s: %w", history.EffectLabel(rec.ID), err)
	}
	p.effects[rec.ID] = rec
	p.intents++
	e.n = p.intents
	p.lost = nil
	// Effect-triggered faults land at the same point every time: after the
	// intent (before), after the world acted (mid), after the result
	// (after) — always before the reply.
	_, endedBefore := r.sup.killedBy[e.c.Attempt]
	r.faults.fireEffect(ctx, e.n, chaos.PhaseBefore)
	if by, ended := r.sup.killedBy[e.c.Attempt]; ended && !endedBefore {
		return gateway.Errorf(http.StatusConflict, protocol.CodeFenced,
			"fault %s ended attempt %d before effect %s reached the world", by, e.c.Attempt, history.EffectLabel(rec.ID))
	}
	return nil
}

// gate asks the run's Gate, without the run's lock (it may wait for a
// person). A denial is journaled as the effect's answer.
func (p *effectPath) gate(ctx context.Context, e *effect) error {
	r := p.r
	g := r.hooks.Gate
	if g == nil {
		return nil
	}
	info, _ := kindInfo(r.world, e.req.Kind)
	req := GateRequest{RunID: r.rec.ID, Attempt: e.c.Attempt, EffectID: e.rec.ID, Key: e.req.Key, Kind: e.req.Kind, Args: e.args, ArgsDigest: e.argsHash,
		Virtual: r.clock.now, ReadOnly: info.ReadOnly}
	r.unlock()
	d, err := g.Admit(ctx, req)
	r.mu.Lock()
	if err != nil {
		return fmt.Errorf("gate: effect %s: %w", history.EffectLabel(e.rec.ID), err)
	}
	if err := r.writable(e.c); err != nil {
		return err // the attempt lost the run while its effect was held: the intent is reconciled later
	}
	if d.Allow {
		return nil
	}
	rec := e.rec
	rec.Status, rec.Result = protocol.StatusDenied, nil
	rec.Error = &protocol.EffectError{Code: "denied", Message: d.Reason, Status: http.StatusForbidden}
	if err := p.put(ctx, rec); err != nil {
		return fmt.Errorf("journal the denial of effect %s: %w", history.EffectLabel(rec.ID), err)
	}
	return nil
}

// execute runs the effect path's toxic, then the world; the faults of
// effect:N (mid) fire after the world acted. A nil outcome means the world
// could not record the execution: the effect is unknown.
func (p *effectPath) execute(ctx context.Context, e *effect) (*world.Outcome, error) {
	r := p.r
	rec := e.rec
	var out world.Outcome
	if l := p.lost; l != nil && l.before {
		return nil, p.inDoubt(ctx, e, l)
	}
	var hit *mcpHit
	if failed := p.applyToxic(ctx); failed != nil {
		out = *failed
	} else if hit = p.takeMCPToxic(ctx, e); hit.answersInstead() {
		out = hit.outcome()
	} else {
		var err error
		req := world.Request{Key: rec.ID, Kind: e.req.Kind, Args: e.args, Now: r.clock.now}
		disarm := p.armMCPCrash(hit)
		// The world's answer, journaled by the world, rides in the result's
		// commit (history.ResultFollows): every path below journals one.
		r.outside(func() { out, err = r.world.Execute(history.ResultFollows(ctx), req) })
		disarm()
		rec.Executions++
		if err != nil {
			rec.Status = protocol.StatusUnknown
			rec.Error = &protocol.EffectError{Code: "unknown", Message: hit.lostMessage(err), Status: http.StatusInternalServerError, Transient: true}
			_ = p.put(ctx, rec)
			return nil, nil
		}
		if lost, err := p.afterMCPToxic(ctx, e, hit); lost || err != nil {
			return nil, err
		}
	}
	r.faults.fireEffect(ctx, e.n, chaos.PhaseMid)
	if l := p.lost; l != nil {
		return nil, p.inDoubt(ctx, e, l)
	}
	return &out, nil
}

// inDoubt journals the effect as unknown: a world-crash fault l lost it.
func (p *effectPath) inDoubt(ctx context.Context, e *effect, l *lostAnswer) error {
	p.lost = nil
	rec := e.rec
	rec.Status, rec.Result, rec.Error = protocol.StatusUnknown, nil, l.outcome()
	if err := p.put(ctx, rec); err != nil {
		return fmt.Errorf("journal effect %s as in doubt: %w", history.EffectLabel(rec.ID), err)
	}
	return nil
}

// record journals the world's answer, fires effect:N:after faults, and
// tells the failure hook of a permanent refusal (and of an always
// invariant the world now shows violated).
func (p *effectPath) record(ctx context.Context, e *effect, out world.Outcome) error {
	r := p.r
	rec := e.rec
	rec.Status, rec.Result, rec.Error = out.Status, out.Result, out.Error
	if err := p.put(ctx, rec); err != nil {
		return fmt.Errorf("journal result of effect %s: %w", history.EffectLabel(rec.ID), err)
	}
	r.faults.fireEffect(ctx, e.n, chaos.PhaseAfter)
	if r.hooks.Failures == nil {
		return nil
	}
	if rec.Status == protocol.StatusFailed && rec.Final() {
		cp := *rec
		r.failed(Failure{Kind: FailureEffectRefused, Attempt: e.c.Attempt, Effect: &cp,
			Detail: fmt.Sprintf("the world refused %s (%s): %s", rec.Kind, rec.Error.Code, rec.Error.Message)})
	}
	if !p.dupReported && rec.Status == protocol.StatusDone {
		var j invariant.Judgement
		var err error
		r.outside(func() {
			j, err = r.h.opts.Invariants.Judge(ctx, invariant.NoDuplicateEffects, &invariant.Evidence{World: r.world, Label: history.EffectLabel})
		})
		if err == nil && j.Verdict == invariant.Fail && !p.dupReported {
			p.dupReported = true
			r.failed(Failure{Kind: FailureInvariant, Attempt: e.c.Attempt, Invariant: invariant.NoDuplicateEffects, Detail: j.Detail})
		}
	}
	return nil
}

// applyToxic runs the effect path's toxic for the effect being executed;
// it returns a failure to answer instead of executing, if any.
func (p *effectPath) applyToxic(ctx context.Context) *world.Outcome {
	tx, by := p.toxic, p.toxicFault
	if tx == (chaos.EffectToxic{}) {
		return nil
	}
	if tx.Once {
		p.toxic = chaos.EffectToxic{}
		p.r.faults.reapplyTop(chaos.PathEffect)
	}
	p.r.faults.hitEffect(ctx, by, p.intents, tx.Once)
	if tx.Slow > 0 {
		p.r.outside(func() { time.Sleep(min(tx.Slow, chaos.MaxEffectSlow)) })
	}
	if tx.Fail5xx {
		o := world.Failed(http.StatusServiceUnavailable, "unavailable", "the world's API answered 503 (effect-5xx fault): the effect did not run; retry with the same key")
		return &o
	}
	return nil
}

// Error codes of the effect path's refusals of an effect in doubt.
const (
	// CodeWorldUnavailable: the world cannot be asked about it now (503).
	CodeWorldUnavailable = "world_unavailable"
	// CodeInDoubt: the world cannot say whether it happened, ever (409).
	CodeInDoubt = "in_doubt"
	// CodeRetryIdempotent: the world cannot say whether it happened, but
	// the kind is an idempotent MCP tool (idempotentHint): a retry under
	// its key runs it again.
	CodeRetryIdempotent = "retry_idempotent"
)

// kindInfo is how world w describes kind.
func kindInfo(w world.World, kind string) (world.KindInfo, bool) {
	for _, k := range w.Kinds() {
		if k.Name == kind {
			return k, true
		}
	}
	return world.KindInfo{}, false
}

// put journals rec, an effect's record: durably, before the agent hears
// of it — unless a recording answers the effect (answeredFromRecording).
// Then it is held in memory a moment and written with the commits around
// it, in order with every other commit (history.Writer.PutRecorded), and
// is durable with the next synced one (a checkpoint, a live effect, the
// run's end): nothing outside the journal acted on it, so a crash that
// loses the newest such records — a machine's, or the harness's SIGKILL
// within the journal's BufferedDelay — is a crash a moment earlier, and
// the agent's retry under the same key meets the same recorded answer
// (the world's journal of answers, written before the result the same
// way, is counted with them).
func (p *effectPath) put(ctx context.Context, rec *history.EffectRecord) error {
	e := history.EffectEntry(p.r.rec.ID, rec)
	if answeredFromRecording(p.r.scen, rec.Kind) {
		return p.r.w.PutRecorded(ctx, e)
	}
	return p.r.put(ctx, e)
}

// answeredFromRecording says whether effects of kind are answered from a
// recorded run, the rule for scen's worlds: every MCP server's when the
// scenario replays MCP, each HTTP API's in mode: replay. Nothing outside
// the journal acts on them (put), nor on their journals of answers
// (recordedPrefixes).
func answeredFromRecording(scen *scenarios.Scenario, kind string) bool {
	if server, _, ok := mcpKindParts(kind); ok {
		_, declared := scen.MCPServer(server)
		return declared && scen.ReplaysMCP()
	}
	if api, _, ok := kindParts(scenarios.HTTPKindPrefix, kind); ok {
		a, declared := scen.HTTPAPI(api)
		return declared && a.Mode == scenarios.HTTPReplay
	}
	return false
}

// retriedInDoubt says an effect of kind in doubt that nobody can look up
// may run again under its key: an MCP tool whose annotations say it is
// idempotent (idempotentHint, or readOnlyHint), so that doing it twice is
// doing it once.
func retriedInDoubt(w world.World, kind string) bool {
	info, ok := kindInfo(w, kind)
	return ok && strings.HasPrefix(kind, scenarios.MCPKindPrefix) && info.Idempotent
}

// reconcile resolves an effect in doubt (an intent without a result, or
// unknown) by asking the world whether it received the key — with the
// request's kind and args, for a world that needs them
// (world.RequestLookup).
func (p *effectPath) reconcile(ctx context.Context, rec *history.EffectRecord) error {
	if !rec.InDoubt() {
		return nil
	}
	r := p.r
	var out world.Outcome
	var found bool
	var err error
	req := world.Request{Key: rec.ID, Kind: rec.Kind, Args: rec.Args, Now: r.clock.now}
	r.outside(func() { out, found, err = world.LookupOf(ctx, r.world, req) })
	if errors.Is(err, remote.ErrWorld) {
		// The world is down: the effect stays in doubt until it answers.
		return gateway.Errorf(http.StatusServiceUnavailable, CodeWorldUnavailable,
			"effect %s is in doubt and the world cannot be asked about it now (%v); retry with the same key", history.EffectLabel(rec.ID), err)
	}
	if errors.Is(err, world.ErrCannotLookup) && retriedInDoubt(r.world, rec.Kind) {
		// Doing it again is harmless: a retry under its key runs it.
		rec.Reconciled = true
		rec.Status, rec.Result = protocol.StatusFailed, nil
		rec.Error = &protocol.EffectError{Code: CodeRetryIdempotent, Status: http.StatusServiceUnavailable, Transient: true,
			Message: fmt.Sprintf("whether %s happened cannot be found out (%v), and it is idempotent: retrying it with the same key runs it again", rec.Kind, err)}
		if perr := p.put(ctx, rec); perr != nil {
			return fmt.Errorf("record effect %s as safe to retry: %w", history.EffectLabel(rec.ID), perr)
		}
		return nil
	}
	if errors.Is(err, world.ErrCannotLookup) {
		// Nobody can say whether it happened: it stays in doubt, and a
		// retry under its key — which could do it twice — is not run.
		if rec.Status != protocol.StatusUnknown {
			rec.Status = protocol.StatusUnknown
			rec.Error = &protocol.EffectError{Code: "unknown", Message: err.Error(), Status: http.StatusInternalServerError, Transient: true}
			if perr := p.put(ctx, rec); perr != nil {
				return fmt.Errorf("record effect %s as unknown: %w", history.EffectLabel(rec.ID), perr)
			}
		}
		return gateway.Errorf(http.StatusConflict, CodeInDoubt,
			"effect %s is in doubt: %v. Retrying it under its key could do it twice, so the harness does not; send it under a new key to do it anyway", history.EffectLabel(rec.ID), err)
	}
	if err != nil {
		return fmt.Errorf("reconcile effect %s with the world: %w", history.EffectLabel(rec.ID), err)
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
	if err := p.put(ctx, rec); err != nil {
		return fmt.Errorf("record reconciliation of effect %s: %w", history.EffectLabel(rec.ID), err)
	}
	r.event(ctx, "harness.reconcile", fmt.Sprintf("effect %s reconciled: %s", history.EffectLabel(rec.ID), rec.Status), nil)
	return nil
}
