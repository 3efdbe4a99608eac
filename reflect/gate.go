package reflect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/scenarios"
)

// gate is the gate stage of one run's effect path: the scenario's gate
// policies, first match wins. Every decision but a plain allow is journaled
// with its evidence before the effect goes on (or is answered denied).
type gate struct {
	h        *harness.Harness
	w        *history.Writer
	runID    string
	rules    []scenarios.GateRule
	approval time.Duration
	rf       *reflector // nil: reflection is off
	log      *slog.Logger

	mu      sync.Mutex
	seq     int64                          // the last gate record's seq
	held    map[string]harness.HeldEffect  // effect id -> waiting now
	persons map[string]chan personDecision // effect id -> a person's decision, while held for one
	pre     map[string]history.GateRecord  // effect id -> a person's decision made before it was held here (while the run was not live)
	keyOf   map[string]string              // idempotency key -> effect id, of effects held now
}

type personDecision struct {
	approve bool
	by      string
}

func newGate(h *harness.Harness, rec history.RunRecord, scen *scenarios.Scenario, rf *reflector, log *slog.Logger) (*gate, error) {
	g := &gate{h: h, w: h.Writer(), runID: rec.ID, rules: scen.Gate, approval: scen.Limits.Approval, rf: rf, log: log,
		held: map[string]harness.HeldEffect{}, persons: map[string]chan personDecision{}, pre: map[string]history.GateRecord{}, keyOf: map[string]string{}}
	recs, err := h.History().GateDecisions(rec.ID)
	if err != nil {
		return nil, err
	}
	for _, d := range recs {
		g.seq = max(g.seq, d.Seq)
		if d.By != "gate" && d.By != "timeout" && (d.Decision == history.GateApproved || d.Decision == history.GateDenied) {
			g.pre[d.EffectID] = d // a person's decision: it holds when the effect is asked for again
		}
		if d.Decision == history.GateHeld {
			delete(g.pre, d.EffectID) // a decision made before a later hold is spent
		}
	}
	return g, nil
}

// rule returns the first gate rule matching kind: its index and policy
// (-1 and allow when none does).
func rule(rules []scenarios.GateRule, kind string) (int, string) {
	for i, r := range rules {
		if ok, _ := path.Match(r.Kinds, kind); ok {
			return i, r.Policy
		}
	}
	return -1, scenarios.PolicyAllow
}

// defaultPolicy is the policy of an effect no gate rule matches: allow,
// but for an MCP tool that is not read-only (a tool without annotations is
// destructive by the spec's default), verify when the run reflects.
func (g *gate) defaultPolicy(req harness.GateRequest) string {
	if g.rf != nil && strings.HasPrefix(req.Kind, scenarios.MCPKindPrefix) && !req.ReadOnly {
		return scenarios.PolicyVerify
	}
	return scenarios.PolicyAllow
}

// Admit implements harness.Gate.
func (g *gate) Admit(ctx context.Context, req harness.GateRequest) (harness.GateDecision, error) {
	i, policy := rule(g.rules, req.Kind)
	if i < 0 {
		policy = g.defaultPolicy(req)
	}
	switch policy {
	case scenarios.PolicyAllow:
		return harness.GateDecision{Allow: true, Policy: policy}, nil
	case scenarios.PolicyDeny:
		why := fmt.Sprintf("the gate's policy denies %s (gate[%d]: %s)", req.Kind, i, g.rules[i].Kinds)
		return g.record(ctx, req, i, policy, history.GateDenied, why, "", "gate", time.Now())
	case scenarios.PolicyApprove:
		return g.approve(ctx, req, i)
	case scenarios.PolicyVerify:
		return g.verify(ctx, req, i)
	}
	return harness.GateDecision{}, fmt.Errorf("gate[%d]: unknown policy %q", i, policy)
}

// record journals a decision and answers with it.
func (g *gate) record(ctx context.Context, req harness.GateRequest, rule int, policy, decision, reason, reflection, by string, since time.Time) (harness.GateDecision, error) {
	g.mu.Lock()
	g.seq++
	rec := history.GateRecord{Seq: g.seq, EffectID: req.EffectID, Key: req.Key, Kind: req.Kind, Args: req.Args, ArgsDigest: req.ArgsDigest, Attempt: req.Attempt,
		Policy: policy, Rule: rule, Decision: decision, Reason: reason, Reflection: reflection, By: by,
		Since: since.UTC(), At: time.Now().UTC(), Virtual: req.Virtual}
	g.mu.Unlock()
	if err := g.w.Put(context.WithoutCancel(ctx), history.GateEntry(g.runID, rec)); err != nil {
		return harness.GateDecision{}, fmt.Errorf("journal the gate's decision on %s: %w", history.EffectLabel(req.EffectID), err)
	}
	g.h.Progressf("gate: %s %s %s (%s)", history.EffectLabel(req.EffectID), req.Kind, decision, reason)
	allow := decision == history.GateReleased || decision == history.GateApproved
	return harness.GateDecision{Allow: allow, Policy: policy, Reason: reason}, nil
}

