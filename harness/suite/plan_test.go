package suite_test

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/suite"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/builtin"
)

func resolve(arg string) (*scenarios.Scenario, error) {
	return scenarios.Resolve(arg, builtin.Lookup, builtin.Names())
}

func ids(cases []suite.Case) []string {
	out := make([]string, len(cases))
	for i, c := range cases {
		out[i] = c.ID()
	}
	return out
}

var _ = Describe("a suite's plan", func() {
	It("is scenarios × agents × seeds, in the order given, the default agent first", func() {
		p, err := suite.Build(suite.Spec{Scenarios: []string{"deploy", "deploy-v2"}, Agents: []string{"all"}, Seeds: []int64{2, 1}}, resolve)
		Expect(err).NotTo(HaveOccurred())
		Expect(ids(p.Cases)).To(Equal([]string{
			"deploy/default/1", "deploy/default/2", "deploy/naive/1", "deploy/naive/2",
			"deploy-v2/default/1", "deploy-v2/default/2", "deploy-v2/unteachable/1", "deploy-v2/unteachable/2",
		}))
		Expect(p.Scenarios[0].Agents).To(Equal([]string{"default", "naive"}))
		Expect(p.Total).To(Equal(8))
	})

	It("runs a named variant where a scenario has it, and refuses a name no scenario has", func() {
		p, err := suite.Build(suite.Spec{Scenarios: []string{"deploy", "deploy-v2"}, Agents: []string{"naive", "default"}, Seeds: []int64{1}}, resolve)
		Expect(err).NotTo(HaveOccurred())
		Expect(ids(p.Cases)).To(Equal([]string{"deploy/default/1", "deploy/naive/1", "deploy-v2/default/1"}), "the default first, whatever the order given")
		_, err = suite.Build(suite.Spec{Scenarios: []string{"deploy"}, Agents: []string{"clever"}, Seeds: []int64{1}}, resolve)
		Expect(err).To(MatchError(ContainSubstring(`no scenario of the suite has an agent "clever"`)))
	})

	It("takes every scenario file of a directory, and refuses two scenarios of one name or a seed given twice", func() {
		dir := GinkgoT().TempDir()
		raw, _ := builtin.Lookup("deploy")
		Expect(os.WriteFile(filepath.Join(dir, "b.yaml"), raw, 0o644)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "a.yml"), []byte(strings.Replace(string(raw), "name: deploy", "name: deploy-copy", 1)), 0o644)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a scenario"), 0o644)).To(Succeed())
		p, err := suite.Build(suite.Spec{Scenarios: []string{dir}, Seeds: []int64{1}}, resolve)
		Expect(err).NotTo(HaveOccurred())
		Expect(ids(p.Cases)).To(Equal([]string{"deploy-copy/default/1", "deploy/default/1"}))

		_, err = suite.Build(suite.Spec{Scenarios: []string{dir, "deploy"}, Seeds: []int64{1}}, resolve)
		Expect(err).To(MatchError(ContainSubstring(`two scenarios are named "deploy"`)))
		_, err = suite.Build(suite.Spec{Scenarios: []string{"deploy"}, Seeds: []int64{1, 1}}, resolve)
		Expect(err).To(MatchError(ContainSubstring("seed 1 is given twice")))
		_, err = suite.Build(suite.Spec{Scenarios: []string{GinkgoT().TempDir()}, Seeds: []int64{1}}, resolve)
		Expect(err).To(MatchError(ContainSubstring("holds no scenario files")))
	})

	It("has a fingerprint that differs with the config, the seeds or a scenario's content, and not with how a scenario was named", func() {
		fp := func(spec suite.Spec) string {
			p, err := suite.Build(spec, resolve)
			Expect(err).NotTo(HaveOccurred())
			return p.Fingerprint
		}
		base := suite.Spec{Scenarios: []string{"deploy"}, Seeds: []int64{1, 2}}
		other := base
		other.Seeds = []int64{1, 3}
		faults := base
		faults.Config.Faults = []string{"kill@step:3"}
		Expect(fp(base)).To(Equal(fp(base)))
		Expect(fp(other)).NotTo(Equal(fp(base)))
		Expect(fp(faults)).NotTo(Equal(fp(base)))
		random, kinds := base, base
		random.Config.RandomFaults = 3
		kinds.Config.RandomFaults, kinds.Config.RandomKinds = 3, []string{"kill"}
		Expect(fp(kinds)).NotTo(Equal(fp(random)), "the kinds random chaos draws are part of the config")

		dir := GinkgoT().TempDir()
		raw, _ := builtin.Lookup("deploy")
		Expect(os.WriteFile(filepath.Join(dir, "deploy.yaml"), raw, 0o644)).To(Succeed())
		byPath := base
		byPath.Scenarios = []string{filepath.Join(dir, "deploy.yaml")}
		Expect(fp(byPath)).To(Equal(fp(base)), "the same bytes, named another way")
	})

	It("reproduces a case with the run flags it ran with, --chaos-kinds among them", func() {
		c := suite.Case{Scenario: "deploy", Agent: "naive", Seed: 4}
		Expect(suite.Reproduce("overnight", "deploy", c, suite.Config{RandomFaults: 3, RandomKinds: []string{"kill", "restart"}})).To(
			Equal("overnight run deploy --seed 4 --agent naive --chaos random --chaos-faults 3 --chaos-kinds kill,restart"))
		Expect(suite.Reproduce("overnight", "deploy", c, suite.Config{RandomFaults: 3})).To(
			Equal("overnight run deploy --seed 4 --agent naive --chaos random --chaos-faults 3"), "no --chaos-kinds when none was given")
	})

	It("reads seeds as N for 1..N or a list of seeds and ranges", func() {
		Expect(suite.ParseSeeds("3")).To(Equal([]int64{1, 2, 3}))
		Expect(suite.ParseSeeds("1-3,9, 12-13")).To(Equal([]int64{1, 2, 3, 9, 12, 13}))
		for _, bad := range []string{"0", "x", "3-1", "1,,2", "1-"} {
			_, err := suite.ParseSeeds(bad)
			Expect(err).To(MatchError(suite.ErrPlan), bad)
		}
	})
})

