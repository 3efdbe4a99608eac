package main

import (
	"encoding/json"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("--chaos-kinds", func() {
	It("limits the kinds --chaos random draws for a run, the same schedule per seed", func(ctx SpecContext) {
		state := stateDir()
		o := overnight(ctx, state, nil, "run", "deploy", "--chaos", "random", "--chaos-kinds", "kill,restart", "--seed", "1", "--output", "json", "-q")
		Expect(o.code).To(Equal(0), o.stderr)
		res := decodeResult(o.stdout)
		var kinds, specs []string
		for _, f := range res.Faults {
			kinds, specs = append(kinds, f.Kind), append(specs, f.Spec)
		}
		Expect(kinds).To(HaveLen(5))
		Expect(kinds).To(HaveEach(BeElementOf("kill", "restart")), "%v", specs)
		Expect(kinds).To(ContainElements("kill", "restart"), "seed 1 draws both")
		Expect(specs).To(ConsistOf("kill@effect:4", "restart@step:4", "restart@llm:1", "kill@effect:5", "kill@step:1"),
			"the schedule chaos.RandomSchedule draws for seed 1 and these kinds")
	}, SpecTimeout(3*time.Minute))

	It("says which kind it cannot draw and why, before any run, as JSON too", func(ctx SpecContext) {
		state := stateDir()
		for _, c := range []struct {
			args       []string
			code, want string
		}{
			{[]string{"run", "deploy", "--chaos", "random", "--chaos-kinds", "kill,kil"}, "fault_invalid",
				`--chaos-kinds, scenario deploy: unknown fault kind "kil" (the kinds --chaos random draws: kill, pause, restart, stop, blackhole, latency, netdrop, llm-429, llm-5xx, llm-malformed-tool-call, llm-timeout, llm-truncated, api-version, effect-5xx, effect-slow, clock-jump; see ` + "`overnight faults`)"},
			{[]string{"run", "deploy", "--chaos", "random", "--chaos-kinds", "harness-crash"}, "fault_invalid",
				"harness-crash is not drawn at random: it ends the harness's own process; schedule it by hand instead, as in --fault harness-crash@effect:2"},
			{[]string{"run", "week", "--chaos", "random", "--chaos-kinds", "kill,llm-5xx"}, "fault_invalid",
				"--chaos-kinds, scenario week: llm-5xx is not drawn at random for this run: it is drawn only at an LLM call (llm:N), and the run reaches none (reach: steps 8, effects 9, llm_calls 0, virtual 7d); give the scenario's reach llm_calls, or leave llm-5xx out"},
			{[]string{"suite", "deploy", "week", "--seeds", "1", "--chaos", "random", "--chaos-kinds", "llm-5xx"}, "fault_invalid",
				"--chaos-kinds, scenario week: llm-5xx is not drawn at random for this run"},
			{[]string{"run", "deploy", "--chaos-kinds", "kill"}, "usage",
				"--chaos-kinds limits what --chaos random draws: give --chaos random too"},
			{[]string{"run", "deploy", "--chaos", "random", "--chaos-kinds", "api-version:v2"}, "usage",
				`--chaos-kinds: "api-version:v2" is not a fault kind's name: random chaos draws each kind's argument, trigger and duration itself`},
			{[]string{"suite", "deploy", "--chaos", "random", "--chaos-kinds", "kill,,restart"}, "usage",
				`--chaos-kinds: "kill,,restart": want fault kind names separated by commas`},
		} {
			o := overnight(ctx, state, nil, append(c.args, "-o", "json")...)
			Expect(o.code).To(Equal(3), "%v: %s", c.args, o.stderr)
			Expect(o.stderr).To(ContainSubstring(c.want), "%v", c.args)
			Expect(errorJSON(o)["code"]).To(Equal(c.code), "%v", c.args)
		}
		runs := overnight(ctx, state, nil, "runs", "-o", "json")
		Expect(runs.stdout).To(MatchJSON(`{"runs": []}`), "no run was recorded")

		// overnight faults says which kinds random draws, and where.
		o := overnight(ctx, state, nil, "faults", "-o", "json")
		Expect(o.code).To(Equal(0), o.stderr)
		var cat struct {
			Faults []struct {
				Name    string   `json:"name"`
				DrawnAt []string `json:"drawn_at"`
			} `json:"faults"`
		}
		Expect(json.Unmarshal([]byte(o.stdout), &cat)).To(Succeed())
		drawn := map[string][]string{}
		for _, k := range cat.Faults {
			drawn[k.Name] = k.DrawnAt
		}
		Expect(drawn).To(HaveKeyWithValue("harness-crash", BeEmpty()))
		Expect(drawn).To(HaveKeyWithValue("llm-5xx", []string{"llm"}))
		Expect(drawn).To(HaveKeyWithValue("kill", []string{"step", "effect", "llm", "t"}))
	}, SpecTimeout(2*time.Minute))

	It("reaches every run of a suite, and each run's reproducing command carries it", func(ctx SpecContext) {
		state := stateDir()
		o := overnight(ctx, state, nil, "suite", "deploy", "--seeds", "2", "--chaos", "random", "--chaos-faults", "2", "--chaos-kinds", "kill",
			"--json", "-", "-q")
		Expect(o.code).To(Equal(0), o.stderr)
		res := decodeSuite([]byte(o.stdout))
		Expect(res.Runs).To(HaveLen(2))
		for _, r := range res.Runs {
			Expect(r.Faults).To(HaveLen(2))
			for _, f := range r.Faults {
				Expect(f.Kind).To(Equal("kill"), "seed %d: %s", r.Seed, f.Spec)
			}
			Expect(r.Reproduce).To(HaveSuffix(" --chaos random --chaos-faults 2 --chaos-kinds kill --lessons none"))
		}
		args := strings.Fields(res.Runs[1].Reproduce)[3:] // past "overnight --state DIR"
		again := overnight(ctx, stateDir(), nil, append(args, "-o", "json", "-q")...)
		Expect(again.code).To(Equal(0), again.stderr)
		Expect(decodeResult(again.stdout).HistoryDigest).To(Equal(res.Runs[1].HistoryDigest), "the command reproduces the run's history")
	}, SpecTimeout(4*time.Minute))
})
