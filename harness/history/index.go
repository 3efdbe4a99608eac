package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// listed is what a list of runs keeps of a run record: all but its result,
// its extension's options and the lessons of its isolation.
func listed(r RunRecord) RunRecord {
	r.Result, r.Extras = nil, nil
	if r.Isolated != nil {
		iso := *r.Isolated
		iso.Lessons = nil
		r.Isolated = &iso
	}
	return r
}

// DefaultAgent is how a filter names a scenario's own agent (Agent "").
const DefaultAgent = "default"

// RunQuery selects runs from a RunIndex: every filter that is set must
// match.
type RunQuery struct {
	Scenario string `json:"scenario,omitempty"`
	Agent    string `json:"agent,omitempty"` // DefaultAgent for a scenario's own
	// Verdict is pass, fail or unknown, or VerdictNone for a run without
	// one.
	Verdict string `json:"verdict,omitempty"`
	Status  string `json:"status,omitempty"`
	Seed    *int64 `json:"seed,omitempty"`
	// Isolated includes the isolated re-runs reflections made (listed
	// otherwise under their parent only).
	Isolated bool `json:"isolated,omitempty"`
	Offset   int  `json:"offset,omitempty"`
	Limit    int  `json:"limit,omitempty"` // 0: DefaultPage
}

// DefaultPage is a RunQuery's Limit when it sets none; MaxPage bounds it.
const (
	DefaultPage = 50
	MaxPage     = 1000
)

// RunPage is one page of a RunQuery's answer, newest run first.
type RunPage struct {
	// Runs are the page's run records, without their results (listed).
	Runs    []RunRecord `json:"runs"`
	Matched int         `json:"matched"` // runs that match the query
	Total   int         `json:"total"`   // runs in the state dir
	Offset  int         `json:"offset"`
	Limit   int         `json:"limit"`
	// Scenarios and Agents are every value the filters can take.
	Scenarios []string `json:"scenarios"`
	Agents    []string `json:"agents"`
}

// RunIndex keeps the headers of a state dir's runs in memory between
// reads, so that a list of thousands of runs (the viewer's) is answered
// without decoding every run record each time. It is refreshed from a
// Reader: a Writer that Tracks it tells it which runs it wrote (the
// owner's index reads only those again); an untracked index (a viewer's
// between two looks at a journal nobody owns) does nothing while the
// journal's version stands, and otherwise decodes again only the run
// records whose version moved. Safe for concurrent use.
type RunIndex struct {
	mu      sync.Mutex
	loaded  bool
	version uint64 // the journal's, when the index was last synced
	byID    map[string]indexedHeader
	list    []RunRecord // newest first; nil: to be sorted again
	facets  [2][]string // scenarios, agents

	tracked bool
	dmu     sync.Mutex
	dirty   map[string]bool
}

// indexedHeader is a run's record as listed, and the version of the
// record it was read from.
type indexedHeader struct {
	RunRecord
	version uint64
}

// NewRunIndex returns an empty index; the first Refresh fills it.
func NewRunIndex() *RunIndex {
	return &RunIndex{dirty: map[string]bool{}, byID: map[string]indexedHeader{}}
}

// Track makes w tell ix of every run record it writes: an index the owner
// of a state dir keeps reads again only those.
func (w *Writer) Track(ix *RunIndex) {
	ix.dmu.Lock()
	ix.tracked = true
	ix.dmu.Unlock()
	w.index = ix
}

// touched marks runs written (or maybe written: a failed commit's outcome
// is unknown) after the commit returned, so a Refresh after it reads them.
func (ix *RunIndex) touched(ids []string) {
	ix.dmu.Lock()
	for _, id := range ids {
		ix.dirty[id] = true
	}
	ix.dmu.Unlock()
}

