package harness_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/scenarios"
	inv "github.com/overnight-dev/overnight/scenarios/invariant"
)

var _ = Describe("checking a scenario's invariants against a registry", func() {
	const head = "apiVersion: overnight/v1\nkind: Scenario\nname: own\nworld: {name: cloud, options: {goal: maintenance}}\nagent: {builtin: maintainer}\n" +
		"task: {network: n, database: d, days: 2, snapshot_prefix: daily-}\n"
	parse := func(invariants string) *scenarios.Scenario {
		s, err := scenarios.Parse("own.yaml", []byte(head+invariants))
		Expect(err).NotTo(HaveOccurred(), "parsing refuses no invariant name")
		return s
	}
	messages := func(err error) []string {
		GinkgoHelper()
		list, ok := scenarios.Problems(err)
		Expect(ok).To(BeTrue(), "%v", err)
		var out []string
		for _, e := range list {
			out = append(out, e.Error())
		}
		return out
	}
	builtins := `"no-duplicate-effects", "goal-reached", "no-lost-progress", "effects-resolved", "faults-fired", "state-consistent"`

	It("refuses a name the registry lacks at file:line:column, naming those it holds; the built-ins by default", func() {
		scen := parse("invariants: [goal-reached, snapshot-named-daily, no-lost-progress,\n  fast]\n")
		Expect(messages(harness.CheckScenario(scen, harness.CheckOptions{}))).To(Equal([]string{
			`own.yaml:7:28: invariants[1]: unknown invariant "snapshot-named-daily" (invariants: ` + builtins + `)`,
			`own.yaml:8:3: invariants[3]: unknown invariant "fast" (invariants: ` + builtins + `)`,
		}))
	})

	It("accepts a name registered in the registry it is given, and the default registry stays the built-ins", func() {
		scen := parse("invariants: [goal-reached, snapshot-named-daily]\n")
		Expect(harness.CheckScenario(scen, harness.CheckOptions{Invariants: withSnapshotNamedDaily()})).To(Succeed())
		Expect(inv.Default().Names()).NotTo(ContainElement(snapshotNamedDaily), "registering in one registry changes no other")
		Expect(harness.CheckScenario(scen, harness.CheckOptions{})).NotTo(Succeed())
	})

	It("refuses a default invariant of a scenario that lists none when the registry lacks it", func() {
		only := inv.NewRegistry()
		own, _ := withSnapshotNamedDaily().Lookup(snapshotNamedDaily)
		only.Register(own)
		Expect(messages(harness.CheckScenario(parse(""), harness.CheckOptions{Invariants: only}))).To(Equal([]string{
			`own.yaml:1:1: invariants: not registered: "no-duplicate-effects", "goal-reached", "no-lost-progress", which the scenario checks without listing ` +
				`(the defaults of a scenario that lists none, or names added in Go) (invariants: "snapshot-named-daily")`,
		}))
		Expect(harness.CheckScenario(parse("invariants: [snapshot-named-daily]\n"), harness.CheckOptions{Invariants: only})).To(Succeed())
	})

	It("is what Harness.Check and Run check against Options.Invariants: refused before a run starts, recording nothing", func(ctx SpecContext) {
		scen := parse("invariants: [goal-reached, snapshot-named-daily]\n")
		plain, err := harness.Open(ctx, harness.Options{StateDir: GinkgoT().TempDir(), Sandbox: bareType})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(plain.Close)
		Expect(plain.Invariants().Names()).To(Equal(inv.Default().Names()), "the built-ins by default")
		Expect(messages(plain.Check(scen))).To(Equal([]string{
			`own.yaml:7:28: invariants[1]: unknown invariant "snapshot-named-daily" (invariants: ` + builtins + `)`,
		}))
		_, err = plain.Run(ctx, harness.RunRequest{Scenario: scen})
		Expect(err).To(MatchError(ContainSubstring(`own.yaml:7:28: invariants[1]: unknown invariant "snapshot-named-daily"`)))
		runs, err := plain.History().Runs()
		Expect(err).NotTo(HaveOccurred())
		Expect(runs).To(BeEmpty())

		mine, err := harness.Open(ctx, harness.Options{StateDir: GinkgoT().TempDir(), Sandbox: bareType, Invariants: withSnapshotNamedDaily()})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(mine.Close)
		Expect(mine.Check(scen)).To(Succeed())
	})
})
