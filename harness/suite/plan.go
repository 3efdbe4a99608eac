package suite

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/scenarios"
)

// ErrPlan is wrapped by errors of a suite's plan: its scenarios, agents,
// seeds or shard.
var ErrPlan = errors.New("bad suite")

// Config is what every run of a suite shares: the run flags of `overnight
// run`, applied to each case.
type Config struct {
	// Faults replaces each scenario's fault list when not nil (an empty
	// list: no faults); nil keeps each scenario's own.
	Faults []string `json:"faults"`
	// RandomFaults > 0 draws that many faults from each run's seed
	// (--chaos random) instead.
	RandomFaults int `json:"random_faults,omitempty"`
	// RandomKinds, when not empty, are the only kinds RandomFaults draws
	// (--chaos-kinds), overriding each scenario's reach.kinds.
	RandomKinds []string `json:"random_kinds,omitempty"`
	// LLM is the model of every run ("": each scenario's).
	LLM string `json:"llm,omitempty"`
	// World is the base URL of a world served over the world protocol that
	// every run acts on instead of its scenario's (--world; "": each
	// scenario's).
	World string `json:"world,omitempty"`
	// HTTPReplay, when set, names a run whose exchanges with its HTTP APIs
	// answer every run's requests to every HTTP API (--http-replay: mode
	// replay, nothing sent upstream; harness.RunRequest.HTTPReplay). Every
	// scenario of the suite must declare an HTTP API.
	HTTPReplay string `json:"http_replay,omitempty"`
	// MCPReplay, when set, names a run whose recording of its MCP servers
	// answers every run's tools/call (--mcp-replay: no server started or
	// reached; harness.RunRequest.MCPReplay). Every scenario of the suite
	// must declare an MCP server.
	MCPReplay string `json:"mcp_replay,omitempty"`
	// Timeout and MaxAttempts override each scenario's limits when > 0.
	Timeout     time.Duration `json:"timeout,omitempty"`
	MaxAttempts int           `json:"max_attempts,omitempty"`
	// Extras are the run extension's options, each also a flag of
	// `overnight run` (--KEY VALUE): the reflection loop's lessons, which
	// suites set to "none" so that trials stay independent.
	Extras map[string]string `json:"extras,omitempty"`
}

// fingerprint identifies the configuration (the corpus is kept per
// configuration).
func (c Config) fingerprint() string {
	js, _ := json.Marshal(c)
	s := sha256.Sum256(js)
	return hex.EncodeToString(s[:8])
}

