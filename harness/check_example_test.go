package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/scenarios"
	inv "github.com/overnight-dev/overnight/scenarios/invariant"
)

// A scenario is checked against what a harness offers without one — no
// state dir, no Docker engine — as `overnight validate` does: here its
// built-in agent, a fault kind and a network fault are wanting.
func ExampleCheckScenario() {
	scen, err := scenarios.Parse("mine.yaml", []byte(`apiVersion: overnight/v1
kind: Scenario
name: mine
world: cloud
agent: {builtin: deployr}
task: {network: n, database: d, migration: 1, service: {name: s, image: "i:1"}, dns: a.example}
faults: [meteor@step:1, "disconnect@t:1d/1h"]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	err = harness.CheckScenario(scen, harness.CheckOptions{BuiltinAgents: []string{"deployer"}, Faults: chaos.Default()})
	list, _ := scenarios.Problems(err)
	for _, e := range list {
		fmt.Printf("%d:%d %s\n", e.Line, e.Column, e.Pointer)
	}
	fmt.Println(list[0].Msg)
	// Output:
	// 5:18 /agent/builtin
	// 7:10 /faults/0
	// 7:25 /faults/1
	// agent.builtin: no built-in agent "deployr" (built-in agents: [deployer])
}

// An invariant of your own is registered in a registry that
// invariant.Default made (the built-ins) and given to the harness as
// Options.Invariants; a check without a harness takes it as
// CheckOptions.Invariants. A scenario listing a name its registry lacks is
// refused where it lists it, before anything runs.
func ExampleCheckOptions_invariants() {
	reg := inv.Default()
	reg.Register(inv.Invariant{Name: "snapshots-prefixed", Kind: inv.Always,
		Doc: "the world's ledger: every snapshot taken is named with the task's snapshot_prefix",
		Judge: func(ctx context.Context, ev *inv.Evidence) (inv.Judgement, error) {
			var task struct {
				Prefix string `json:"snapshot_prefix"`
			}
			if err := json.Unmarshal(ev.Task, &task); err != nil {
				return inv.Judgement{Verdict: inv.Unknown, Detail: "the task is not an object"}, nil
			}
			ledger, err := ev.World.Ledger(ctx) // what really happened, not what the agent claims
			if err != nil {
				return inv.Judgement{}, err
			}
			for _, e := range ledger {
				var args struct{ Name string }
				_ = json.Unmarshal(e.Args, &args)
				if e.Kind == "cloud.create_snapshot" && !strings.HasPrefix(args.Name, task.Prefix) {
					return inv.Judgement{Verdict: inv.Fail, Detail: fmt.Sprintf("snapshot %q lacks the prefix %q", args.Name, task.Prefix)}, nil
				}
			}
			return inv.Judgement{Verdict: inv.Pass, Detail: "every snapshot is prefixed"}, nil
		}})

	scen, err := scenarios.Parse("mine.yaml", []byte(`apiVersion: overnight/v1
kind: Scenario
name: mine
world: {name: cloud, options: {goal: maintenance}}
agent: {builtin: maintainer}
task: {network: n, database: d, days: 2, snapshot_prefix: daily-}
invariants: [goal-reached, snapshots-prefixed]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(harness.CheckScenario(scen, harness.CheckOptions{}))
	fmt.Println(harness.CheckScenario(scen, harness.CheckOptions{Invariants: reg}))
	// Output:
	// mine.yaml:7:28: invariants[1]: unknown invariant "snapshots-prefixed" (invariants: "no-duplicate-effects", "goal-reached", "no-lost-progress", "effects-resolved", "faults-fired", "state-consistent")
	// <nil>
}
