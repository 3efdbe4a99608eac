package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrShrinkBudget is returned (wrapped) when Shrink ran out of runs; the
// result so far is still returned and still fails.
var ErrShrinkBudget = errors.New("shrink: run budget used up")

// Oracle runs a candidate schedule and reports whether it still fails the
// same way. An error stops the shrink.
type Oracle func(ctx context.Context, faults []Spec) (fails bool, err error)

// ShrinkResult is the smallest failing schedule found.
type ShrinkResult struct {
	Faults []Spec
	Runs   int // candidates run (not counting ones answered from the cache)
}

// Shrink reduces a failing schedule to a smaller one that still fails:
// first delta debugging (ddmin) over the list of faults, then, fault by
// fault, shorter durations (halved, down to a minute) and earlier triggers
// (a smaller step or effect number, half the virtual time). Every
// candidate is run through test at most once; maxRuns bounds the runs.
// faults itself is assumed to fail.
func Shrink(ctx context.Context, faults []Spec, test Oracle, maxRuns int) (ShrinkResult, error) {
	s := shrinker{test: test, max: maxRuns, seen: map[string]bool{}}
	cur := append([]Spec(nil), faults...)
	s.seen[key(cur)] = true

	var err error
	if cur, err = s.ddmin(ctx, cur); err != nil {
		return ShrinkResult{Faults: cur, Runs: s.runs}, err
	}
	for i := range cur {
		for _, smaller := range []func(Spec) (Spec, bool){shorter, earlier} {
			for {
				cand, ok := smaller(cur[i])
				if !ok {
					break
				}
				next := append(append(append([]Spec(nil), cur[:i]...), cand), cur[i+1:]...)
				fails, err := s.try(ctx, next)
				if err != nil {
					return ShrinkResult{Faults: cur, Runs: s.runs}, err
				}
				if !fails {
					break
				}
				cur = next
			}
		}
	}
	return ShrinkResult{Faults: cur, Runs: s.runs}, nil
}

type shrinker struct {
	test Oracle
	max  int
	runs int
	seen map[string]bool // candidate -> fails
}

func key(fs []Spec) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.String()
	}
	return strings.Join(parts, " ")
}

func (s *shrinker) try(ctx context.Context, cand []Spec) (bool, error) {
	k := key(cand)
	if fails, ok := s.seen[k]; ok {
		return fails, nil
	}
	if s.runs >= s.max {
		return false, fmt.Errorf("%w (%d runs)", ErrShrinkBudget, s.max)
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.runs++
	fails, err := s.test(ctx, cand)
	if err != nil {
		return false, err
	}
	s.seen[k] = fails
	return fails, nil
}

// ddmin is Zeller's delta debugging: the smallest sublist (1-minimal) that
// still fails.
func (s *shrinker) ddmin(ctx context.Context, cur []Spec) ([]Spec, error) {
	n := 2
	for len(cur) >= 2 {
		chunks := split(cur, n)
		reduced := false
		for _, c := range chunks {
			fails, err := s.try(ctx, c)
			if err != nil {
				return cur, err
			}
			if fails {
				cur, n, reduced = c, 2, true
				break
			}
		}
		if !reduced && n > 2 {
			for i := range chunks {
				comp := complement(chunks, i)
				fails, err := s.try(ctx, comp)
				if err != nil {
					return cur, err
				}
				if fails {
					cur, n, reduced = comp, max(n-1, 2), true
					break
				}
			}
		}
		if !reduced {
			if n >= len(cur) {
				break
			}
			n = min(2*n, len(cur))
		}
	}
	if len(cur) == 1 {
		// The empty schedule is the last thing to rule out.
		fails, err := s.try(ctx, []Spec{})
		if err != nil {
			return cur, err
		}
		if fails {
			return []Spec{}, nil
		}
	}
	return cur, nil
}

func split(xs []Spec, n int) [][]Spec {
	var out [][]Spec
	size, rest := len(xs)/n, len(xs)%n
	start := 0
	for i := 0; i < n; i++ {
		end := start + size
		if i < rest {
			end++
		}
		out = append(out, xs[start:end])
		start = end
	}
	return out
}

func complement(chunks [][]Spec, skip int) []Spec {
	var out []Spec
	for i, c := range chunks {
		if i != skip {
			out = append(out, c...)
		}
	}
	return out
}

// shorter halves a fault's duration, down to a minute.
func shorter(s Spec) (Spec, bool) {
	if s.Duration <= time.Minute {
		return s, false
	}
	s.Duration = max((s.Duration / 2).Truncate(time.Second), time.Minute)
	return s, true
}

// earlier moves a fault's trigger earlier: a smaller step, effect or LLM
// call number, or half the virtual time (whole seconds).
func earlier(s Spec) (Spec, bool) {
	switch s.Trigger.Type {
	case TriggerStep, TriggerEffect, TriggerLLM:
		if s.Trigger.N <= 1 {
			return s, false
		}
		s.Trigger.N--
	case TriggerTime:
		if s.Trigger.At < 2*time.Second {
			return s, false
		}
		s.Trigger.At = (s.Trigger.At / 2).Truncate(time.Second)
	default:
		return s, false
	}
	return s, true
}
