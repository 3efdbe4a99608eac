package harness

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

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
	fmt.Fprintf(&b, "time: %s wall, %s virtual\n", time.Duration(res.WallMS)*time.Millisecond, time.Duration(res.VirtualMS)*time.Millisecond)
	if len(res.Faults) == 0 {
		b.WriteString("faults: none\n")
	} else {
		b.WriteString("faults:\n")
		tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
		for _, f := range res.Faults {
			state := "never fired"
			if f.Applied && f.AppliedVirtualMS != nil {
				state = fmt.Sprintf("fired at +%s virtual, in attempt %d", time.Duration(*f.AppliedVirtualMS)*time.Millisecond, f.Attempt)
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
		fmt.Fprintf(&b, "LLM: %s; %d calls, %d prompt + %d completion tokens, $%.4f\n", what, l.Calls, l.PromptTokens, l.CompletionTokens, l.CostUSD)
	}
	e := res.Effects
	fmt.Fprintf(&b, "effects: %d executed, %d deduplicated, %d duplicates, %d unknown, %d unkeyed\n",
		e.Executed, e.Deduplicated, e.Duplicates, e.Unknown, e.Unkeyed)
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
