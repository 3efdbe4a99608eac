package world

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// ReportJudge is a model that judges the claims an agent sends with done
// (its report's figures: what it says it did and what the world now
// shows) against its own state: goal-reached fails an agent whose report
// the world contradicts. Claims it does not know are left unjudged.
type ReportJudge interface {
	CheckReport(ctx context.Context, task, claims json.RawMessage) (Check, error)
}

// ReportChecker is a world that judges done claims: a Ledgered around a
// ReportJudge, and a Router whose unprefixed world is one.
type ReportChecker interface {
	CheckReport(ctx context.Context, task, claims json.RawMessage) (Check, error)
}

// ErrNoReportJudge is CheckReport's error for a world whose model judges
// no claims.
var ErrNoReportJudge = errors.New("the world judges no claims")

var _ ReportChecker = (*Ledgered)(nil)

// CheckReport implements ReportChecker through the model's ReportJudge.
func (l *Ledgered) CheckReport(ctx context.Context, task, claims json.RawMessage) (Check, error) {
	j, ok := l.model.(ReportJudge)
	if !ok {
		return Check{}, fmt.Errorf("world %s: %w", l.model.Name(), ErrNoReportJudge)
	}
	return j.CheckReport(ctx, task, claims)
}

// CheckReport implements ReportChecker: the unprefixed world's.
func (r *Router) CheckReport(ctx context.Context, task, claims json.RawMessage) (Check, error) {
	c, ok := r.base().(ReportChecker)
	if !ok {
		return Check{}, fmt.Errorf("world %s: %w", r.name, ErrNoReportJudge)
	}
	return c.CheckReport(ctx, task, claims)
}

// JudgeReport judges claims against w, if w judges claims at all: judged
// is false for a world that does not (ErrNoReportJudge), or for no claims.
func JudgeReport(ctx context.Context, w World, task, claims json.RawMessage) (chk Check, judged bool, err error) {
	c, ok := w.(ReportChecker)
	if !ok || len(claims) == 0 || string(claims) == "null" {
		return Check{}, false, nil
	}
	chk, err = c.CheckReport(ctx, task, claims)
	if errors.Is(err, ErrNoReportJudge) {
		return Check{}, false, nil
	}
	return chk, err == nil, err
}
