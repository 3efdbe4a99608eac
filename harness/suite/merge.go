package suite

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// ErrMerge is wrapped by every error of Merge: parts that are not the
// shards of one suite, or not all of them.
var ErrMerge = errors.New("cannot merge")

// ReadResult reads a suite's JSON result from a file.
func ReadResult(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read suite result: %w", err)
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%w: %s is not a suite's JSON result (overnight suite --json): %w", ErrMerge, path, err)
	}
	if r.Suite.ID == "" || r.Suite.Plan == "" {
		return nil, fmt.Errorf("%w: %s is not a suite's JSON result (no suite.id or suite.plan)", ErrMerge, path)
	}
	return &r, nil
}

// Merge combines the results of a suite's shards (each `suite --shard i/n
// --json`) into one result of the whole suite, judged as one: the parts
// must share their plan, and every shard 1..n must be there exactly once.
// names label the parts in errors (file names, say).
func Merge(parts []*Result, names []string) (*Result, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: no results given", ErrMerge)
	}
	label := func(i int) string {
		if i < len(names) {
			return names[i]
		}
		return parts[i].Suite.ID
	}
	first := parts[0].Suite
	count := 0
	if first.Shard != nil {
		count = first.Shard.Count
	}
	seen := map[int]int{}
	for i, p := range parts {
		s := p.Suite
		if s.Plan != first.Plan {
			return nil, fmt.Errorf("%w: %s is of another suite (plan %s, not %s): its scenarios, agents, seeds or run flags differ", ErrMerge, label(i), s.Plan, first.Plan)
		}
		switch {
		case s.Shard == nil && count != 0, s.Shard != nil && s.Shard.Count != count:
			return nil, fmt.Errorf("%w: %s is %s, %s is %s: shards of one split only", ErrMerge, label(0), shardName(first.Shard), label(i), shardName(s.Shard))
		case s.Shard == nil && len(parts) > 1:
			return nil, fmt.Errorf("%w: %s is a whole suite (no --shard): nothing to merge it with", ErrMerge, label(i))
		case s.Shard != nil:
			if j, dup := seen[s.Shard.Index]; dup {
				return nil, fmt.Errorf("%w: shard %s is given twice (%s and %s)", ErrMerge, s.Shard, label(j), label(i))
			}
			seen[s.Shard.Index] = i
		}
	}
	var missing []string
	for k := 1; k <= count; k++ {
		if _, ok := seen[k]; !ok {
			missing = append(missing, fmt.Sprintf("%d/%d", k, count))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: shard %s missing: the requirement is judged over the whole suite", ErrMerge, strings.Join(missing, ", "))
	}

	out := &Result{Suite: first}
	out.Suite.ID = "merged-" + first.Plan
	out.Suite.Shard = nil
	out.Suite.StartedAt = first.StartedAt
	var ended time.Time
	cases := map[string]string{}
	for i, p := range parts {
		s := p.Suite
		if s.StartedAt.Before(out.Suite.StartedAt) {
			out.Suite.StartedAt = s.StartedAt
		}
		if end := s.StartedAt.Add(time.Duration(s.WallMS) * time.Millisecond); end.After(ended) {
			ended = end
		}
		out.Suite.Interrupted = out.Suite.Interrupted || s.Interrupted
		out.Merged = append(out.Merged, MergedPart{ID: s.ID, Shard: s.Shard, Runs: len(p.Runs)})
		for _, r := range p.Runs {
			if !r.Counted {
				out.Runs = append(out.Runs, r)
				continue
			}
			id := Case{Scenario: r.Scenario, Agent: r.Agent, Seed: r.Seed}.ID()
			if prev, dup := cases[id]; dup {
				return nil, fmt.Errorf("%w: case %s is in both %s and %s", ErrMerge, id, prev, label(i))
			}
			cases[id] = label(i)
			out.Runs = append(out.Runs, r)
		}
		out.Errors = append(out.Errors, p.Errors...)
		if p.Corpus != nil {
			if out.Corpus == nil {
				out.Corpus = &CorpusSummary{}
			}
			out.Corpus.Rerun += p.Corpus.Rerun
			out.Corpus.StillFail += p.Corpus.StillFail
			out.Corpus.Fixed += p.Corpus.Fixed
			out.Corpus.Added += p.Corpus.Added
		}
	}
	out.Suite.WallMS = ended.Sub(out.Suite.StartedAt).Milliseconds()
	sortRuns(out.Runs, out.Suite.Scenarios)
	out.Tally()
	return out, nil
}

func shardName(s *Shard) string {
	if s == nil {
		return "a whole suite"
	}
	return "shard " + s.String()
}

// sortRuns puts runs in plan order: corpus extras first, then scenarios as
// the suite lists them, agents (default first), seeds.
func sortRuns(runs []RunResult, scens []ScenarioRef) {
	order := map[string]int{}
	for i, s := range scens {
		order[s.Name] = i
	}
	sort.SliceStable(runs, func(i, j int) bool {
		a, b := runs[i], runs[j]
		if a.Counted != b.Counted {
			return !a.Counted
		}
		if a.Scenario != b.Scenario {
			return order[a.Scenario] < order[b.Scenario]
		}
		if a.Agent != b.Agent {
			return agentOrder(a.Agent) < agentOrder(b.Agent)
		}
		return a.Seed < b.Seed
	})
}