var _ = Describe("shards", func() {
	It("split a plan so that every case is in exactly one shard, by a hash that does not depend on the plan's order", func() {
		spec := suite.Spec{Scenarios: []string{"deploy", "week"}, Agents: []string{"all"}, Seeds: nil}
		for s := int64(1); s <= 40; s++ {
			spec.Seeds = append(spec.Seeds, s)
		}
		whole, err := suite.Build(spec, resolve)
		Expect(err).NotTo(HaveOccurred())
		seen := map[string]int{}
		for i := 1; i <= 4; i++ {
			p, err := suite.Build(spec, resolve)
			Expect(err).NotTo(HaveOccurred())
			p.Split(&suite.Shard{Index: i, Count: 4})
			Expect(len(p.Cases)).To(BeNumerically(">", 10), "a fair share of 120")
			Expect(p.Fingerprint).To(Equal(whole.Fingerprint))
			for _, c := range p.Cases {
				seen[c.ID()]++
			}
		}
		Expect(seen).To(HaveLen(len(whole.Cases)))
		for id, n := range seen {
			Expect(n).To(Equal(1), id)
		}
		c := suite.Case{Scenario: "deploy", Agent: "naive", Seed: 7}
		owners := 0
		for i := 1; i <= 3; i++ {
			if (suite.Shard{Index: i, Count: 3}).Owns(c) {
				owners++
			}
		}
		Expect(owners).To(Equal(1))
	})

	It("are read as i/n", func() {
		s, err := suite.ParseShard("2/4")
		Expect(err).NotTo(HaveOccurred())
		Expect(*s).To(Equal(suite.Shard{Index: 2, Count: 4}))
		for _, bad := range []string{"0/4", "5/4", "2", "a/b", "1/0"} {
			_, err := suite.ParseShard(bad)
			Expect(err).To(MatchError(suite.ErrPlan), bad)
		}
	})
})
