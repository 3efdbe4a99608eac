package history

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/overnight-dev/overnight/scenarios/invariant"
)

// Verdicts of a run: the words an invariant's judgement uses
// (scenarios/invariant), which are defined there once.
const (
	VerdictPass    = invariant.Pass
	VerdictFail    = invariant.Fail
	VerdictUnknown = invariant.Unknown
	// VerdictNone stands for a run that has no verdict yet (a RunQuery's
	// Verdict, the viewer's filter); no Result carries it.
	VerdictNone = "none"
)

// OutcomeNone is a Result's Outcome when the agent made no claim of its own
// (it never called done); the claims it can make are protocol.OutcomeSuccess
// and protocol.OutcomeFailure.
const OutcomeNone = "none"

// Result is a run's verdict and the evidence for it: the JSON contract of
// `overnight run --output json`. Fields are only ever added.
type Result struct {
	RunID          string            `json:"run_id"`
	Scenario       string            `json:"scenario"`
	Agent          string            `json:"agent,omitempty"`
	Seed           int64             `json:"seed"`
	Verdict        string            `json:"verdict"`
	Reason         string            `json:"reason"`
	Outcome        string            `json:"outcome"` // the agent's own claim: success, failure, or none
	Attempts       int               `json:"attempts"`
	StepsCompleted int               `json:"steps_completed"`
	Faults         []FaultResult     `json:"faults"`
	Effects        EffectCounts      `json:"effects"`
	Invariants     []InvariantResult `json:"invariants"`
	LLM            *LLMTotals        `json:"llm,omitempty"`
	Reflections    []Reflection      `json:"reflections,omitempty"`
	Gate           *GateCounts       `json:"gate,omitempty"`
	// MCP counts the run's tools/calls to MCP servers (none: omitted).
	MCP *MCPCounts `json:"mcp,omitempty"`
	// ReplayDivergence is the first request of an HTTP replay (mode:
	// replay, --http-replay) its recording could not answer; the
	// invariants that read the world are then unknown.
	ReplayDivergence *ReplayDivergence `json:"replay_divergence,omitempty"`
	// Poisoned are the checkpoints whose claims the world contradicted,
	// Rollbacks the checkpoints the harness wrote instead (rollback:
	// consistent); none: omitted.
	Poisoned  []PoisonedCheckpoint `json:"poisoned,omitempty"`
	Rollbacks []Rollback           `json:"rollbacks,omitempty"`
	// Report is the agent's report file, when the scenario names one and
	// the agent reported done.
	Report        *ReportRecord `json:"report,omitempty"`
	WallMS        int64         `json:"wall_ms"`
	VirtualMS     int64         `json:"virtual_ms"`
	HistoryDigest string        `json:"history_digest"`
}

// ReplayDivergence names the first request of a replay that its
// recording could not answer: it was refused (502 replay_diverged), never
// sent upstream.
type ReplayDivergence struct {
	API   string `json:"api"`
	Kind  string `json:"kind"`  // http.<api>.<kind>
	Route string `json:"route"` // "METHOD /path"
	// Ordinal is the request's number among the run's requests to the API,
	// from 1; Occurrence its number among those with its kind and args.
	Ordinal    int64  `json:"ordinal"`
	Occurrence int    `json:"occurrence"`
	Key        string `json:"key,omitempty"`
	Recording  string `json:"recording,omitempty"` // the run replayed
	Message    string `json:"message"`
}

// FaultResult is one scheduled fault in a result.
type FaultResult struct {
	Kind             string `json:"kind"`
	Spec             string `json:"spec"`
	At               string `json:"at"`
	Applied          bool   `json:"applied"`
	AppliedVirtualMS *int64 `json:"applied_virtual_ms"`
	HealedVirtualMS  *int64 `json:"healed_virtual_ms"`
	Attempt          int    `json:"attempt,omitempty"`
	Error            string `json:"error,omitempty"` // why it fired but could not be injected
	From             string `json:"from,omitempty"`  // the spec it was expanded or drawn from
	Met              bool   `json:"met"`             // whether the agent really met it
	MetDetail        string `json:"met_detail,omitempty"`
}