// hold journals that an effect waits, and notes it for `overnight gate`.
func (g *gate) hold(ctx context.Context, req harness.GateRequest, rule int, policy, waiting string) (time.Time, error) {
	since := time.Now()
	if _, err := g.record(ctx, req, rule, policy, history.GateHeld, "waiting for "+waiting, "", "gate", since); err != nil {
		return since, err
	}
	g.mu.Lock()
	g.held[req.EffectID] = harness.HeldEffect{ID: req.EffectID, ArgsDigest: req.ArgsDigest, Key: req.Key, Kind: req.Kind, Args: req.Args,
		Policy: policy, Since: since.UTC(), Waiting: waiting}
	if req.Key != "" {
		g.keyOf[req.Key] = req.EffectID
	}
	g.mu.Unlock()
	return since, nil
}

func (g *gate) unhold(id, key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.held, id)
	delete(g.persons, id)
	if g.keyOf[key] == id {
		delete(g.keyOf, key)
	}
}

// approve holds the effect until a person decides, for at most the
// scenario's limits.approval of real time; then it is denied.
func (g *gate) approve(ctx context.Context, req harness.GateRequest, i int) (harness.GateDecision, error) {
	g.mu.Lock()
	pre, decided := g.pre[req.EffectID]
	delete(g.pre, req.EffectID)
	g.mu.Unlock()
	if decided && pre.ArgsDigest != "" && pre.ArgsDigest != req.ArgsDigest {
		decided = false // a decision on other arguments decides nothing here: hold it again
	}
	if decided {
		d := history.GateDenied
		if pre.Decision == history.GateApproved {
			d = history.GateApproved
		}
		return g.record(ctx, req, i, scenarios.PolicyApprove, d, "decided by "+pre.By+" while the run was not live", "", pre.By, pre.Since)
	}
	ch := make(chan personDecision, 1)
	g.mu.Lock()
	g.persons[req.EffectID] = ch
	g.mu.Unlock()
	since, err := g.hold(ctx, req, i, scenarios.PolicyApprove, "a person")
	defer g.unhold(req.EffectID, req.Key)
	if err != nil {
		return harness.GateDecision{}, err
	}
	timer := time.NewTimer(g.approval)
	defer timer.Stop()
	select {
	case p := <-ch:
		if p.approve {
			return g.record(ctx, req, i, scenarios.PolicyApprove, history.GateApproved, "approved by "+p.by, "", "person:"+p.by, since)
		}
		return g.record(ctx, req, i, scenarios.PolicyApprove, history.GateDenied, "denied by "+p.by, "", "person:"+p.by, since)
	case <-timer.C:
		why := fmt.Sprintf("nobody approved %s within %s (limits.approval)", req.Kind, g.approval)
		return g.record(ctx, req, i, scenarios.PolicyApprove, history.GateDenied, why, "", "timeout", since)
	case <-ctx.Done():
		return harness.GateDecision{}, ctx.Err()
	}
}

// verify guards the effect with reflection: it passes while no reflection
// has opened, waits while one runs, passes on the strength of a verified
// lesson for an attempt that was handed it, and is denied with the
// reflection's id once one gave up.
func (g *gate) verify(ctx context.Context, req harness.GateRequest, i int) (harness.GateDecision, error) {
	if g.rf == nil {
		return harness.GateDecision{Allow: true, Policy: scenarios.PolicyVerify}, nil
	}
	var since time.Time
	held := false
	defer func() {
		if held {
			g.unhold(req.EffectID, req.Key)
		}
	}()
	for {
		st, wait := g.rf.gateState(req.Attempt)
		switch st.state {
		case stateIdle:
			return harness.GateDecision{Allow: true, Policy: scenarios.PolicyVerify}, nil
		case stateVerified:
			why := fmt.Sprintf("released: reflection %s verified lesson %s", st.id, st.lesson)
			if st.remembered {
				why = fmt.Sprintf("released: reflection %s verified remembered lesson %s against this run's world", st.id, st.lesson)
			}
			if since.IsZero() {
				since = time.Now()
			}
			return g.record(ctx, req, i, scenarios.PolicyVerify, history.GateReleased, why, st.id, "gate", since)
		case stateGaveUp, stateStale:
			if since.IsZero() {
				since = time.Now()
			}
			return g.record(ctx, req, i, scenarios.PolicyVerify, history.GateDenied, st.why, st.id, "gate", since)
		}
		// A reflection is deciding: wait for it.
		if !held {
			var err error
			if since, err = g.hold(ctx, req, i, scenarios.PolicyVerify, "reflection "+st.id); err != nil {
				return harness.GateDecision{}, err
			}
			held = true
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return harness.GateDecision{}, ctx.Err()
		}
	}
}