// Refresh brings the index up to date with what r reads.
func (ix *RunIndex) Refresh(r *Reader) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.dmu.Lock()
	dirty, tracked := ix.dirty, ix.tracked
	ix.dirty = map[string]bool{}
	ix.dmu.Unlock()
	if !ix.loaded || !tracked {
		return ix.sync(r)
	}
	for id := range dirty {
		rec, err := r.Run(id)
		switch {
		case errors.Is(err, ErrRunNotFound):
			delete(ix.byID, id)
		case err != nil:
			ix.touched([]string{id}) // read it again next time
			return err
		default:
			ix.byID[id] = indexedHeader{RunRecord: listed(rec)}
		}
		ix.list = nil
	}
	return nil
}

// sync reads again the run records whose version moved since the last
// sync, and forgets the runs that are gone; ix.mu is held.
func (ix *RunIndex) sync(r *Reader) error {
	version, err := r.j.Version()
	if err != nil {
		return err
	}
	if ix.loaded && version == ix.version {
		return nil
	}
	ix.loaded = false // until this sync completes
	seen := make(map[string]bool, len(ix.byID))
	err = r.j.Versions([]byte(prefixRun), func(k []byte, ver uint64, value func() ([]byte, error)) error {
		id := string(k[len(prefixRun):])
		seen[id] = true
		if old, ok := ix.byID[id]; ok && old.version == ver {
			return nil
		}
		v, err := value()
		if err != nil {
			return fmt.Errorf("read %s: %w", k, err)
		}
		var rec indexedRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("decode %s: %w", k, err)
		}
		ix.byID[id] = indexedHeader{listed(rec.RunRecord), ver}
		ix.list = nil
		return nil
	})
	if err != nil {
		return fmt.Errorf("read runs: %w", err)
	}
	for id := range ix.byID {
		if !seen[id] {
			delete(ix.byID, id)
			ix.list = nil
		}
	}
	ix.loaded, ix.version = true, version
	return nil
}

// indexedRecord is a run record decoded without what a header does not
// show: the result and the extension's options are skipped, not decoded.
type indexedRecord struct {
	RunRecord
	Result json.RawMessage `json:"result,omitempty"`
	Extras json.RawMessage `json:"extras,omitempty"`
}

// Query answers q, newest run first; live says whether a run recorded as
// running is driven by a live process (one that is not is shown
// interrupted: its harness died).
func (ix *RunIndex) Query(q RunQuery, live func(runID string) bool) RunPage {
	ix.mu.Lock()
	list, facets := ix.sorted()
	total := len(ix.byID)
	ix.mu.Unlock()
	if q.Limit <= 0 {
		q.Limit = DefaultPage
	}
	q.Limit = min(q.Limit, MaxPage)
	q.Offset = max(q.Offset, 0)
	page := RunPage{Runs: []RunRecord{}, Total: total, Offset: q.Offset, Limit: q.Limit, Scenarios: facets[0], Agents: facets[1]}
	for _, h := range list {
		if h.Status == StatusRunning && (live == nil || !live(h.ID)) {
			h.Status = StatusInterrupted
		}
		if !q.matches(h) {
			continue
		}
		if page.Matched >= q.Offset && len(page.Runs) < q.Limit {
			page.Runs = append(page.Runs, h)
		}
		page.Matched++
	}
	return page
}

// sorted returns the headers newest first, and the filters' values;
// ix.mu is held.
func (ix *RunIndex) sorted() ([]RunRecord, [2][]string) {
	if ix.list == nil {
		list := make([]RunRecord, 0, len(ix.byID))
		scenarios, agents := map[string]bool{}, map[string]bool{}
		for _, h := range ix.byID {
			list = append(list, h.RunRecord)
			scenarios[h.Scenario] = true
			agents[AgentLabel(h.Agent)] = true
		}
		sort.Slice(list, func(i, k int) bool {
			if !list[i].StartedAt.Equal(list[k].StartedAt) {
				return list[i].StartedAt.After(list[k].StartedAt)
			}
			return list[i].ID > list[k].ID
		})
		ix.list = list
		ix.facets = [2][]string{sortedSet(scenarios), sortedSet(agents)}
	}
	return ix.list, ix.facets
}

