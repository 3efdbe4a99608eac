package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// claimsJudge judges what an agent says about the world — the claims of a
// checkpoint or of done — against the world itself: a claim the scenario
// names under claims: by its CEL expression over the world's state, any
// other by the world's own ClaimChecker. It is called outside the run's
// lock, before the write its judgement is journaled with.
type claimsJudge struct {
	scen  *scenarios.Scenario
	world world.World
}

// judge parses raw (the agent's claims, canonical JSON) and judges every
// claim: nil for no claims. A claim that cannot be judged — nobody knows
// its name, the world cannot be read — is unknown, never an error: the
// agent's write goes on. A malformed claims value is an error (the agent's
// request is bad).
func (j claimsJudge) judge(ctx context.Context, raw json.RawMessage) (*history.Consistency, error) {
	claims, err := world.ParseClaims(raw)
	if err != nil || len(claims) == 0 {
		return nil, err
	}
	var state any
	stateRead := false
	results := make([]world.ClaimResult, 0, len(claims))
	for _, c := range claims {
		prg := j.scen.Claims[c.Name]
		if prg == nil {
			res, err := world.CheckClaim(ctx, j.world, c)
			if err != nil {
				res = world.ClaimResult{Claim: c, Verdict: world.ClaimUnknown, Detail: err.Error()}
			}
			results = append(results, res)
			continue
		}
		if !stateRead {
			stateRead = true
			state, err = j.state(ctx)
		}
		res := world.ClaimResult{Claim: c, Verdict: world.ClaimUnknown}
		var value any
		switch {
		case err != nil:
			res.Detail = fmt.Sprintf("claims.%s: the world's state: %v", c.Name, err)
		case json.Unmarshal(c.Value, &value) != nil:
			res.Detail = fmt.Sprintf("claims.%s: the claim's value is not JSON", c.Name)
		default:
			ok, eerr := prg.EvalBool(ctx, map[string]any{string(scenarios.ClaimVarState): state, string(scenarios.ClaimVarClaim): value})
			switch {
			case eerr != nil:
				res.Detail = fmt.Sprintf("claims.%s: %v", c.Name, eerr)
			case ok:
				res.Verdict, res.Detail = world.ClaimHolds, fmt.Sprintf("claims.%s holds: %s", c.Name, prg.Source())
			default:
				res.Verdict, res.Detail = world.ClaimContradicted, fmt.Sprintf("claims.%s is false: %s", c.Name, prg.Source())
			}
		}
		results = append(results, res)
	}
	return consistencyOf(results), nil
}

// state is the world's snapshot, decoded for CEL.
func (j claimsJudge) state(ctx context.Context) (any, error) {
	snap, err := j.world.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(snap, &v); err != nil {
		return nil, fmt.Errorf("decode the world's snapshot: %w", err)
	}
	return v, nil
}

// consistencyOf sums up claim results: poisoned if the world contradicts
// any, consistent if it shows them all, unknown otherwise.
func consistencyOf(results []world.ClaimResult) *history.Consistency {
	var contradicted, unknown []string
	for _, r := range results {
		if r.Verdict == world.ClaimHolds {
			continue
		}
		what := r.Claim.Name + " " + string(r.Claim.Value) + ": " + r.Detail
		if r.Verdict == world.ClaimContradicted {
			contradicted = append(contradicted, what)
		} else if r.Verdict == world.ClaimUnknown {
			unknown = append(unknown, what)
		}
	}
	c := &history.Consistency{Verdict: history.Consistent, Claims: make([]history.ClaimVerdict, len(results))}
	for i, r := range results {
		c.Claims[i] = history.ClaimVerdict{Name: r.Claim.Name, Verdict: r.Verdict, Detail: r.Detail}
	}
	switch {
	case len(contradicted) > 0:
		c.Verdict, c.Reason = history.Poisoned, "the world contradicts "+strings.Join(contradicted, "; ")
	case len(unknown) > 0:
		c.Verdict, c.Reason = history.ConsistencyUnknown, "the world cannot judge "+strings.Join(unknown, "; ")
	default:
		c.Reason = "the world shows all " + strconv.Itoa(len(results)) + " claims"
		if len(results) == 1 {
			c.Reason = "the world shows its 1 claim"
		}
	}
	return c
}