// faultSpecs parses Faults (nil stays nil).
func (c Config) faultSpecs() ([]chaos.Spec, error) {
	if c.Faults == nil {
		return nil, nil
	}
	out := []chaos.Spec{}
	for _, t := range c.Faults {
		s, err := chaos.ParseSpec(t)
		if err != nil {
			return nil, fmt.Errorf("fault %q: %w", t, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// Spec is a suite as a user gives it.
type Spec struct {
	// Scenarios are what a user typed: built-in names, scenario files, or
	// directories (every *.yaml and *.yml in one, in name order).
	Scenarios []string
	// Agents are the variants to run: nil or empty for each scenario's
	// default agent; "all" for the default and every variant; else names,
	// "default" naming a scenario's own agent. A scenario without a named
	// variant skips it; a name no scenario has is an error.
	Agents []string
	// Seeds are the trials of every scenario and agent.
	Seeds  []int64
	Config Config
}

// Case is one run of a suite: a scenario, an agent and a seed.
type Case struct {
	Scenario string // the scenario's name
	Agent    string // "" for the default agent
	Seed     int64
	// FromCorpus: an earlier suite of the same configuration saw it fail.
	FromCorpus bool
	// Extra: a corpus case outside the suite's seeds, run but not counted.
	Extra bool
}

// ID names the case: scenario/agent/seed.
func (c Case) ID() string {
	return c.Scenario + "/" + history.AgentLabel(c.Agent) + "/" + strconv.FormatInt(c.Seed, 10)
}

// Plan is a suite's cases, in the order they run, and the scenarios they
// use.
type Plan struct {
	Config    Config
	Seeds     []int64
	Scenarios []ScenarioRef
	Cases     []Case
	// Total is how many cases the whole plan has (before sharding).
	Total int
	Shard *Shard
	// Fingerprint identifies the whole plan: shards of one suite share it.
	Fingerprint string

	scenarios map[string]*scenarios.Scenario
}

// Scenario returns the loaded scenario of a case.
func (p *Plan) Scenario(name string) *scenarios.Scenario { return p.scenarios[name] }

// Build resolves spec's scenarios with resolve (a built-in name or a path
// to a *scenarios.Scenario) and lists its cases: scenarios in the order
// given, each scenario's agents (the default first, then the variants by
// name), each agent's seeds in order. When scenarios fail to resolve, the
// error joins the failures of every one of them, in order.
func Build(spec Spec, resolve func(string) (*scenarios.Scenario, error)) (*Plan, error) {
	if len(spec.Scenarios) == 0 {
		return nil, fmt.Errorf("%w: no scenarios: name built-in scenarios, scenario files or directories of them", ErrPlan)
	}
	if len(spec.Seeds) == 0 {
		return nil, fmt.Errorf("%w: no seeds", ErrPlan)
	}
	if _, err := spec.Config.faultSpecs(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPlan, err)
	}
	seeds := slices.Clone(spec.Seeds)
	slices.Sort(seeds)
	if i := firstDuplicate(seeds); i >= 0 {
		return nil, fmt.Errorf("%w: seed %d is given twice", ErrPlan, seeds[i])
	}
	p := &Plan{Config: spec.Config, Seeds: seeds, scenarios: map[string]*scenarios.Scenario{}}
	var sources []string
	for _, arg := range spec.Scenarios {
		files, err := expand(arg)
		if err != nil {
			return nil, err
		}
		sources = append(sources, files...)
	}
	all := len(spec.Agents) == 1 && spec.Agents[0] == "all"
	used := map[string]bool{}
	resolved := make([]*scenarios.Scenario, len(sources))
	var failed []error
	for i, src := range sources {
		var err error
		if resolved[i], err = resolve(src); err != nil {
			failed = append(failed, err)
		}
	}
	switch len(failed) {
	case 0:
	case 1:
		return nil, failed[0]
	default:
		return nil, errors.Join(failed...)
	}
	for i, src := range sources {
		scen := resolved[i]
		if prev, ok := p.scenarios[scen.Name]; ok {
			if prev.Source == scen.Source {
				continue // named twice: once is enough
			}
			return nil, fmt.Errorf("%w: two scenarios are named %q (%s and %s): a suite's groups go by name", ErrPlan, scen.Name, prev.Source, scen.Source)
		}
		if _, ok := scen.Agents[AgentLabel]; ok {
			return nil, fmt.Errorf("%w: scenario %s has a variant named %q, which suites use for its default agent: rename it", ErrPlan, scen.Name, AgentLabel)
		}
		if spec.Config.HTTPReplay != "" && len(scen.HTTP) == 0 {
			return nil, fmt.Errorf("%w: scenario %s (%s) declares no HTTP API, so --http-replay %s has nothing to answer: leave it out of a replayed suite", ErrPlan, scen.Name, scen.Source, spec.Config.HTTPReplay)
		}
		if spec.Config.MCPReplay != "" && len(scen.MCPServers()) == 0 {
			return nil, fmt.Errorf("%w: scenario %s (%s) declares no MCP server, so --mcp-replay %s has nothing to answer: leave it out of a replayed suite", ErrPlan, scen.Name, scen.Source, spec.Config.MCPReplay)
		}
		p.scenarios[scen.Name] = scen
		variants := make([]string, 0, len(scen.Agents))
		for name := range scen.Agents {
			variants = append(variants, name)
		}
		slices.Sort(variants)
		var agents []string
		switch {
		case all:
			agents = append([]string{""}, variants...)
		case len(spec.Agents) == 0:
			agents = []string{""}
		default:
			if slices.Contains(spec.Agents, AgentLabel) {
				agents, used[AgentLabel] = append(agents, ""), true
			}
			for _, v := range variants {
				if slices.Contains(spec.Agents, v) {
					agents, used[v] = append(agents, v), true
				}
			}
		}
		ref := ScenarioRef{Name: scen.Name, Source: src, SHA256: sum(scen.Raw)}
		for _, a := range agents {
			ref.Agents = append(ref.Agents, history.AgentLabel(a))
			for _, seed := range seeds {
				p.Cases = append(p.Cases, Case{Scenario: scen.Name, Agent: a, Seed: seed})
			}
		}
		p.Scenarios = append(p.Scenarios, ref)
	}
	if !all {
		for _, a := range spec.Agents {
			if !used[a] {
				return nil, fmt.Errorf("%w: no scenario of the suite has an agent %q (use %q for each scenario's own agent, or all)", ErrPlan, a, AgentLabel)
			}
		}
	}
	p.Total = len(p.Cases)
	p.Fingerprint = p.fingerprint()
	return p, nil
}

func firstDuplicate(sorted []int64) int {
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return i
		}
	}
	return -1
}

// expand turns a directory into its scenario files, in name order; any
// other argument stays as it is.
func expand(arg string) ([]string, error) {
	fi, err := os.Stat(arg)
	if err != nil || !fi.IsDir() {
		return []string{arg}, nil
	}
	entries, err := os.ReadDir(arg)
	if err != nil {
		return nil, fmt.Errorf("%w: read scenario directory %s: %w", ErrPlan, arg, err)
	}
	var out []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.Type().IsRegular() && (ext == ".yaml" || ext == ".yml") {
			out = append(out, filepath.Join(arg, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: directory %s holds no scenario files (*.yaml, *.yml)", ErrPlan, arg)
	}
	return out, nil
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// fingerprint hashes what makes two plans the same suite: the config, the
// scenarios (by content), the agents and the seeds.
func (p *Plan) fingerprint() string {
	js, _ := json.Marshal(struct {
		Config    Config
		Scenarios []ScenarioRef
		Seeds     []int64
	}{p.Config, withoutSources(p.Scenarios), p.Seeds})
	s := sha256.Sum256(js)
	return hex.EncodeToString(s[:8])
}

// withoutSources drops how scenarios were named (a path differs between
// two CI jobs' checkouts; the content does not).
func withoutSources(refs []ScenarioRef) []ScenarioRef {
	out := slices.Clone(refs)
	for i := range out {
		out[i].Source = ""
	}
	return out
}

// Shard is one share of a suite: Index of Count, 1-based.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// ParseShard reads "i/n" (1 <= i <= n).
func ParseShard(text string) (*Shard, error) {
	a, b, ok := strings.Cut(text, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return nil, fmt.Errorf("%w: shard %q: want i/n with 1 <= i <= n, e.g. 2/4", ErrPlan, text)
	}
	return &Shard{Index: i, Count: n}, nil
}

// String is "i/n".
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Owns reports whether case c falls to this shard: by a stable hash of its
// ID, the same on every machine and for every order of the plan.
func (s Shard) Owns(c Case) bool {
	h := fnv.New64a()
	h.Write([]byte(c.ID()))
	return int(h.Sum64()%uint64(s.Count)) == s.Index-1
}

// Split keeps the cases of shard s.
func (p *Plan) Split(s *Shard) {
	if s == nil {
		return
	}
	p.Shard = s
	p.Cases = slices.DeleteFunc(p.Cases, func(c Case) bool { return !s.Owns(c) })
}

// ParseSeeds reads a seed list: "5" means 1..5; otherwise comma-separated
// seeds and ranges, "1-5,9,12-13".
func ParseSeeds(text string) ([]int64, error) {
	text = strings.TrimSpace(text)
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		if n < 1 || n > 100000 {
			return nil, fmt.Errorf("%w: --seeds %d: want 1..100000 seeds, or a list such as 1-5,9", ErrPlan, n)
		}
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(i + 1)
		}
		return out, nil
	}
	var out []int64
	for _, part := range strings.Split(text, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.ParseInt(lo, 10, 64)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.ParseInt(hi, 10, 64)
		}
		if part == "" || err1 != nil || err2 != nil || b < a || b-a >= 100000 {
			return nil, fmt.Errorf("%w: --seeds %q: %q is not a seed or a range of seeds (want N for 1..N, or a list such as 1-5,9)", ErrPlan, text, part)
		}
		for s := a; s <= b; s++ {
			out = append(out, s)
		}
	}
	return out, nil
}
