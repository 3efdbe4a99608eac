package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/expr"
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
	var stateErr error
	stateRead := false
	cons := &history.Consistency{Verdict: history.Consistent, Claims: make([]history.ClaimVerdict, len(claims))}
	var contradicted, unknown []string
	for i, c := range claims {
		var res world.ClaimResult
		if prg := j.scen.Claims[c.Name]; prg != nil {
			if !stateRead {
				stateRead = true
				state, stateErr = j.state(ctx)
			}
			res = judgeByCEL(ctx, prg, c, state, stateErr)
		} else if res, err = world.CheckClaim(ctx, j.world, c); err != nil {
			res = world.ClaimResult{Claim: c, Verdict: world.ClaimUnknown, Detail: err.Error()}
		}
		cons.Claims[i] = history.ClaimVerdict{Name: c.Name, Verdict: res.Verdict, Detail: res.Detail}
		switch res.Verdict {
		case world.ClaimHolds:
		case world.ClaimContradicted:
			contradicted = append(contradicted, c.Name+" "+string(c.Value)+": "+res.Detail)
		case world.ClaimUnknown:
			unknown = append(unknown, c.Name+" "+string(c.Value)+": "+res.Detail)
		}
	}
	switch {
	case len(contradicted) > 0:
		cons.Verdict, cons.Reason = history.Poisoned, "the world contradicts "+strings.Join(contradicted, "; ")
	case len(unknown) > 0:
		cons.Verdict, cons.Reason = history.ConsistencyUnknown, "the world cannot judge "+strings.Join(unknown, "; ")
	case len(claims) == 1:
		cons.Reason = "the world shows its 1 claim"
	default:
		cons.Reason = "the world shows all " + strconv.Itoa(len(claims)) + " claims"
	}
	return cons, nil
}

// judgeByCEL judges c by the scenario's CEL program prg over the world's
// state (or says why it cannot: stateErr).
func judgeByCEL(ctx context.Context, prg *expr.Program, c world.Claim, state any, stateErr error) world.ClaimResult {
	res := world.ClaimResult{Claim: c, Verdict: world.ClaimUnknown}
	var value any
	switch {
	case stateErr != nil:
		res.Detail = fmt.Sprintf("claims.%s: the world's state: %v", c.Name, stateErr)
	case json.Unmarshal(c.Value, &value) != nil:
		res.Detail = fmt.Sprintf("claims.%s: the claim's value is not JSON", c.Name)
	default:
		ok, err := prg.EvalBool(ctx, map[string]any{string(scenarios.ClaimVarState): state, string(scenarios.ClaimVarClaim): value})
		switch {
		case err != nil:
			res.Detail = fmt.Sprintf("claims.%s: %v", c.Name, err)
		case ok:
			res.Verdict, res.Detail = world.ClaimHolds, fmt.Sprintf("claims.%s holds: %s", c.Name, prg.Source())
		default:
			res.Verdict, res.Detail = world.ClaimContradicted, fmt.Sprintf("claims.%s is false: %s", c.Name, prg.Source())
		}
	}
	return res
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
