package suite

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"github.com/overnight-dev/overnight/harness/history"
)

// Requirement outcomes.
const (
	Met      = "met"      // every clause holds
	Failed   = "failed"   // a clause does not hold
	Unjudged = "unjudged" // a clause cannot be judged (no runs; a k above a group's trials)
)

// ErrRequirement is wrapped by every error of ParseRequirement.
var ErrRequirement = errors.New("bad requirement")

// Requirement is a condition on a suite's result, clauses joined by &&:
//
//	pass^3>=0.9 && unknown==0
//
// A clause is METRIC OP NUMBER. METRIC is pass^K or pass@K (the suite's
// mean over its groups, K from 1 to the smallest group's number of trials),
// or a count of counted runs: runs, passes, fails, unknown. OP is one of
// >= > <= < == !=. Values are compared exactly (pass^k is a ratio of
// integers), so pass^1>=0.9 holds for 9 passes of 10.
type Requirement struct {
	Text    string
	clauses []clause
}

type clause struct {
	text   string
	metric string // pass^, pass@, runs, passes, fails, unknown
	k      int
	op     string
	value  *big.Rat
}

var clauseRE = regexp.MustCompile(`^\s*(pass\^|pass@)?([a-z]+|[0-9]+)\s*(>=|<=|==|!=|>|<)\s*([0-9]+(?:\.[0-9]+)?)\s*$`)

// ParseRequirement parses a requirement; errors say which clause is wrong
// and what is expected.
func ParseRequirement(text string) (Requirement, error) {
	req := Requirement{Text: strings.TrimSpace(text)}
	if req.Text == "" {
		return req, fmt.Errorf("%w: empty; want e.g. 'pass^3>=0.9 && unknown==0'", ErrRequirement)
	}
	for _, part := range strings.Split(text, "&&") {
		c, err := parseClause(part)
		if err != nil {
			return Requirement{}, fmt.Errorf("%w %q: %w", ErrRequirement, text, err)
		}
		req.clauses = append(req.clauses, c)
	}
	return req, nil
}

func parseClause(part string) (clause, error) {
	t := strings.TrimSpace(part)
	m := clauseRE.FindStringSubmatch(t)
	if m == nil {
		return clause{}, fmt.Errorf("clause %q: want METRIC OP NUMBER, METRIC one of pass^K, pass@K, runs, passes, fails, unknown, OP one of >= > <= < == != (e.g. pass^3>=0.9)", t)
	}
	c := clause{text: t, op: m[3]}
	v, ok := new(big.Rat).SetString(m[4])
	if !ok {
		return clause{}, fmt.Errorf("clause %q: %q is not a number", t, m[4])
	}
	c.value = v
	switch m[1] {
	case "pass^", "pass@":
		k, err := strconv.Atoi(m[2])
		if err != nil || k < 1 {
			return clause{}, fmt.Errorf("clause %q: %s needs a whole k of at least 1, as in %s3", t, m[1], m[1])
		}
		c.metric, c.k = m[1], k
		if v.Cmp(big.NewRat(1, 1)) > 0 {
			return clause{}, fmt.Errorf("clause %q: %s%d is a probability, between 0 and 1", t, m[1], k)
		}
	default:
		switch m[2] {
		case "runs", "passes", "fails", "unknown":
			c.metric = m[2]
		default:
			return clause{}, fmt.Errorf("clause %q: unknown metric %q; want pass^K, pass@K, runs, passes, fails or unknown", t, m[2])
		}
	}
	return c, nil
}

// Judgement is a requirement judged over a suite's result.
type Judgement struct {
	Expression string            `json:"expression"`
	Outcome    string            `json:"outcome"` // met, failed, unjudged
	Detail     string            `json:"detail"`
	Clauses    []ClauseJudgement `json:"clauses"`
}

// ClauseJudgement is one clause's value and outcome.
type ClauseJudgement struct {
	Clause  string   `json:"clause"`
	Value   *float64 `json:"value"` // null when it cannot be judged
	Outcome string   `json:"outcome"`
	Detail  string   `json:"detail"`
}

