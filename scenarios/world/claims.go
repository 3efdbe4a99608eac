package world

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
)

// Claim is one thing an agent says about the world, sent with a checkpoint
// or with done: a name saying what kind of claim it is, and its value — the
// claim {"exists": {"kind": "database", "name": "prod-db"}} has Name
// "exists". Who understands a name judges it: the scenario's CEL
// expression of that name, else the world (ClaimChecker).
type Claim struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

// Verdicts of a claim.
const (
	ClaimHolds        = "holds"        // the world shows it
	ClaimContradicted = "contradicted" // the world shows otherwise
	ClaimUnknown      = "unknown"      // nobody here can say
)

// ClaimResult is the judgement of one claim.
type ClaimResult struct {
	Claim   Claim  `json:"claim"`
	Verdict string `json:"verdict"` // ClaimHolds, ClaimContradicted or ClaimUnknown
	Detail  string `json:"detail,omitempty"`
}

// ClaimChecker is a model (or a world) that judges claims about its own
// state: an optional capability, found by type assertion. A claim whose
// name it does not know is ClaimUnknown, not an error; an error means its
// state could not be read.
type ClaimChecker interface {
	CheckClaim(ctx context.Context, c Claim) (ClaimResult, error)
}

// CheckClaim judges c by w's ClaimChecker: w's own, its model's, or —
// for a Router — the first of its worlds that can say (its base world
// first). A world without one says ClaimUnknown.
func CheckClaim(ctx context.Context, w World, c Claim) (ClaimResult, error) {
	for _, cc := range claimCheckers(w) {
		res, err := cc.CheckClaim(ctx, c)
		if err != nil {
			return ClaimResult{}, fmt.Errorf("world %s: check claim %q: %w", w.Name(), c.Name, err)
		}
		if res.Verdict != ClaimUnknown {
			res.Claim = c
			return res, nil
		}
	}
	return ClaimResult{Claim: c, Verdict: ClaimUnknown, Detail: fmt.Sprintf("world %s cannot judge a claim %q", w.Name(), c.Name)}, nil
}

// claimCheckers lists what can judge claims about w, in the order asked.
func claimCheckers(w World) []ClaimChecker {
	if cc, ok := w.(ClaimChecker); ok {
		return []ClaimChecker{cc}
	}
	if cc, ok := ModelOf(w).(ClaimChecker); ok {
		return []ClaimChecker{cc}
	}
	r := RouterOf(w)
	if r == nil {
		return nil
	}
	var out []ClaimChecker
	if base := r.base(); base != nil {
		out = append(out, claimCheckers(base)...)
	}
	for _, rt := range r.routes {
		if rt.Prefix != "" {
			out = append(out, claimCheckers(rt.World)...)
		}
	}
	return out
}

// ParseClaims reads claims as an agent sends them: a JSON object, each of
// whose members is one claim ({"exists": {...}, "migrated": {...}}), or a
// list of such objects, to make one kind of claim more than once. null or
// nothing is no claim. The claims come back in the order written, an
// object's members sorted by name.
func ParseClaims(raw json.RawMessage) ([]Claim, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var objs []map[string]json.RawMessage
	switch raw[0] {
	case '{':
		var o map[string]json.RawMessage
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, fmt.Errorf("claims: %w", err)
		}
		objs = append(objs, o)
	case '[':
		if err := json.Unmarshal(raw, &objs); err != nil {
			return nil, fmt.Errorf("claims: want a list of objects such as {\"exists\": {\"kind\": \"database\", \"name\": \"prod-db\"}}: %w", err)
		}
	default:
		return nil, fmt.Errorf("claims: want an object ({NAME: VALUE, ...}) or a list of them, not %.40s", raw)
	}
	var out []Claim
	for i, o := range objs {
		if o == nil {
			return nil, fmt.Errorf("claims[%d]: want an object {NAME: VALUE}, not null", i)
		}
		names := make([]string, 0, len(o))
		for n := range o {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if n == "" {
				return nil, fmt.Errorf("claims[%d]: a claim needs a name", i)
			}
			out = append(out, Claim{Name: n, Value: o[n]})
		}
	}
	return out, nil
}
