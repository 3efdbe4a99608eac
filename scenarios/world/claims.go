package world

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// ClaimsJudge is a model that judges the claims an agent sends with done
// (its report's figures: what it says it did and what the world now
// shows) against its own state: goal-reached fails an agent whose report
// the world contradicts. Claims it does not know are left unjudged.
type ClaimsJudge interface {
	CheckClaims(ctx context.Context, task, claims json.RawMessage) (Check, error)
}

// ClaimsChecker is a world that judges done claims: a Ledgered around a
// ClaimsJudge, and a Router whose unprefixed world is one.
type ClaimsChecker interface {
	CheckClaims(ctx context.Context, task, claims json.RawMessage) (Check, error)
}

// ErrNoClaimsJudge is CheckClaims's error for a world whose model judges
// no claims.
var ErrNoClaimsJudge = errors.New("the world judges no claims")

var _ ClaimsChecker = (*Ledgered)(nil)

// CheckClaims implements ClaimsChecker through the model's ClaimsJudge.
func (l *Ledgered) CheckClaims(ctx context.Context, task, claims json.RawMessage) (Check, error) {
	j, ok := l.model.(ClaimsJudge)
	if !ok {
		return Check{}, fmt.Errorf("world %s: %w", l.model.Name(), ErrNoClaimsJudge)
	}
	return j.CheckClaims(ctx, task, claims)
}

// CheckClaims implements ClaimsChecker: the unprefixed world's.
func (r *Router) CheckClaims(ctx context.Context, task, claims json.RawMessage) (Check, error) {
	c, ok := r.base().(ClaimsChecker)
	if !ok {
		return Check{}, fmt.Errorf("world %s: %w", r.name, ErrNoClaimsJudge)
	}
	return c.CheckClaims(ctx, task, claims)
}

// JudgeClaims judges claims against w, if w judges claims at all: judged
// is false for a world that does not (ErrNoClaimsJudge), or for no claims.
func JudgeClaims(ctx context.Context, w World, task, claims json.RawMessage) (chk Check, judged bool, err error) {
	c, ok := w.(ClaimsChecker)
	if !ok || len(claims) == 0 || string(claims) == "null" {
		return Check{}, false, nil
	}
	chk, err = c.CheckClaims(ctx, task, claims)
	if errors.Is(err, ErrNoClaimsJudge) {
		return Check{}, false, nil
	}
	return chk, err == nil, err
}
