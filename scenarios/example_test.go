package scenarios_test

import (
	"fmt"

	"github.com/overnight-dev/overnight/scenarios"
)

func ExampleParse() {
	sc, err := scenarios.Parse("deploy.yaml", []byte(`apiVersion: overnight/v1
kind: Scenario
name: deploy
world: cloud
agent: {builtin: deployer}
faults: [kill@step:3, netdrop@t:36h/2h]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sc.Name, sc.World.Name, sc.Agent)
	fmt.Println(sc.Faults[1], sc.Limits.Timeout, sc.Invariants)

	_, err = scenarios.Parse("bad.yaml", []byte(`apiVersion: overnight/v1
kind: Scenario
name: deploy
world: cloud
agent: {builtin: deployer, image: x}
faults: [kill@stp:3]
colour: red
`))
	fmt.Println(err)
	// Output:
	// deploy cloud builtin:deployer
	// netdrop@t:1d12h/2h 5m0s [no-duplicate-effects goal-reached no-lost-progress]
	// bad.yaml:5:28: agent: builtin and image are both set; set exactly one of builtin, binary or image
	// bad.yaml:6:15: faults[0]: invalid fault "kill@stp:3": unknown trigger "stp" (want step:N, effect:N[:before|after], llm:N, t:DURATION, every:DURATION, rate:R/DURATION)
	// bad.yaml:7:1: unknown field "colour"; allowed: agent, agents, apiVersion, claims, description, draws, faults, gate, goal, http, invariants, kind, limits, llm, mcp, name, reach, reflect, report, rollback, sandbox, seed, task, world
}

func ExampleResolve() {
	builtins := scenarios.BuiltinMap{
		"deploy": []byte("apiVersion: overnight/v1\nkind: Scenario\nname: deploy\nworld: cloud\nagent: {builtin: deployer}\n"),
	}
	sc, err := scenarios.Resolve("deploy", builtins.Lookup, builtins.Names())
	fmt.Println(sc.Source, err)

	_, err = scenarios.Resolve("deplyo", builtins.Lookup, builtins.Names())
	fmt.Println(err)
	// Output:
	// builtin:deploy <nil>
	// no built-in scenario "deplyo" and no file "deplyo"; built-in scenarios: deploy
}