// EffectCounts summarises the effects of a run.
type EffectCounts struct {
	Executed     int `json:"executed"`     // times the world was asked to act
	Deduplicated int `json:"deduplicated"` // repeats answered from the journal
	Duplicates   int `json:"duplicates"`   // extra resources the world shows created for one logical identity
	Unknown      int `json:"unknown"`      // effects whose outcome could not be established
	Unkeyed      int `json:"unkeyed"`      // effects sent without an idempotency key
}

// MCPCounts summarises a run's tools/calls (its effects of kind
// mcp.<server>.<tool>).
type MCPCounts struct {
	Calls      int `json:"calls"`       // tools/calls journaled (each once, however often repeated)
	AgentKeyed int `json:"agent_keyed"` // keyed by the agent's _meta key
	Derived    int `json:"derived"`     // keyed by the harness (keys: derived)
	Unkeyed    int `json:"unkeyed"`
	Replayed   int `json:"replayed"` // calls answered again from the journal at least once
	// Refused counts the calls the gateway refused before they became
	// effects (an mcp-tool-gone or mcp-schema fault); they are not in Calls.
	Refused int `json:"refused,omitempty"`
	// Refusals are those calls, in order: the tool, when, the attempt, the
	// fault that changed the tool and the tool error the agent got.
	Refusals []MCPRefusal `json:"refusals,omitempty"`
	// Servers are the servers called, each with the tools of it called.
	Servers []MCPServerCalls `json:"servers"`
}

// MCPServerCalls is an MCP server and the tools of it a run called.
type MCPServerCalls struct {
	Server string   `json:"server"`
	Tools  []string `json:"tools"`
}

// InvariantResult is one invariant's judgement.
type InvariantResult struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Verdict string `json:"verdict"`
	Detail  string `json:"detail"`
}

// Reflection is one reflection in a result.
type Reflection struct {
	ID             string        `json:"id"`
	Trigger        string        `json:"trigger"` // the failure's kind and detail
	Checkpoint     int64         `json:"checkpoint"`
	Reproduced     Reproduced    `json:"reproduced"`
	ReplaysSkipped string        `json:"replays_skipped,omitempty"` // why no replay ran (the journal alone showed the diagnosis)
	Divergence     string        `json:"divergence,omitempty"`
	Diagnosis      *Diagnosis    `json:"diagnosis,omitempty"`
	Counterfactual *ReplayRecord `json:"counterfactual,omitempty"`
	Lesson         *LessonRef    `json:"lesson,omitempty"`
	Remembered     []LessonTry   `json:"remembered,omitempty"` // remembered lessons verified before drawing a new one
	Verification   *Verification `json:"verification,omitempty"`
	Decision       string        `json:"decision"`
	Reason         string        `json:"reason"`
	LLM            *LLMTotals    `json:"llm,omitempty"` // the reflection's own model calls, apart from the agent's
}

// Reproduced counts the isolated replays of a failure and how many failed
// the same way.
type Reproduced struct {
	Runs   int `json:"runs"`
	Failed int `json:"failed"`
}

// LessonRef names a lesson in a result.
type LessonRef struct {
	ID   string `json:"id"`
	Text string `json:"text"`
	// FromMemory: a lesson remembered from an earlier run, verified again
	// against this run's world.
	FromMemory bool `json:"from_memory,omitempty"`
}

// LessonTry is a remembered lesson a reflection verified, and the verdict.
type LessonTry struct {
	ID      string `json:"id"`
	Verdict string `json:"verdict"`
}

// GateCounts summarise the gate's decisions: held, the effects that waited
// at it; released, guarded effects executed on the strength of a passed
// verification or an approval; approved and denied, the decisions (a
// person's and the gate's).
type GateCounts struct {
	Held     int `json:"held"`
	Released int `json:"released"`
	Approved int `json:"approved"`
	Denied   int `json:"denied"`
}

