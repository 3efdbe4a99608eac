package suite

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
)

// withCorpus puts first the cases of the plan an earlier suite of the same
// configuration saw fail, adding those outside the plan's seeds as extra
// (run, not counted) cases — for the plan's scenarios and agents only, and
// only those its shard owns. It returns the corpus by case ID.
func withCorpus(h *harness.Harness, plan *Plan, cases []Case, config string) ([]Case, map[string]history.CorpusRecord, error) {
	recs, err := h.History().Corpus(config)
	if err != nil {
		return nil, nil, err
	}
	corpus := map[string]history.CorpusRecord{}
	agents := map[string][]string{}
	for _, s := range plan.Scenarios {
		agents[s.Name] = s.Agents
	}
	index := map[string]int{}
	for i, c := range cases {
		index[c.ID()] = i
	}
	var first []Case
	for _, rec := range recs {
		c := Case{Scenario: rec.Scenario, Agent: rec.Agent, Seed: rec.Seed, FromCorpus: true}
		corpus[c.ID()] = rec
		if !rec.Failing() || !slices.Contains(agents[rec.Scenario], history.AgentLabel(rec.Agent)) {
			continue
		}
		if i, ok := index[c.ID()]; ok {
			cases[i].FromCorpus = true
			continue
		}
		if plan.Shard != nil && !plan.Shard.Owns(c) {
			continue
		}
		c.Extra = true
		first = append(first, c)
	}
	// The corpus's cases first (the planned ones in plan order), then the rest.
	var rest []Case
	for _, c := range cases {
		if c.FromCorpus {
			first = append(first, c)
		} else {
			rest = append(rest, c)
		}
	}
	return append(first, rest...), corpus, nil
}

// recordCorpus keeps a case's outcome in the corpus: a failure (or an
// unknown) is added or counted, a pass marks a corpus case fixed.
func recordCorpus(ctx context.Context, h *harness.Harness, corpus map[string]history.CorpusRecord, config, source string, c Case, rr RunResult) error {
	rec, known := corpus[c.ID()]
	pass := rr.Verdict == history.VerdictPass
	if pass && (!known || !rec.Failing()) {
		return nil
	}
	now := time.Now().UTC()
	if !known {
		rec = history.CorpusRecord{Config: config, Scenario: c.Scenario, Agent: c.Agent, Seed: c.Seed, FirstSeen: now}
	}
	rec.Source, rec.Verdict, rec.Reason, rec.RunID, rec.LastSeen = source, rr.Verdict, rr.Reason, rr.RunID, now
	if !pass {
		rec.Failures++
	}
	if err := h.Writer().Put(context.WithoutCancel(ctx), history.CorpusEntry(rec)); err != nil {
		return fmt.Errorf("record %s in the failing-seed corpus: %w", c.ID(), err)
	}
	corpus[c.ID()] = rec
	return nil
}

// corpusSummary counts what the corpus did in a suite; corpus holds the
// records as they are after it.
func corpusSummary(runs []RunResult, corpus map[string]history.CorpusRecord) *CorpusSummary {
	s := &CorpusSummary{}
	for _, r := range runs {
		if r.Error != "" {
			continue
		}
		if r.FromCorpus {
			s.Rerun++
			if r.Verdict == history.VerdictPass {
				s.Fixed++
			} else {
				s.StillFail++
			}
		} else if r.Verdict != history.VerdictPass {
			s.Added++
		}
	}
	return s
}
