package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// Claims are the figures an agent's report gives, sent with done; each is
// judged against the world when present.
type Claims struct {
	CostBefore *float64 `json:"cost_before"` // the fleet's log cost per day at the start
	CostAfter  *float64 `json:"cost_after"`  // the fleet's log cost per day now
	Kept       *int     `json:"kept"`        // candidates applied
	RolledBack *int     `json:"rolled_back"` // candidates rolled back
}

var _ world.ReportJudge = (*World)(nil)

// claimTolerance is how far a claimed cost may be from the world's, in
// dollars per day: a report rounds its figures.
const claimTolerance = 0.01

// CheckReport implements world.ReportJudge: every figure the agent's
// report claims matches what the world shows. Claims the fleet does not
// know are left alone.
func (w *World) CheckReport(ctx context.Context, task, claims json.RawMessage) (world.Check, error) {
	var c Claims
	if err := json.Unmarshal(claims, &c); err != nil {
		return world.Check{Detail: fmt.Sprintf("the claims are not an object of figures: %v", err)}, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	counts := map[string]int{}
	for _, cand := range w.candidates {
		counts[cand.Status]++
	}
	var wrong, right []string
	cost := func(name string, claim *float64, real float64) {
		if claim == nil {
			return
		}
		if math.Abs(*claim-real) > claimTolerance {
			wrong = append(wrong, fmt.Sprintf("it claims a %s of %.2f $/day, and the world shows %.2f", name, *claim, real))
		} else {
			right = append(right, fmt.Sprintf("%s %.2f", name, real))
		}
	}
	count := func(name string, claim *int, real int) {
		if claim == nil {
			return
		}
		if *claim != real {
			wrong = append(wrong, fmt.Sprintf("it claims %d candidates %s, and the world shows %d", *claim, name, real))
		} else {
			right = append(right, fmt.Sprintf("%d %s", real, name))
		}
	}
	cost("cost_before", c.CostBefore, w.meta.StartCost)
	cost("cost_after", c.CostAfter, w.totalCost())
	count("kept", c.Kept, counts[StatusApplied])
	count("rolled back", c.RolledBack, counts[StatusRolledBack])
	if len(wrong) > 0 {
		return world.Check{Detail: strings.Join(wrong, "; ")}, nil
	}
	if len(right) == 0 {
		return world.Check{OK: true, Detail: "no figure the fleet knows was claimed"}, nil
	}
	return world.Check{OK: true, Detail: strings.Join(right, ", ")}, nil
}

// ClaimCandidate is the claim the fleet judges about a candidate
// (world.ClaimChecker), as an agent checkpoints what became of it:
//
//	{"candidate": {"id": "api-warn", "status": "applied"}}
//
// It holds when the world has the candidate in that status (proposed,
// tried, applied or rolled_back).
const ClaimCandidate = "candidate"

var _ world.ClaimChecker = (*World)(nil)

// CheckClaim implements world.ClaimChecker for ClaimCandidate; any other
// claim is world.ClaimUnknown.
func (w *World) CheckClaim(ctx context.Context, c world.Claim) (world.ClaimResult, error) {
	res := world.ClaimResult{Claim: c, Verdict: world.ClaimUnknown}
	if c.Name != ClaimCandidate {
		res.Detail = fmt.Sprintf("the fleet world judges only %q claims", ClaimCandidate)
		return res, nil
	}
	var a struct{ ID, Status string }
	err := c.DecodeValue(world.StringField("id", &a.ID), world.StringField("status", &a.Status))
	if err != nil || a.ID == "" || !knownStatus(a.Status) {
		res.Detail = fmt.Sprintf(`claim %s: want {"id": CANDIDATE, "status": %s|%s|%s|%s}`, c.Name, StatusProposed, StatusTried, StatusApplied, StatusRolledBack)
		return res, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	cand := w.candidates[a.ID]
	switch {
	case cand == nil:
		res.Verdict, res.Detail = world.ClaimContradicted, fmt.Sprintf("the fleet has no candidate %q", a.ID)
	case cand.Status != a.Status:
		res.Verdict, res.Detail = world.ClaimContradicted, fmt.Sprintf("candidate %s is %s, not %s", a.ID, statusText(cand), a.Status)
	default:
		res.Verdict, res.Detail = world.ClaimHolds, fmt.Sprintf("candidate %s is %s", a.ID, a.Status)
	}
	return res, nil
}

func knownStatus(s string) bool {
	return s == StatusProposed || s == StatusTried || s == StatusApplied || s == StatusRolledBack
}

// statusText is a candidate's status with its last trial, if any.
func statusText(c *Candidate) string {
	switch {
	case c.Trials == 0:
		return c.Status + " (never tried)"
	case c.Passed:
		return fmt.Sprintf("%s (its last trial passed)", c.Status)
	case c.Reason != "":
		return fmt.Sprintf("%s (its last trial failed: %s)", c.Status, c.Reason)
	}
	return c.Status + " (its last trial failed)"
}