// LLMTotals summarise a run's LLM use in its result. Calls counts every
// chat request that reached the endpoint from the attempt owning the run:
// Answered plus Refused (a 429, a 5xx, a 400, a timeout, a spent budget);
// the scenario's budget.calls bounds Calls. Tokens and cost come from the
// answered ones.
type LLMTotals struct {
	Provider   string `json:"provider"`
	Model      string `json:"model"`
	TestDouble bool   `json:"test_double"`         // the scripted model: deterministic rules, not a real model
	ReplayOf   string `json:"replay_of,omitempty"` // the run whose recording answered (provider and model are the recording's)
	Calls      int    `json:"calls"`               // every request that reached the endpoint: answered + refused
	Answered   int    `json:"answered"`            // answered with a completion (by the model, or the recording)
	Refused    int    `json:"refused"`             // answered with an error instead
	// RefusedBy counts the refused requests by the error code they got
	// (rate_limit_exceeded, provider_error, timeout, bad_request,
	// unsupported_parameter, too_large, budget_exceeded, replay_divergence, …).
	RefusedBy        map[string]int `json:"refused_by,omitempty"`
	PromptTokens     int            `json:"prompt_tokens"`
	CompletionTokens int            `json:"completion_tokens"`
	CostUSD          float64        `json:"cost_usd"`
}

// Count adds one request to the totals: answered when status is 200,
// else refused with the error's code.
func (t *LLMTotals) Count(status int, code string) {
	t.Calls++
	if status == 200 {
		t.Answered++
		return
	}
	t.Refused++
	if code == "" {
		code = "error"
	}
	if t.RefusedBy == nil {
		t.RefusedBy = map[string]int{}
	}
	t.RefusedBy[code]++
}

