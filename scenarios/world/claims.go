package world

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Claim is one thing an agent says about the world, sent with a checkpoint
// or with done: a name saying what kind of claim it is, and its value — the
// claim {"exists": {"kind": "database", "name": "prod-db"}} has Name
// "exists". Who understands a name judges it: the scenario's CEL
// expression of that name, else the world (ClaimChecker).
type Claim struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
	// valid: Value is a slice of claims ParseClaims checked, so
	// DecodeValue need not check it again.
	valid bool
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
	var buf [4]ClaimChecker // most worlds have one: no allocation per claim
	for _, cc := range claimCheckers(w, buf[:0]) {
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

// claimCheckers appends to out what can judge claims about w, in the order
// asked.
func claimCheckers(w World, out []ClaimChecker) []ClaimChecker {
	if cc, ok := w.(ClaimChecker); ok {
		return append(out, cc)
	}
	if cc, ok := ModelOf(w).(ClaimChecker); ok {
		return append(out, cc)
	}
	r := RouterOf(w)
	if r == nil {
		return out
	}
	if base := r.base(); base != nil {
		out = claimCheckers(base, out)
	}
	for _, rt := range r.routes {
		if rt.Prefix != "" {
			out = claimCheckers(rt.World, out)
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
	out := make([]Claim, 0, 4) // a checkpoint's claims are few
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

// ClaimField is one member a ClaimChecker reads from a claim's value
// (Claim.DecodeValue): its name, and where its value goes — a string or an
// integer. Make one with StringField or IntField.
type ClaimField struct {
	Name string
	str  *string
	num  *int
}

// StringField is the claim's member name, a JSON string (null leaves *to
// as it is).
func StringField(name string, to *string) ClaimField { return ClaimField{Name: name, str: to} }

// IntField is the claim's member name, a JSON integer (null leaves *to as
// it is).
func IntField(name string, to *int) ClaimField { return ClaimField{Name: name, num: to} }

// errNotObject is DecodeValue's error for a value that is not an
// object.
var errNotObject = errors.New("not a JSON object")

// DecodeValue reads the claim's value, a JSON object such as
// {"kind": "database", "name": "prod-db"}, into fields, as json.Unmarshal
// into a struct with those fields would: names match case-insensitively,
// members it does not name are ignored, a member written twice keeps its
// last value, and a member of the wrong type is an error. A value that is
// not an object is an error.
//
// A ClaimChecker runs on every checkpoint that carries claims: this reads
// the value with the claims' scanner, without reflection, and a claim
// from ParseClaims is not checked for being JSON twice.
func (c Claim) DecodeValue(fields ...ClaimField) error {
	value := bytes.TrimSpace(c.Value)
	if len(value) == 0 || value[0] != '{' || !c.valid && !json.Valid(value) {
		return errNotObject
	}
	s := claimScanner{b: value, i: 1}
	for {
		s.space()
		if s.b[s.i] == '}' {
			return nil
		}
		nameStart := s.i
		plain := s.skipStr()
		quoted := s.b[nameStart:s.i]
		name := quoted[1 : len(quoted)-1]
		v := s.memberValue()
		if f := fieldNamed(fields, name, plain, quoted); f != nil {
			if err := f.set(v); err != nil {
				// A copy of the name: f.Name itself in the error would move
				// the callers' variables that fields point to to the heap.
				return fmt.Errorf("%s: %w", strings.Clone(f.Name), err)
			}
		}
		s.space()
		if s.b[s.i] == ',' {
			s.i++
		}
	}
}

// fieldNamed is the field a member's name (its text between the quotes,
// plain when it has no escapes; quoted, the whole JSON string) matches:
// exactly, or else case-insensitively.
func fieldNamed(fields []ClaimField, name []byte, plain bool, quoted []byte) *ClaimField {
	if !plain {
		var n string
		if json.Unmarshal(quoted, &n) != nil {
			return nil
		}
		name = []byte(n)
	}
	for i := range fields {
		if string(name) == fields[i].Name {
			return &fields[i]
		}
	}
	for i := range fields {
		if bytes.EqualFold(name, []byte(fields[i].Name)) {
			return &fields[i]
		}
	}
	return nil
}

// set decodes v, a valid JSON value, into f.
func (f *ClaimField) set(v []byte) error {
	if string(v) == "null" {
		return nil
	}
	switch {
	case f.str != nil:
		if v[0] != '"' {
			return fmt.Errorf("want a string, not %.20s", v)
		}
		if plainASCII(v) {
			*f.str = string(v[1 : len(v)-1])
			return nil
		}
		var str string // escapes, or bytes json turns into U+FFFD; not into f.str, which would move every caller's string to the heap
		if err := json.Unmarshal(v, &str); err != nil {
			return err
		}
		*f.str = str
	case f.num != nil:
		n, err := strconv.Atoi(string(v))
		if err != nil {
			return fmt.Errorf("want an integer, not %.20s", v)
		}
		*f.num = n
	}
	return nil
}

// plainASCII reports whether the JSON string s is ASCII with no escapes:
// its text between the quotes is its value.
func plainASCII(s []byte) bool {
	for _, c := range s {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
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
		name, err := s.name(out)
		if err != nil {
			return nil, fmt.Errorf("claims[%d]: %w", idx, err)
		}
		if name == "" {
			return nil, fmt.Errorf("claims[%d]: a claim needs a name", idx)
		}
		out = append(out, Claim{Name: name, Value: s.memberValue(), valid: true})
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

// name reads the claim name at s.i: the string of an earlier claim in
// out when it is the same (a list of claims of one kind allocates its name
// once).
func (s *claimScanner) name(out []Claim) (string, error) {
	start := s.i
	if plain := s.skipStr(); plain {
		b := s.b[start+1 : s.i-1]
		for i := len(out) - 1; i >= 0; i-- {
			if out[i].Name == string(b) {
				return out[i].Name, nil
			}
		}
		return string(b), nil
	}
	s.i = start
	return s.str()
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

// memberValue moves past the colon at s.i and the value after it, and
// returns that value (a slice of s.b, capped).
func (s *claimScanner) memberValue() json.RawMessage {
	s.space()
	s.i++ // :
	s.space()
	start := s.i
	s.value()
	end := s.i
	for isSpace(s.b[end-1]) {
		end--
	}
	return json.RawMessage(s.b[start:end:end])
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
