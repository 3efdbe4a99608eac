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
// object's members sorted by name (a name written twice in one object
// keeps its last value). Each claim's Value is a slice of raw.
//
// It runs on every checkpoint that carries claims, so it splits raw with
// a small scanner after one validity check instead of decoding it through
// reflection into maps.
func ParseClaims(raw json.RawMessage) ([]Claim, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if !json.Valid(raw) {
		var v any
		return nil, fmt.Errorf("claims: %w", json.Unmarshal(raw, &v)) // the decoder's error says where
	}
	s := claimScanner{b: raw}
	var out []Claim
	switch raw[0] {
	case '{':
		return s.object(0, out)
	case '[':
		s.i++ // [
		for i := 0; ; i++ {
			s.space()
			if s.b[s.i] == ']' {
				return out, nil
			}
			var err error
			switch s.b[s.i] {
			case '{':
				if out, err = s.object(i, out); err != nil {
					return nil, err
				}
			case 'n':
				return nil, fmt.Errorf("claims[%d]: want an object {NAME: VALUE}, not null", i)
			default:
				return nil, fmt.Errorf("claims: want a list of objects such as {\"exists\": {\"kind\": \"database\", \"name\": \"prod-db\"}}, not %.40s", s.b[s.i:])
			}
			s.space()
			if s.b[s.i] == ',' {
				s.i++
			}
		}
	}
	return nil, fmt.Errorf("claims: want an object ({NAME: VALUE, ...}) or a list of them, not %.40s", raw)
}

// claimScanner walks claims that json.Valid accepted.
type claimScanner struct {
	b []byte
	i int
}

func (s *claimScanner) space() {
	for s.i < len(s.b) && isSpace(s.b[s.i]) {
		s.i++
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// object appends the members of the object at s.i (the idx-th of the
// claims) to out, sorted by name, and moves past it.
func (s *claimScanner) object(idx int, out []Claim) ([]Claim, error) {
	s.i++ // {
	first := len(out)
	for {
		s.space()
		if s.b[s.i] == '}' {
			s.i++
			break
		}
		name, err := s.str()
		if err != nil {
			return nil, fmt.Errorf("claims[%d]: %w", idx, err)
		}
		if name == "" {
			return nil, fmt.Errorf("claims[%d]: a claim needs a name", idx)
		}
		s.space()
		s.i++ // :
		s.space()
		start := s.i
		s.value()
		end := s.i
		for isSpace(s.b[end-1]) {
			end--
		}
		out = append(out, Claim{Name: name, Value: json.RawMessage(s.b[start:end:end])})
		s.space()
		if s.b[s.i] == ',' {
			s.i++
		}
	}
	mine := out[first:]
	if len(mine) > 1 {
		sort.SliceStable(mine, func(a, b int) bool { return mine[a].Name < mine[b].Name })
		kept := mine[:0]
		for k, c := range mine { // a name written twice keeps its last value, as a map would
			if k+1 < len(mine) && mine[k+1].Name == c.Name {
				continue
			}
			kept = append(kept, c)
		}
		out = out[:first+len(kept)]
	}
	return out, nil
}

// str reads the string at s.i.
func (s *claimScanner) str() (string, error) {
	start := s.i
	if plain := s.skipStr(); plain {
		return string(s.b[start+1 : s.i-1]), nil
	}
	var name string
	if err := json.Unmarshal(s.b[start:s.i], &name); err != nil {
		return "", err
	}
	return name, nil
}

// skipStr moves past the string at s.i, reporting whether it has no
// escapes.
func (s *claimScanner) skipStr() (plain bool) {
	plain = true
	s.i++ // "
	for s.b[s.i] != '"' {
		if s.b[s.i] == '\\' {
			plain = false
			s.i++
		}
		s.i++
	}
	s.i++
	return plain
}

// value moves past the value at s.i.
func (s *claimScanner) value() {
	depth := 0
	for {
		switch c := s.b[s.i]; c {
		case '"':
			s.skipStr()
			if depth == 0 {
				return
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return
			}
			depth--
			if depth == 0 {
				s.i++
				return
			}
		case ',':
			if depth == 0 {
				return
			}
		}
		s.i++
		if s.i == len(s.b) {
			return
		}
	}
}
