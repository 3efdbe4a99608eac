package suite

import (
	"math/big"
	"sort"
	"time"

	"github.com/overnight-dev/overnight/harness/history"
)

// Result is a suite's outcome: the JSON of `overnight suite --json`, which
// `suite merge` reads back. Fields are only ever added.
type Result struct {
	Suite       Header         `json:"suite"`
	Runs        []RunResult    `json:"runs"`
	Groups      []Group        `json:"groups"`
	Summary     Summary        `json:"summary"`
	Requirement *Judgement     `json:"requirement,omitempty"`
	Corpus      *CorpusSummary `json:"corpus,omitempty"`
	Merged      []MergedPart   `json:"merged,omitempty"` // the shards a merged result was made of
	Errors      []string       `json:"errors,omitempty"` // harness errors, one per run that had one
	exact       map[string]exactK
}

// Header says what a suite ran and how.
type Header struct {
	ID        string        `json:"id"`
	StartedAt time.Time     `json:"started_at"`
	WallMS    int64         `json:"wall_ms"`
	Parallel  int           `json:"parallel"`
	Config    Config        `json:"config"`
	Scenarios []ScenarioRef `json:"scenarios"`
	Seeds     []int64       `json:"seeds"`
	// Plan is the fingerprint of the whole plan (scenarios, agents, seeds
	// and config): the shards of one suite share it.
	Plan string `json:"plan"`
	// Cases is how many cases the whole plan has (all shards).
	Cases int    `json:"cases"`
	Shard *Shard `json:"shard,omitempty"`
	// Interrupted: the suite was stopped (Ctrl-C) before every case ran;
	// the runs it started are resumable.
	Interrupted bool `json:"interrupted,omitempty"`
}

// ScenarioRef names a scenario of a suite.
type ScenarioRef struct {
	Name   string   `json:"name"`
	Source string   `json:"source"` // as given: a built-in name or a path
	SHA256 string   `json:"sha256"` // of the scenario's bytes
	Agents []string `json:"agents"` // the agents run ("default" for the scenario's own)
}

// RunResult is one case's run.
type RunResult struct {
	Scenario       string                    `json:"scenario"`
	Agent          string                    `json:"agent"` // "default" for the scenario's own agent
	Seed           int64                     `json:"seed"`
	RunID          string                    `json:"run_id"`
	Verdict        string                    `json:"verdict"` // pass, fail, unknown
	Reason         string                    `json:"reason"`
	Attempts       int                       `json:"attempts"`
	StepsCompleted int                       `json:"steps_completed"`
	WallMS         int64                     `json:"wall_ms"`
	VirtualMS      int64                     `json:"virtual_ms"`
	HistoryDigest  string                    `json:"history_digest,omitempty"`
	Faults         []history.FaultResult     `json:"faults"`
	Invariants     []history.InvariantResult `json:"invariants"`
	Reflections    int                       `json:"reflections,omitempty"`
	// ReplayDivergence is the first request an HTTP replay's recording
	// could not answer (Config.HTTPReplay; the run is then unknown).
	ReplayDivergence *history.ReplayDivergence `json:"replay_divergence,omitempty"`
	// Error is set when the harness could not run the case at all (the
	// verdict is then unknown): an error of the harness, not the agent's.
	Error string `json:"error,omitempty"`
	// FromCorpus: the case was re-run first because an earlier suite of
	// the same configuration saw it fail.
	FromCorpus bool `json:"from_corpus,omitempty"`
	// Counted: the run is one of its group's trials (a corpus case outside
	// the suite's seeds is run and reported, but not counted).
	Counted bool `json:"counted"`
	// Reproduce is the command that runs this case again on its own.
	Reproduce string `json:"reproduce"`
}

// Group is one scenario and agent of a suite; its counted runs (one per
// seed) are its trials.
type Group struct {
	Scenario string `json:"scenario"`
	Agent    string `json:"agent"`
	N        int    `json:"n"`
	Passes   int    `json:"passes"`
	Fails    int    `json:"fails"`
	// Unknown runs count in N and never as passes.
	Unknown int     `json:"unknown"`
	PassK   KValues `json:"pass_k"`    // pass^k for k = 1..N
	PassAtK KValues `json:"pass_at_k"` // pass@k for k = 1..N
}

