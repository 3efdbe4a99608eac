package harness_test

import (
	"fmt"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/scenarios"
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
