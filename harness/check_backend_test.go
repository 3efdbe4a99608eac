package harness_test

import (
	"context"
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/scenarios"
)

// bareType is a backend type that declares no optional capability: its
// Open is never called by a check.
var bareType = sandbox.Type{Name: "bare", Open: func(context.Context, sandbox.Config) (sandbox.Backend, error) {
	return nil, errors.New("a check opens no backend")
}}

var _ = Describe("checking a scenario against a sandbox backend's type", func() {
	parse := func(faults string) *scenarios.Scenario {
		s, err := scenarios.Parse("bare.yaml", []byte("apiVersion: overnight/v1\nkind: Scenario\nname: bare\nworld: cloud\n"+
			"agent: {builtin: deployer}\nsandbox: {network: internal}\n"+faults+"invariants: [no-duplicate-effects]\n"+
			"task: {network: n, database: d, migration: 1, service: {name: s, image: i}, dns: s.example.com}\n"))
		Expect(err).NotTo(HaveOccurred())
		return s
	}

	It("refuses, at file:line:column, a fault that needs a capability the backend lacks, naming both", func() {
		scen := parse("faults: [pause@step:2/30m, kill@step:3, disconnect@step:1/1h]\n")
		err := harness.CheckScenario(scen, harness.CheckOptions{Faults: chaos.Default(), Backend: bareType})
		Expect(err).To(HaveOccurred())
		list, ok := scenarios.Problems(err)
		Expect(ok).To(BeTrue())
		var msgs []string
		for _, e := range list {
			msgs = append(msgs, e.Error())
		}
		Expect(msgs).To(ConsistOf(
			"bare.yaml:7:10: faults[0]: pause needs the sandbox backend's freeze capability, which the bare backend lacks (it has: none)",
			"bare.yaml:7:41: faults[2]: disconnect needs the sandbox backend's link capability, which the bare backend lacks (it has: none)",
		), "kill needs nothing beyond the contract")
	})

	It("refuses a report: file on a backend without copy-out, at the report key, naming the backend; Docker has it", func() {
		scen := parse("report: {path: /workspace/report.md}\n")
		err := harness.CheckScenario(scen, harness.CheckOptions{Backend: bareType})
		Expect(err).To(MatchError("bare.yaml:7:9: report: the agent's report file is copied out of its sandbox, which needs the sandbox backend's copy-out capability, which the bare backend lacks (it has: none)"))
		Expect(harness.CheckScenario(scen, harness.CheckOptions{Backend: harness.DefaultBackend()})).To(Succeed())
		Expect(harness.CheckScenario(parse(""), harness.CheckOptions{Backend: bareType})).To(Succeed(), "without report: nothing is copied out")
	})

	It("accepts them on the Docker backend, which has every capability (no engine reached)", func() {
		scen := parse("faults: [pause@step:2/30m, kill@step:3, disconnect@step:1/1h]\n")
		Expect(harness.CheckScenario(scen, harness.CheckOptions{Faults: chaos.Default()})).To(Succeed())
		Expect(harness.CheckScenario(scen, harness.CheckOptions{Faults: chaos.Default(), Backend: harness.DefaultBackend()})).To(Succeed())
	})

	It("refuses them before a run starts on such a backend, as a fault error, recording nothing", func(ctx SpecContext) {
		h, err := harness.Open(ctx, harness.Options{StateDir: GinkgoT().TempDir(), Sandbox: bareType})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(h.Close)
		pause, err := chaos.ParseSpec("pause@step:2/30m")
		Expect(err).NotTo(HaveOccurred())
		_, err = h.Run(ctx, harness.RunRequest{Scenario: parse(""), Faults: []chaos.Spec{pause}})
		Expect(err).To(MatchError(chaos.ErrUnsupported))
		Expect(err).To(MatchError(ContainSubstring("pause needs the sandbox backend's freeze capability, which the bare backend lacks")))
		runs, err := h.History().Runs()
		Expect(err).NotTo(HaveOccurred())
		Expect(runs).To(BeEmpty())
	})
})