// Summary is the suite as a whole: pass^k and pass@k are the means over
// the groups (tau-bench's), for k up to the smallest group's N.
type Summary struct {
	Runs    int     `json:"runs"` // counted runs
	Passes  int     `json:"passes"`
	Fails   int     `json:"fails"`
	Unknown int     `json:"unknown"`
	Groups  int     `json:"groups"`
	PassK   KValues `json:"pass_k"`
	PassAtK KValues `json:"pass_at_k"`
}

// CorpusSummary reports the corpus cases a suite re-ran first.
type CorpusSummary struct {
	Rerun     int `json:"rerun"`      // corpus cases run
	StillFail int `json:"still_fail"` // of them, not passing yet
	Fixed     int `json:"fixed"`      // of them, passing now
	Added     int `json:"added"`      // new failing cases recorded
}

// MergedPart names one shard's result in a merged result.
type MergedPart struct {
	ID    string `json:"id"`
	Shard *Shard `json:"shard,omitempty"`
	Runs  int    `json:"runs"`
}

// exactK are a group's (or the summary's) metrics as exact rationals, for
// judging requirements without rounding.
type exactK struct {
	passK, passAtK []*big.Rat
}

// AgentLabel is how the default agent ("") is named in results.
const AgentLabel = history.DefaultAgent

// Tally computes the groups and the summary from the runs.
func (r *Result) Tally() {
	type key struct{ scenario, agent string }
	by := map[key]*Group{}
	var order []key
	for _, run := range r.Runs {
		if !run.Counted {
			continue
		}
		k := key{run.Scenario, run.Agent}
		g := by[k]
		if g == nil {
			g = &Group{Scenario: run.Scenario, Agent: run.Agent}
			by[k] = g
			order = append(order, k)
		}
		g.N++
		switch run.Verdict {
		case history.VerdictPass:
			g.Passes++
		case history.VerdictFail:
			g.Fails++
		default:
			g.Unknown++
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].scenario != order[j].scenario {
			return order[i].scenario < order[j].scenario
		}
		return agentOrder(order[i].agent) < agentOrder(order[j].agent)
	})
	r.Groups = r.Groups[:0]
	r.exact = map[string]exactK{}
	r.Summary = Summary{}
	minN := 0
	for _, k := range order {
		g := by[k]
		ex := exactK{}
		for kk := 1; kk <= g.N; kk++ {
			ph, pa := PassHatK(g.N, g.Passes, kk), PassAtK(g.N, g.Passes, kk)
			ex.passK, ex.passAtK = append(ex.passK, ph), append(ex.passAtK, pa)
			g.PassK, g.PassAtK = append(g.PassK, ratFloat(ph)), append(g.PassAtK, ratFloat(pa))
		}
		r.exact[groupKey(g.Scenario, g.Agent)] = ex
		r.Groups = append(r.Groups, *g)
		r.Summary.Runs += g.N
		r.Summary.Passes += g.Passes
		r.Summary.Fails += g.Fails
		r.Summary.Unknown += g.Unknown
		if minN == 0 || g.N < minN {
			minN = g.N
		}
	}
	r.Summary.Groups = len(r.Groups)
	sum := exactK{}
	for kk := 1; kk <= minN; kk++ {
		ph, pa := new(big.Rat), new(big.Rat)
		for _, g := range r.Groups {
			ex := r.exact[groupKey(g.Scenario, g.Agent)]
			ph.Add(ph, ex.passK[kk-1])
			pa.Add(pa, ex.passAtK[kk-1])
		}
		n := big.NewRat(int64(len(r.Groups)), 1)
		ph.Quo(ph, n)
		pa.Quo(pa, n)
		sum.passK, sum.passAtK = append(sum.passK, ph), append(sum.passAtK, pa)
		r.Summary.PassK, r.Summary.PassAtK = append(r.Summary.PassK, ratFloat(ph)), append(r.Summary.PassAtK, ratFloat(pa))
	}
	r.exact[""] = sum
}

func groupKey(scenario, agent string) string { return scenario + "\x00" + agent }

// agentOrder sorts the default agent first, then the variants by name.
func agentOrder(agent string) string {
	if agent == AgentLabel {
		return ""
	}
	return "~" + agent
}

// Failed lists the runs that did not pass, in the order they are listed.
func (r *Result) Failed() []RunResult {
	var out []RunResult
	for _, run := range r.Runs {
		if run.Verdict != history.VerdictPass {
			out = append(out, run)
		}
	}
	return out
}
