package suite_test

import (
	"encoding/json"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/suite"
)

// shardResults makes the result each shard of a 12-case plan would give,
// every case failing whose seed is divisible by 4.
func shardResults(n int) (whole *suite.Result, parts []*suite.Result) {
	spec := suite.Spec{Scenarios: []string{"deploy"}, Agents: []string{"all"}, Seeds: []int64{1, 2, 3, 4, 5, 6}}
	res := func(p *suite.Plan, id string) *suite.Result {
		r := &suite.Result{Suite: suite.Header{ID: id, Plan: p.Fingerprint, Cases: p.Total, Shard: p.Shard, Scenarios: p.Scenarios}}
		for _, c := range p.Cases {
			v := "pass"
			if c.Seed%4 == 0 {
				v = "fail"
			}
			agent := c.Agent
			if agent == "" {
				agent = suite.AgentLabel
			}
			r.Runs = append(r.Runs, suite.RunResult{Scenario: c.Scenario, Agent: agent, Seed: c.Seed, Verdict: v, Counted: true})
		}
		r.Tally()
		return r
	}
	p, err := suite.Build(spec, resolve)
	Expect(err).NotTo(HaveOccurred())
	whole = res(p, "whole")
	for i := 1; i <= n; i++ {
		p, err := suite.Build(spec, resolve)
		Expect(err).NotTo(HaveOccurred())
		p.Split(&suite.Shard{Index: i, Count: n})
		parts = append(parts, res(p, "part"))
	}
	return whole, parts
}

var _ = Describe("merging the shards of a suite", func() {
	It("gives the groups, summary and runs of the unsharded suite", func() {
		whole, parts := shardResults(3)
		merged, err := suite.Merge(parts, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(merged.Groups).To(Equal(whole.Groups))
		Expect(merged.Summary).To(Equal(whole.Summary))
		Expect(merged.Runs).To(Equal(whole.Runs))
		Expect(merged.Merged).To(HaveLen(3))
		Expect(merged.Suite.Shard).To(BeNil())
	})

	It("refuses a missing shard, a shard given twice, and a part of another suite", func() {
		_, parts := shardResults(3)
		_, err := suite.Merge(parts[:2], []string{"a.json", "b.json"})
		Expect(err).To(MatchError(suite.ErrMerge))
		Expect(err.Error()).To(ContainSubstring("missing"))
		_, err = suite.Merge([]*suite.Result{parts[0], parts[1], parts[1], parts[2]}, []string{"a.json", "b.json", "b2.json", "c.json"})
		Expect(err).To(MatchError(ContainSubstring("is given twice (b.json and b2.json)")))
		other := *parts[2]
		other.Suite.Plan = "0123456789abcdef"
		_, err = suite.Merge([]*suite.Result{parts[0], parts[1], &other}, []string{"a.json", "b.json", "c.json"})
		Expect(err).To(MatchError(ContainSubstring("c.json is of another suite")))
	})

	It("reads a result back from its JSON, and refuses a file that is not one", func() {
		whole, _ := shardResults(1)
		dir := GinkgoT().TempDir()
		js, err := json.Marshal(whole)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, "r.json"), js, 0o644)).To(Succeed())
		back, err := suite.ReadResult(filepath.Join(dir, "r.json"))
		Expect(err).NotTo(HaveOccurred())
		back.Tally()
		Expect(back.Groups).To(Equal(whole.Groups))
		Expect(os.WriteFile(filepath.Join(dir, "x.json"), []byte(`{"runs": []}`), 0o644)).To(Succeed())
		_, err = suite.ReadResult(filepath.Join(dir, "x.json"))
		Expect(err).To(MatchError(ContainSubstring("not a suite's JSON result")))
	})
})