// heldNow lists the effects waiting now, oldest first.
func (g *gate) heldNow() []harness.HeldEffect {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]harness.HeldEffect, 0, len(g.held))
	for _, h := range g.held {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out
}

// decide hands a person's decision to the effect held under d.Effect (its
// id, or its key), if its arguments are the ones decided on.
func (g *gate) decide(d harness.Decision) error {
	g.mu.Lock()
	id := d.Effect
	if _, ok := g.held[id]; !ok {
		id = g.keyOf[d.Effect]
	}
	held, ok := g.held[id]
	ch := g.persons[id]
	g.mu.Unlock()
	if !ok || ch == nil || d.Effect == "" {
		return fmt.Errorf("%w: %q in run %s (held now: %d; only effects an approve policy holds wait for a person)", harness.ErrNotHeld, d.Effect, g.runID, len(g.heldNow()))
	}
	if err := bound(d, held); err != nil {
		return err
	}
	select {
	case ch <- personDecision{approve: d.Approve, by: d.By}:
		return nil
	default:
		return errors.New("a decision for that effect is already on its way")
	}
}

// bound checks that decision d names the arguments of held, if it names any.
func bound(d harness.Decision, held harness.HeldEffect) error {
	if d.ArgsDigest == "" || d.ArgsDigest == held.ArgsDigest {
		return nil
	}
	return fmt.Errorf("%w: %s %s is held with arguments %s (digest %s), not digest %s: a decision is bound to one call",
		harness.ErrOtherArgs, history.EffectLabel(held.ID), held.Kind, held.Args, held.ArgsDigest, d.ArgsDigest)
}

// heldOnRecord lists, from the journal, the effects of a run that is not
// live which were held and never decided.
func heldOnRecord(h *harness.Harness, runID string) ([]harness.HeldEffect, error) {
	recs, err := h.History().GateDecisions(runID)
	if err != nil {
		return nil, err
	}
	open := map[string]history.GateRecord{}
	var order []string
	for _, d := range recs {
		if d.Decision == history.GateHeld {
			if _, ok := open[d.EffectID]; !ok {
				order = append(order, d.EffectID)
			}
			open[d.EffectID] = d
			continue
		}
		delete(open, d.EffectID)
	}
	out := []harness.HeldEffect{}
	for _, id := range order {
		if d, ok := open[id]; ok {
			out = append(out, harness.HeldEffect{ID: d.EffectID, ArgsDigest: d.ArgsDigest, Key: d.Key, Kind: d.Kind, Args: d.Args, Policy: d.Policy, Since: d.Since, Waiting: d.Reason})
		}
	}
	return out, nil
}

// decideOnRecord journals a person's decision on an effect of a run that
// is not live: it applies when the effect reaches the gate again.
func decideOnRecord(ctx context.Context, h *harness.Harness, runID string, dec harness.Decision) error {
	held, err := heldOnRecord(h, runID)
	if err != nil {
		return err
	}
	recs, err := h.History().GateDecisions(runID)
	if err != nil {
		return err
	}
	for _, e := range held {
		if (e.ID != dec.Effect && (e.Key == "" || e.Key != dec.Effect)) || e.Policy != scenarios.PolicyApprove {
			continue
		}
		if err := bound(dec, e); err != nil {
			return err
		}
		var seq int64
		var last history.GateRecord
		for _, d := range recs {
			seq = max(seq, d.Seq)
			if d.EffectID == e.ID {
				last = d
			}
		}
		d := history.GateDenied
		if dec.Approve {
			d = history.GateApproved
		}
		rec := history.GateRecord{Seq: seq + 1, EffectID: last.EffectID, Key: last.Key, Kind: last.Kind, Args: last.Args, ArgsDigest: last.ArgsDigest,
			Attempt: last.Attempt, Policy: last.Policy, Rule: last.Rule, Decision: d, Reason: d + " by " + dec.By + " while the run was not live",
			By: "person:" + dec.By, Since: last.Since, At: time.Now().UTC(), Virtual: last.Virtual}
		return h.Writer().Put(ctx, history.GateEntry(runID, rec))
	}
	return fmt.Errorf("%w: %q in run %s", harness.ErrNotHeld, dec.Effect, runID)
}
