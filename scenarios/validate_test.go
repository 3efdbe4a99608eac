package scenarios_test

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios"
)

var _ = Describe("Validate", func() {
	// check stands for a harness's checks: it finds the world and the first
	// fault wanting, wherever the scenario has them.
	check := func(sc *scenarios.Scenario) error {
		var errs scenarios.ErrorList
		if sc.World.Name != "cloud" {
			errs = append(errs, sc.ErrorAt("/world", "world: unknown world %q", sc.World.Name))
		}
		for i := range sc.Faults {
			errs = append(errs, sc.ErrorAt("/faults/"+strconv.Itoa(i), "faults[%d]: unknown kind", i))
		}
		for name, a := range sc.AgentsByPointer() {
			if a.Builtin == "nobody" {
				errs = append(errs, sc.ErrorAt(name+"/builtin", "no built-in agent nobody"))
			}
		}
		return errs.Err()
	}
	builtins := scenarios.BuiltinMap{"ok": []byte(header), "bad": []byte(header + "colour: red\n")}
	validate := func(text string) []string {
		GinkgoHelper()
		file := GinkgoT().TempDir() + "/v.yaml"
		Expect(os.WriteFile(file, []byte(text), 0o644)).To(Succeed())
		_, err := scenarios.Validate(file, builtins.Lookup, builtins.Names(), check)
		return positioned(file, err)
	}

	It("returns the scenario when neither Parse nor check finds a problem", func() {
		sc, err := scenarios.Validate("ok", builtins.Lookup, builtins.Names(), check)
		Expect(err).NotTo(HaveOccurred())
		Expect(sc.Source).To(Equal("builtin:ok"))
		sc, err = scenarios.Validate("bad", builtins.Lookup, builtins.Names(), nil)
		Expect(sc).To(BeNil())
		Expect(err).To(MatchError(HavePrefix(`builtin:bad:6:1: unknown field "colour"`)))
	})

	It("reports the file's problems and check's together, sorted by position", func() {
		Expect(validate(strings.Replace(header, "builtin: deployer", "builtin: nobody", 1) + "colour: red\nfaults: [kill@step:1]\n")).To(Equal([]string{
			`5:18: no built-in agent nobody`,
			`6:1: unknown field "colour"; allowed: agent, agents, apiVersion, claims, description, draws, faults, gate, goal, http, invariants, kind, limits, llm, mcp, name, reach, reflect, report, rollback, sandbox, seed, task, world`,
			`7:10: faults[0]: unknown kind`,
		}))
	})

	It("leaves out what follows from a problem Parse found: the same value, one around or inside it, and faults once one is unreadable", func() {
		Expect(validate(strings.Replace(header, "world: cloud", "world: Mars", 1) + "faults: [kill@step:1, kill@stp:2, kill@step:3]\n")).To(Equal([]string{
			`4:8: world: "Mars" does not match ^[a-z0-9][a-z0-9-]*$`,
			`6:28: faults[1]: invalid fault "kill@stp:2": unknown trigger "stp" (want step:N, effect:N[:before|after], llm:N, t:DURATION, every:DURATION, rate:R/DURATION)`,
		}))
		Expect(validate(strings.Replace(header, "world: cloud", "world: {name: Mars}", 1))).To(Equal([]string{
			`4:15: world.name: "Mars" does not match ^[a-z0-9][a-z0-9-]*$`,
		}), "the world's name is inside /world")
		Expect(validate(strings.Replace(header, "agent: {builtin: deployer}", "agent: {builtin: nobody, image: x}", 1))).To(Equal([]string{
			`5:26: agent: builtin and image are both set; set exactly one of builtin, binary or image`,
		}), "the agent's builtin is inside /agent")
	})

	It("keeps what check finds when the file's only problem is the whole document's", func() {
		Expect(validate("apiVersion: overnight/v1\nkind: Scenario\nname: t\nagent: {builtin: nobody}\n")).To(Equal([]string{
			`1:1: missing required field "world"`,
			`4:18: no built-in agent nobody`,
		}))
	})

	It("returns the error of a file it cannot read, and Parse's alone when there is nothing to check", func() {
		_, err := scenarios.Validate("no-such.yaml", builtins.Lookup, builtins.Names(), check)
		Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue())
		_, err = scenarios.Validate("nope", builtins.Lookup, builtins.Names(), check)
		Expect(errors.Is(err, scenarios.ErrUnknownScenario)).To(BeTrue())
		Expect(validate("{{{")).To(Equal([]string{`1:1: invalid YAML: did not find expected node content`}))
	})
})