func (q RunQuery) matches(h RunRecord) bool {
	verdict := h.Verdict
	if verdict == "" {
		verdict = VerdictNone
	}
	return (q.Isolated || h.Isolated == nil) &&
		(q.Scenario == "" || q.Scenario == h.Scenario) &&
		(q.Agent == "" || q.Agent == AgentLabel(h.Agent)) &&
		(q.Verdict == "" || q.Verdict == verdict) &&
		(q.Status == "" || q.Status == h.Status) &&
		(q.Seed == nil || *q.Seed == h.Seed)
}

// AgentLabel names an agent as filters, suites and reports do: the
// scenario's own agent ("") is DefaultAgent.
func AgentLabel(agent string) string {
	if agent == "" {
		return DefaultAgent
	}
	return agent
}

func sortedSet(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// runIDs lists the runs whose records entries write.
func runIDs(entries []Entry) []string {
	var ids []string
	for _, e := range entries {
		if id, ok := bytes.CutPrefix(e.key, []byte(prefixRun)); ok {
			ids = append(ids, string(id))
		}
	}
	return ids
}

// RunReflection is a reflection with the run it belongs to.
type RunReflection struct {
	RunID    string `json:"run_id"`
	Scenario string `json:"scenario"`
	Agent    string `json:"agent,omitempty"`
	ReflectionRecord
}

// AllReflections returns every reflection of every run, newest run first.
func (r *Reader) AllReflections() ([]RunReflection, error) {
	var out []RunReflection
	err := r.j.Scan([]byte(prefixReflection), func(k, v []byte) error {
		var rr RunReflection
		if err := json.Unmarshal(v, &rr.ReflectionRecord); err != nil {
			return fmt.Errorf("decode %s: %w", k, err)
		}
		rest := strings.TrimPrefix(string(k), prefixReflection)
		rr.RunID = rest[:strings.LastIndexByte(rest, '/')]
		out = append(out, rr)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read reflections: %w", err)
	}
	runs := map[string]RunRecord{}
	for i := range out {
		rec, ok := runs[out[i].RunID]
		if !ok {
			if rec, err = r.Run(out[i].RunID); err != nil && !errors.Is(err, ErrRunNotFound) {
				return nil, err
			}
			runs[out[i].RunID] = rec
		}
		out[i].Scenario, out[i].Agent = rec.Scenario, rec.Agent
	}
	sort.SliceStable(out, func(i, k int) bool { return out[i].RunID > out[k].RunID })
	return out, nil
}

// Values encodes q as URL query parameters (scenario, agent, verdict,
// status, seed, isolated, offset, limit), the ones ParseRunQuery reads: a
// viewer's links and the control socket's requests carry queries so.
func (q RunQuery) Values() url.Values {
	v := url.Values{}
	for _, p := range [][2]string{{"scenario", q.Scenario}, {"agent", q.Agent}, {"verdict", q.Verdict}, {"status", q.Status}} {
		if p[1] != "" {
			v.Set(p[0], p[1])
		}
	}
	if q.Seed != nil {
		v.Set("seed", strconv.FormatInt(*q.Seed, 10))
	}
	if q.Isolated {
		v.Set("isolated", "1")
	}
	if q.Offset > 0 {
		v.Set("offset", strconv.Itoa(q.Offset))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// ParseRunQuery reads a RunQuery from URL query parameters (see Values);
// an empty parameter is no filter.
func ParseRunQuery(v url.Values) (RunQuery, error) {
	q := RunQuery{Scenario: v.Get("scenario"), Agent: v.Get("agent"), Verdict: v.Get("verdict"), Status: v.Get("status"),
		Isolated: v.Get("isolated") == "1" || v.Get("isolated") == "true"}
	var err error
	if s := strings.TrimSpace(v.Get("seed")); s != "" {
		seed, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil {
			return q, fmt.Errorf("seed %q: want a whole number", s)
		}
		q.Seed = &seed
	}
	for _, p := range []struct {
		name string
		dst  *int
	}{{"offset", &q.Offset}, {"limit", &q.Limit}} {
		if s := v.Get(p.name); s != "" {
			if *p.dst, err = strconv.Atoi(s); err != nil || *p.dst < 0 {
				return q, fmt.Errorf("%s %q: want a whole number, 0 or more", p.name, s)
			}
		}
	}
	return q, nil
}