// WriteText prints the result as a short summary for a person.
func (res *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	agent := ""
	if res.Agent != "" {
		agent = " (agent " + res.Agent + ")"
	}
	fmt.Fprintf(&b, "run %s: scenario %s%s, seed %d\n", res.RunID, res.Scenario, agent, res.Seed)
	fmt.Fprintf(&b, "verdict: %s (%s)\n", strings.ToUpper(res.Verdict), res.Reason)
	fmt.Fprintf(&b, "attempts: %d   steps completed: %d   agent's claim: %s\n", res.Attempts, res.StepsCompleted, res.Outcome)
	fmt.Fprintf(&b, "time: %s wall, %s virtual\n", time.Duration(res.WallMS)*time.Millisecond, VirtualSpan(time.Duration(res.VirtualMS)*time.Millisecond))
	if len(res.Faults) == 0 {
		b.WriteString("faults: none\n")
	} else {
		b.WriteString("faults:\n")
		tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
		for _, f := range res.Faults {
			state := "never fired"
			if f.Applied && f.AppliedVirtualMS != nil {
				state = fmt.Sprintf("fired at %s virtual, in attempt %d", VirtualInstant(time.Duration(*f.AppliedVirtualMS)*time.Millisecond), f.Attempt)
			}
			fmt.Fprintf(tw, "  %s\t%s\n", f.Spec, state)
		}
		tw.Flush()
	}
	if l := res.LLM; l != nil {
		what := l.Provider + ":" + l.Model
		if l.TestDouble {
			what = "scripted (a deterministic test double driven by the scenario's rules, not a real model)"
		}
		fmt.Fprintf(&b, "LLM: %s; %s (%d answered, %d refused%s), %d prompt + %d completion tokens, $%.4f\n",
			what, Count(l.Calls, "call"), l.Answered, l.Refused, refusedBy(l.RefusedBy), l.PromptTokens, l.CompletionTokens, l.CostUSD)
	}
	e := res.Effects
	fmt.Fprintf(&b, "effects: %d executed, %d deduplicated, %s, %d unknown, %d unkeyed\n",
		e.Executed, e.Deduplicated, Count(e.Duplicates, "duplicate"), e.Unknown, e.Unkeyed)
	if m := res.MCP; m != nil {
		var servers []string
		for _, s := range m.Servers {
			servers = append(servers, s.Server+" ("+strings.Join(s.Tools, ", ")+")")
		}
		refused := ""
		if m.Refused > 0 {
			refused = fmt.Sprintf("; %d refused before they became effects", m.Refused)
		}
		fmt.Fprintf(&b, "MCP: %s to %s: %d keyed by the agent, %d derived, %d unkeyed, %d replayed%s\n",
			Count(m.Calls, "call"), strings.Join(servers, ", "), m.AgentKeyed, m.Derived, m.Unkeyed, m.Replayed, refused)
		for _, r := range m.Refusals {
			fmt.Fprintf(&b, "MCP refused: %s (attempt %d, fault %s): %s\n", r.Tool, r.Attempt, r.Fault, r.Reason)
		}
	}
	for _, r := range res.Reflections {
		replays := fmt.Sprintf("the failure came back in %d of %d replays", r.Reproduced.Failed, r.Reproduced.Runs)
		if r.ReplaysSkipped != "" {
			replays = "no replays: the journal alone showed the diagnosis"
		}
		fmt.Fprintf(&b, "reflection %s: %s — %s (%s)\n", r.ID, r.Decision, r.Reason, replays)
	}
	if g := res.Gate; g != nil {
		fmt.Fprintf(&b, "gate: %d held, %d released, %d approved, %d denied\n", g.Held, g.Released, g.Approved, g.Denied)
	}
	for _, p := range res.Poisoned {
		by := "no rollback replaced it"
		if p.RolledBackBy > 0 {
			by = fmt.Sprintf("rolled back by checkpoint %d", p.RolledBackBy)
		}
		fmt.Fprintf(&b, "poisoned: checkpoint %d (step %d, attempt %d): %s; %s\n", p.Seq, p.Step, p.Attempt, p.Reason, by)
	}
	for _, r := range res.Rollbacks {
		past := ""
		if len(r.RolledPast) > 0 {
			past = "; effects since then, kept by the world: " + strings.Join(r.RolledPast, ", ")
		}
		fmt.Fprintf(&b, "rollback: checkpoint %d for attempt %d replaced poisoned checkpoint %d with %s%s\n", r.Seq, r.Attempt, r.Of, r.FromText(), past)
	}
	if r := res.Report; r != nil {
		fmt.Fprintf(&b, "agent's report: %s (overnight report %s --file prints it)\n", r.Describe(), res.RunID)
	}
	b.WriteString("invariants:\n")
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	for _, ir := range res.Invariants {
		fmt.Fprintf(tw, "  %s\t%s\t(%s)\t%s\n", ir.Verdict, ir.Name, ir.Kind, ir.Detail)
	}
	tw.Flush()
	fmt.Fprintf(&b, "history digest: %s\n", res.HistoryDigest)
	_, err := io.WriteString(w, b.String())
	return err
}

// Count writes n and a noun in the number it agrees with, for a person:
// "1 attempt", "0 attempts", "3 attempts". The plural adds an s, so noun is
// one whose plural does.
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// refusedBy lists refusals by code, for a person: ": 2 rate_limit_exceeded, 1 timeout".
func refusedBy(by map[string]int) string {
	if len(by) == 0 {
		return ""
	}
	codes := make([]string, 0, len(by))
	for c := range by {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%d %s", by[c], c)
	}
	return ": " + strings.Join(parts, ", ")
}

// Describe says what became of the agent's report file, for a person:
// "/workspace/report.md, kept (812 bytes)".
func (r *ReportRecord) Describe() string {
	switch r.Status {
	case ReportKept:
		return fmt.Sprintf("%s, kept (%s)", r.Path, Count(int(r.Bytes), "byte"))
	case ReportMissing:
		return r.Path + ", missing: the agent wrote no such file"
	}
	return fmt.Sprintf("%s, not kept: %s", r.Path, r.Error)
}
