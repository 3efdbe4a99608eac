package suite_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/suite"
)

// result makes a suite result from groups given as scenario/agent ->
// verdicts, one per seed.
func result(groups map[string][]string) *suite.Result {
	res := &suite.Result{}
	for name, verdicts := range groups {
		var scen, agent string
		fmt.Sscanf(name, "%s %s", &scen, &agent)
		for i, v := range verdicts {
			res.Runs = append(res.Runs, suite.RunResult{Scenario: scen, Agent: agent, Seed: int64(i + 1), Verdict: v, Counted: true})
		}
	}
	res.Tally()
	return res
}

var _ = Describe("a requirement", func() {
	It("parses clauses joined by && and says what is wrong with a bad one", func() {
		_, err := suite.ParseRequirement("pass^3>=0.9 && unknown==0")
		Expect(err).NotTo(HaveOccurred())
		for text, want := range map[string]string{
			"":                   "empty",
			"pass^0>=0.5":        "needs a whole k of at least 1",
			"pass^3>=1.5":        "is a probability, between 0 and 1",
			"pass^3=>0.9":        "want METRIC OP NUMBER",
			"passrate>=0.9":      `unknown metric "passrate"`,
			"pass^3>=0.9 && ":    "clause \"\"",
			"unknown==zero":      "want METRIC OP NUMBER",
			"pass^3 >= 0.9 || x": "want METRIC OP NUMBER",
		} {
			_, err := suite.ParseRequirement(text)
			Expect(err).To(MatchError(suite.ErrRequirement), text)
			Expect(err.Error()).To(ContainSubstring(want), text)
		}
	})

	It("is judged exactly: 9 passes of 10 is pass^1 0.9, which >= 0.9 holds and > 0.9 does not", func() {
		res := result(map[string][]string{"deploy default": {"pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "fail"}})
		q, _ := suite.ParseRequirement("pass^1>=0.9")
		Expect(q.Judge(res).Outcome).To(Equal(suite.Met))
		q, _ = suite.ParseRequirement("pass^1>0.9")
		j := q.Judge(res)
		Expect(j.Outcome).To(Equal(suite.Failed))
		Expect(j.Detail).To(Equal("pass^1>0.9 does not hold: pass^1 is 0.9000; deploy/default: 0.9000 (9 of 10 passed, 1 failed, 0 unknown)"))
	})

	It("averages pass^k over the groups and names the groups that drag it down", func() {
		res := result(map[string][]string{
			"deploy default": {"pass", "pass", "pass", "pass"},
			"deploy naive":   {"fail", "pass", "fail", "fail"},
			"week default":   {"pass", "pass", "pass", "pass"},
		})
		Expect(res.Summary.PassK[0]).To(BeNumerically("~", (1+0.25+1)/3.0, 1e-12))
		Expect(res.Summary.PassK[2]).To(BeNumerically("~", 2/3.0, 1e-12))
		q, _ := suite.ParseRequirement("pass^3>=0.9 && unknown==0")
		j := q.Judge(res)
		Expect(j.Outcome).To(Equal(suite.Failed))
		Expect(j.Clauses).To(HaveLen(2))
		Expect(j.Clauses[0].Outcome).To(Equal(suite.Failed))
		Expect(j.Clauses[0].Detail).To(ContainSubstring("deploy/naive: 0.0000 (1 of 4 passed, 3 failed, 0 unknown)"))
		Expect(j.Clauses[0].Detail).NotTo(ContainSubstring("week/default"))
		Expect(j.Clauses[1].Outcome).To(Equal(suite.Met))
	})

	It("counts an unknown run as a trial, never as a pass, and reports it on its own", func() {
		res := result(map[string][]string{"deploy default": {"pass", "unknown", "pass"}})
		Expect(res.Groups[0].N).To(Equal(3))
		Expect(res.Groups[0].Passes).To(Equal(2))
		Expect(res.Groups[0].Unknown).To(Equal(1))
		q, _ := suite.ParseRequirement("unknown==0")
		Expect(q.Judge(res).Outcome).To(Equal(suite.Failed))
		q, _ = suite.ParseRequirement("pass^1>=0.66")
		Expect(q.Judge(res).Outcome).To(Equal(suite.Met))
	})

	It("cannot be judged for a k above a group's trials, or without runs", func() {
		res := result(map[string][]string{"deploy default": {"pass", "pass", "pass"}, "week default": {"pass", "pass"}})
		q, _ := suite.ParseRequirement("pass^3>=0.5")
		j := q.Judge(res)
		Expect(j.Outcome).To(Equal(suite.Unjudged))
		Expect(j.Detail).To(ContainSubstring("needs at least 3 trials (seeds) per group, and week/default has 2"))
		Expect(res.Summary.PassK).To(HaveLen(2), "the suite's pass^k goes as far as its smallest group")
		j = q.Judge(result(map[string][]string{}))
		Expect(j.Outcome).To(Equal(suite.Unjudged))
		Expect(j.Detail).To(ContainSubstring("no runs"))
	})

	It("joins repeated --require flags into one requirement", func() {
		q, err := suite.Requirements([]string{"pass^1>=0.5", "fails<=1"})
		Expect(err).NotTo(HaveOccurred())
		Expect(q.Text).To(Equal("pass^1>=0.5 && fails<=1"))
		q, err = suite.Requirements(nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(q).To(BeNil())
	})
})