// Judge evaluates the requirement over res (whose groups Tally computed).
func (q Requirement) Judge(res *Result) Judgement {
	if res.exact == nil {
		res.Tally()
	}
	j := Judgement{Expression: q.Text, Outcome: Met}
	var failed, unjudged []string
	for _, c := range q.clauses {
		cj := c.judge(res)
		j.Clauses = append(j.Clauses, cj)
		switch cj.Outcome {
		case Failed:
			failed = append(failed, cj.Detail)
		case Unjudged:
			unjudged = append(unjudged, cj.Detail)
		}
	}
	switch {
	case len(failed) > 0:
		j.Outcome, j.Detail = Failed, strings.Join(failed, "; ")
	case len(unjudged) > 0:
		j.Outcome, j.Detail = Unjudged, strings.Join(unjudged, "; ")
	default:
		j.Detail = fmt.Sprintf("%s holds over %s in %s", q.Text, history.Count(res.Summary.Runs, "run"), history.Count(res.Summary.Groups, "group"))
	}
	return j
}

func (c clause) judge(res *Result) ClauseJudgement {
	cj := ClauseJudgement{Clause: c.text}
	s := res.Summary
	if s.Runs == 0 {
		cj.Outcome, cj.Detail = Unjudged, fmt.Sprintf("%s: no runs were counted", c.text)
		return cj
	}
	var value *big.Rat
	switch c.metric {
	case "pass^", "pass@":
		if short := res.groupsShorterThan(c.k); len(short) > 0 {
			cj.Outcome = Unjudged
			cj.Detail = fmt.Sprintf("%s: needs at least %d trials (seeds) per group, and %s", c.text, c.k, strings.Join(short, ", "))
			return cj
		}
		ex := res.exact[""]
		if c.metric == "pass^" {
			value = ex.passK[c.k-1]
		} else {
			value = ex.passAtK[c.k-1]
		}
	case "runs":
		value = big.NewRat(int64(s.Runs), 1)
	case "passes":
		value = big.NewRat(int64(s.Passes), 1)
	case "fails":
		value = big.NewRat(int64(s.Fails), 1)
	case "unknown":
		value = big.NewRat(int64(s.Unknown), 1)
	}
	f := ratFloat(value)
	cj.Value = &f
	if compare(value, c.op, c.value) {
		cj.Outcome, cj.Detail = Met, fmt.Sprintf("%s: %s", c.text, formatValue(c, value))
		return cj
	}
	cj.Outcome = Failed
	cj.Detail = fmt.Sprintf("%s does not hold: %s is %s", c.text, c.name(), formatValue(c, value))
	if below := res.groupsBelow(c); len(below) > 0 {
		cj.Detail += "; " + strings.Join(below, ", ")
	}
	return cj
}

func (c clause) name() string {
	if c.k > 0 {
		return c.metric + strconv.Itoa(c.k)
	}
	return c.metric
}

func formatValue(c clause, v *big.Rat) string {
	if c.k > 0 {
		return v.FloatString(4)
	}
	return v.RatString()
}

func compare(a *big.Rat, op string, b *big.Rat) bool {
	n := a.Cmp(b)
	switch op {
	case ">=":
		return n >= 0
	case ">":
		return n > 0
	case "<=":
		return n <= 0
	case "<":
		return n < 0
	case "==":
		return n == 0
	default: // !=
		return n != 0
	}
}

// groupsShorterThan names the groups with fewer than k trials.
func (r *Result) groupsShorterThan(k int) []string {
	var out []string
	for _, g := range r.Groups {
		if g.N < k {
			out = append(out, fmt.Sprintf("%s/%s has %d", g.Scenario, g.Agent, g.N))
		}
	}
	return out
}

// groupsBelow names the groups that fail clause c on their own, worst
// first: the variants that drag the suite down.
func (r *Result) groupsBelow(c clause) []string {
	var out []string
	for _, g := range r.Groups {
		var v *big.Rat
		ex := r.exact[groupKey(g.Scenario, g.Agent)]
		switch c.metric {
		case "pass^":
			v = ex.passK[c.k-1]
		case "pass@":
			v = ex.passAtK[c.k-1]
		case "fails":
			v = big.NewRat(int64(g.Fails), 1)
		case "unknown":
			v = big.NewRat(int64(g.Unknown), 1)
		default:
			continue
		}
		if !compare(v, c.op, c.value) {
			out = append(out, fmt.Sprintf("%s/%s: %s (%d of %d passed, %d failed, %d unknown)", g.Scenario, g.Agent, formatValue(c, v), g.Passes, g.N, g.Fails, g.Unknown))
		}
	}
	return out
}

// Requirements joins several requirements (repeated --require flags) into
// one, all of which must hold.
func Requirements(texts []string) (*Requirement, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	q, err := ParseRequirement(strings.Join(texts, " && "))
	if err != nil {
		return nil, err
	}
	return &q, nil
}
