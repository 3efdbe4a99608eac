package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Key spaces of suites: their results and the failing-seed corpus.
const (
	prefixSuite  = "suite/"  // suite/<id> -> SuiteRecord (rewritten as it goes on)
	prefixCorpus = "corpus/" // corpus/<config>/<scenario>/<agent>/<seed> -> CorpusRecord (across suites)
)

// ErrSuiteNotFound is returned for a suite id the journal does not hold.
var ErrSuiteNotFound = errors.New("no such suite")

// SuiteRecord is one `overnight suite` invocation in a state dir: when it
// ran and its result as the suite package writes it (the JSON of
// `suite --json`), kept opaque here so that the schema of a suite's result
// stays the suite package's.
type SuiteRecord struct {
	ID        string          `json:"id"`
	StartedAt time.Time       `json:"started_at"`
	EndedAt   time.Time       `json:"ended_at,omitzero"` // zero while it runs (or when its process died)
	Result    json.RawMessage `json:"result,omitempty"`
}

// CorpusRecord is a case a suite saw fail: re-run first by the next suite
// of the same configuration (Config, a fingerprint of the run flags) that
// includes its scenario and agent, until it passes.
type CorpusRecord struct {
	Config   string `json:"config"`
	Scenario string `json:"scenario"`
	// Source is how the scenario was named (a built-in name or a path), so
	// the next suite can find it again.
	Source    string    `json:"source"`
	Agent     string    `json:"agent"` // "" for the default agent
	Seed      int64     `json:"seed"`
	Verdict   string    `json:"verdict"` // the last verdict seen: fail, unknown — or pass, once fixed
	Reason    string    `json:"reason,omitempty"`
	RunID     string    `json:"run_id"` // the run that gave Verdict
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	Failures  int       `json:"failures"` // runs of the case that did not pass
}

// Failing reports whether the case still fails: the last run of it did not
// pass.
func (c CorpusRecord) Failing() bool { return c.Verdict != VerdictPass }

// SuiteEntry is a suite's record.
func SuiteEntry(s SuiteRecord) Entry { return Entry{[]byte(prefixSuite + s.ID), s} }

// CorpusEntry is a case of the failing-seed corpus.
func CorpusEntry(c CorpusRecord) Entry {
	return Entry{[]byte(fmt.Sprintf("%s%s/%s/%s/%020d", prefixCorpus, c.Config, c.Scenario, agentKey(c.Agent), uint64(c.Seed))), c}
}

// Suites returns the state dir's suites, newest first.
func (r *Reader) Suites() ([]SuiteRecord, error) {
	ss, err := scan[SuiteRecord](r.j, []byte(prefixSuite))
	if err != nil {
		return nil, fmt.Errorf("read suites: %w", err)
	}
	sort.SliceStable(ss, func(i, k int) bool { return ss[i].StartedAt.After(ss[k].StartedAt) })
	return ss, nil
}

// Suite returns one suite's record.
func (r *Reader) Suite(id string) (SuiteRecord, bool, error) {
	var s SuiteRecord
	found, err := get(r.j, []byte(prefixSuite+id), &s)
	if err != nil {
		return s, false, fmt.Errorf("read suite %s: %w", id, err)
	}
	return s, found, nil
}

// Corpus returns the corpus of a configuration: every case suites of it
// saw fail, in scenario, agent and seed order.
func (r *Reader) Corpus(config string) ([]CorpusRecord, error) {
	cs, err := scan[CorpusRecord](r.j, []byte(prefixCorpus+config+"/"))
	if err != nil {
		return nil, fmt.Errorf("read the failing-seed corpus: %w", err)
	}
	return cs, nil
}
