package scenarios_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios"
)

const claimsHeader = `apiVersion: overnight/v1
kind: Scenario
name: t
world: cloud
agent: {builtin: deployer}
`

var _ = Describe("claims: and rollback:", func() {
	It("compiles each claim's CEL judge over state and claim, and reads rollback", func() {
		sc := mustParse("c.yaml", claimsHeader+"rollback: consistent\nclaims:\n  has: 'state.resources.exists(r, r.name == claim)'\n")
		Expect(sc.Rollback).To(Equal(scenarios.RollbackConsistent))
		ok, err := sc.Claims["has"].EvalBool(context.Background(), map[string]any{
			"state": map[string]any{"resources": []any{map[string]any{"name": "db"}}}, "claim": "db"})
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeTrue())
		Expect(mustParse("c.yaml", claimsHeader).Rollback).To(Equal(scenarios.RollbackNone), "the default")
	})

	DescribeTable("reports a problem at its file:line:column, a CEL expression's inside it",
		func(text string, want ...string) {
			_, err := scenarios.Parse("c.yaml", []byte(claimsHeader+text))
			Expect(positioned("c.yaml", err)).To(Equal(want))
		},
		Entry("an undeclared variable", "claims:\n  has: 'args.name == claim'\n",
			`7:9: claims.has: undeclared reference to 'args'; this expression may use state, claim`),
		Entry("not a bool", "claims:\n  has: '\"x\"'\n",
			`7:9: claims.has: yields a string, want a bool`),
		Entry("an unknown rollback", "rollback: always\n",
			`6:11: rollback: got "always", want one of "none", "consistent"`),
	)
})
