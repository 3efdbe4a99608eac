package harness_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/scenarios"
)

var _ = Describe("checking a fault that fires a world event", func() {
	tasks := map[string]string{
		"cloud": "{network: n, database: d, migration: 1, service: {name: s, image: i}, dns: s.example.com}",
		"fleet": "{goal: {cost_cut: 0.3, visibility_floor: 0.9}}",
	}
	parse := func(world, faults string) *scenarios.Scenario {
		s, err := scenarios.Parse("events.yaml", []byte("apiVersion: overnight/v1\nkind: Scenario\nname: events\nworld: "+world+"\n"+
			"agent: {builtin: deployer}\n"+faults+"invariants: [no-duplicate-effects]\n"+
			"task: "+tasks[world]+"\n"))
		Expect(err).NotTo(HaveOccurred())
		return s
	}

	It("refuses dep-update, at file:line:column, on a built-in world that does not undergo the event, naming the worlds that do", func() {
		err := harness.CheckScenario(parse("cloud", "faults: [kill@step:1, dep-update@t:1d]\n"), harness.CheckOptions{Faults: chaos.Default()})
		list, ok := scenarios.Problems(err)
		Expect(ok).To(BeTrue(), "%v", err)
		Expect(list).To(HaveLen(1))
		Expect(list[0].Error()).To(Equal("events.yaml:6:23: faults[1]: dep-update fires the world event world.dep_update, which world cloud does not undergo (the worlds that do: fleet; see `overnight worlds`)"))

		// A world over the protocol is checked as the run reaches it (its
		// describe's events).
		Expect(harness.CheckScenario(parse("{url: \"http://127.0.0.1:9\"}", "faults: [dep-update@t:1d]\n"), harness.CheckOptions{Faults: chaos.Default()})).To(Succeed())
	})

	It("accepts it on the fleet world, by hand and in a scenario's draws", func() {
		Expect(harness.CheckScenario(parse("fleet", "faults: [dep-update@t:1d, dep-update:zlog@effect:3]\n"), harness.CheckOptions{Faults: chaos.Default()})).To(Succeed())
		Expect(harness.CheckScenario(parse("fleet", "draws: [{kinds: [dep-update], count: 1, between: [1h, 1d]}]\n"), harness.CheckOptions{Faults: chaos.Default()})).To(Succeed())
	})
})
