package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
)

// invariant is the named invariant of a result.
func invariant(res harness.Result, name string) harness.InvariantResult {
	GinkgoHelper()
	for _, inv := range res.Invariants {
		if inv.Name == name {
			return inv
		}
	}
	Fail("no invariant " + name + " in the result")
	return harness.InvariantResult{}
}

// passedStale checks a logopt run that passed through dep-update@effect:3,
// which made the first candidate stale between its proposal and its trial.
func passedStale(o outcome) {
	GinkgoHelper()
	Expect(o.code).To(Equal(0), o.stderr)
	res := decodeResult(o.stdout)
	Expect(res.Verdict).To(Equal("pass"), o.stdout)
	Expect(res.Faults[0].Kind).To(Equal("dep-update"))
	Expect(res.Faults[0].Applied).To(BeTrue())
	Expect(res.StepsCompleted).To(Equal(17), "the stale candidate was proposed again, once")
	Expect(invariant(res, "goal-reached").Detail).To(ContainSubstring("candidates: 11 applied, 5 rolled back"))
}

var _ = Describe("overnight run logopt: the optimizer on the fleet world", func() {
	It("cuts the fleet's log cost through a kill and an outage drawn from the seed, and passes", func(ctx SpecContext) {
		state := stateDir()
		o := overnight(ctx, state, nil, "run", "logopt", "-o", "json", "-q")
		Expect(o.code).To(Equal(0), o.stderr)
		res := decodeResult(o.stdout)
		Expect(res.Verdict).To(Equal("pass"), o.stdout)
		Expect(res.Attempts).To(Equal(2), "the kill ends attempt 1")
		Expect(res.StepsCompleted).To(Equal(16), "the plan and 15 candidates, each a checkpoint")
		var kinds []string
		for _, f := range res.Faults {
			Expect(f.Applied).To(BeTrue(), f.Spec)
			kinds = append(kinds, f.Kind)
		}
		Expect(kinds).To(ConsistOf("kill", "netdrop"))
		Expect(res.Effects.Duplicates).To(Equal(0))
		md := overnight(ctx, state, nil, "report", res.RunID, "--format", "md")
		Expect(md.code).To(Equal(0), md.stderr)
		Expect(md.stdout).To(ContainSubstring("## What the agent claimed\n\nlog cost "))
		Expect(md.stdout).To(ContainSubstring(`"reason": "api's log shipper parses only json or ecs: its text logs would be dropped"`), "the candidates and their measurements are in the report")
		Expect(res.LLM).NotTo(BeNil())
		Expect(res.LLM.Calls).To(Equal(1), "the scripted model chose the candidates once; the plan is in the checkpoint, so the attempt after the kill does not ask again")
		goal := invariant(res, "goal-reached").Detail
		Expect(goal).To(MatchRegexp(`^log cost [0-9.]+ -> [0-9.]+ \$/day \(down [0-9.]+%, want 30\.0%\); error visibility >= 0\.9 on all 5 services .*candidates: 11 applied, 4 rolled back, 0 only proposed; its claims agree: cost_before [0-9.]+, cost_after [0-9.]+, 11 kept, 4 rolled back$`))

		// The optimizer's report file, copied out of the sandbox at done:
		// its figures are those the world judged in its claims.
		f := overnight(ctx, state, nil, "report", res.RunID, "--file")
		Expect(f.code).To(Equal(0), f.stderr)
		judged := regexp.MustCompile(`cost_before ([0-9.]+), cost_after ([0-9.]+)`).FindStringSubmatch(goal)
		Expect(f.stdout).To(HavePrefix(fmt.Sprintf("# Fleet logging: log cost %s -> %s $/day; 11 candidates kept, 4 rolled back\n", judged[1], judged[2])))
		Expect(f.stdout).To(MatchRegexp(`(?m)^The saving: [0-9.]+ \$/day \([0-9.]+%%\), from %s to %s \$/day\.$`, regexp.QuoteMeta(judged[1]), regexp.QuoteMeta(judged[2])))
		Expect(f.stdout).To(MatchRegexp(`(?m)^\| api-text \| api \| ` + "`" + `\{"format":"text"\}` + "`" + ` \| failed \| rolled back \| [0-9.]+ \| [0-9.]+ \| api's log shipper parses only json or ecs: its text logs would be dropped \|$`))
		Expect(strings.Count(f.stdout, "| kept |")).To(Equal(11))
		Expect(strings.Count(f.stdout, "| rolled back |")).To(Equal(4))
		Expect(md.stdout).To(ContainSubstring("# Fleet logging: log cost "), "the run report shows the file")
	}, SpecTimeout(3*time.Minute))

	// failedInvariant runs logopt with a broken variant of the optimizer
	// and returns the named invariant, which must have failed the run.
	failedInvariant := func(ctx context.Context, variant, name string) harness.InvariantResult {
		GinkgoHelper()
		o := overnight(ctx, stateDir(), nil, "run", "logopt", "--agent", variant, "-o", "json", "-q")
		Expect(o.code).To(Equal(1), o.stderr)
		inv := invariant(decodeResult(o.stdout), name)
		Expect(inv.Verdict).To(Equal("fail"))
		return inv
	}

	It("catches the naive optimizer, which tries its candidates again after the kill: no-duplicate-effects on the trials", func(ctx SpecContext) {
		Expect(failedInvariant(ctx, "naive", "no-duplicate-effects").Detail).To(HavePrefix(`trial "api-warn" created `))
	}, SpecTimeout(3*time.Minute))

	It("catches the optimizer that keeps a candidate blinding a service to its errors, and the one that leaves failed candidates on staging: goal-reached", func(ctx SpecContext) {
		Expect(failedInvariant(ctx, "blind", "goal-reached").Detail).To(HaveSuffix("worker sees 0.1 of its errors, below the floor 0.9 (level warn, sampling 0.1, exempt_errors false)"))
		Expect(failedInvariant(ctx, "leave-failed", "goal-reached").Detail).To(ContainSubstring("candidate api-text (api) was tried and neither applied nor rolled back: half-applied"))
	}, SpecTimeout(3*time.Minute))

	It("catches the optimizer whose report claims a saving the world does not show: goal-reached judges done's claims against the world", func(ctx SpecContext) {
		Expect(failedInvariant(ctx, "overclaim", "goal-reached").Detail).To(MatchRegexp(`^the agent's report disagrees with the world: it claims a cost_after of [0-9.]+ \$/day, and the world shows [0-9.]+$`))
	}, SpecTimeout(3*time.Minute))

	It("shrinks each goal-reached variant's failure to a reproducer without faults: their mistakes need none", func(ctx SpecContext) {
		state := stateDir()
		for _, variant := range []string{"blind", "leave-failed", "overclaim"} {
			o := overnight(ctx, state, nil, "run", "logopt", "--agent", variant, "-o", "json", "-q")
			Expect(o.code).To(Equal(1), variant+": "+o.stderr)
			res := decodeResult(o.stdout)
			Expect(res.Faults).NotTo(BeEmpty(), "logopt's own kill and outage")
			s := overnight(ctx, state, nil, "shrink", res.RunID, "--max-runs", "4", "-o", "json")
			Expect(s.code).To(Equal(0), variant+": "+s.stderr)
			Expect(s.stdout).To(MatchRegexp(`"faults": \[\]`), variant)
			Expect(s.stdout).To(ContainSubstring(`"invariant": "goal-reached"`), variant)
			Expect(s.stdout).To(ContainSubstring(`--agent `+variant+` --fault ''`), variant)
		}
	}, SpecTimeout(4*time.Minute))

	It("runs logopt-week: seven virtual days through three restarts, two outages and a dependency update, in seconds", func(ctx SpecContext) {
		o := overnight(ctx, stateDir(), nil, "run", "logopt-week", "-o", "json", "-q")
		Expect(o.code).To(Equal(0), o.stderr)
		res := decodeResult(o.stdout)
		Expect(res.Verdict).To(Equal("pass"), o.stdout)
		kinds := map[string]int{}
		for _, f := range res.Faults {
			Expect(f.Applied).To(BeTrue(), f.Spec)
			kinds[f.Kind]++
		}
		Expect(kinds["netdrop"]).To(Equal(2))
		Expect(kinds["dep-update"]).To(Equal(1))
		Expect(kinds["kill"] + kinds["stop"] + kinds["restart"]).To(Equal(3))
		Expect(res.VirtualMS).To(BeNumerically(">=", (6 * 24 * time.Hour).Milliseconds()))
	}, SpecTimeout(3*time.Minute))

	It("lives through a dependency update that makes a candidate stale, and a harness crash after it: resumed, the update is not fired again", func(ctx SpecContext) {
		state := stateDir()
		// Effect 3 is the first candidate's trial: the update lands between
		// its proposal and its trial, so the trial fails stale.
		o := overnight(ctx, state, nil, "run", "logopt", "--fault", "dep-update@effect:3", "--fault", "harness-crash@effect:5", "-o", "json", "-q")
		Expect(o.code).To(Equal(137), o.stderr)
		passedStale(overnight(ctx, state, nil, "resume", runIDOf(o.stderr), "-o", "json", "-q"))
	}, SpecTimeout(3*time.Minute))

	It("gives the same history digest for the same seed, and the shrinker takes the naive optimizer's failure down to its kill", func(ctx SpecContext) {
		state := stateDir()
		a := decodeResult(overnight(ctx, state, nil, "run", "logopt-week", "--seed", "5", "-o", "json", "-q").stdout)
		b := decodeResult(overnight(ctx, state, nil, "run", "logopt-week", "--seed", "5", "-o", "json", "-q").stdout)
		Expect(a.Verdict).To(Equal("pass"))
		Expect(b.HistoryDigest).To(Equal(a.HistoryDigest))

		o := overnight(ctx, state, nil, "run", "logopt", "--agent", "naive", "-o", "json", "-q")
		Expect(o.code).To(Equal(1))
		s := overnight(ctx, state, nil, "shrink", decodeResult(o.stdout).RunID, "--max-runs", "4", "-o", "json")
		Expect(s.code).To(Equal(0), s.stderr)
		Expect(s.stdout).To(MatchRegexp(`"faults": \[\s*"kill@t:[0-9hm]+"\s*\]`))
		Expect(s.stdout).To(ContainSubstring(`"invariant": "no-duplicate-effects"`))
	}, SpecTimeout(4*time.Minute))

	It("fires dep-update at a fleet served over the world protocol (capability events), and refuses it at a served world without the event", func(ctx SpecContext) {
		ws := startWorldNamed(ctx, "fleet", nil, "--addr", "127.0.0.1:0")
		passedStale(overnight(ctx, stateDir(), nil, "run", "logopt", "--world", ws.url, "--fault", "dep-update@effect:3", "-o", "json", "-q"))

		cloud := startWorld(ctx, nil, "--addr", "127.0.0.1:0")
		o := overnight(ctx, stateDir(), nil, "run", "deploy", "--world", cloud.url, "--fault", "dep-update@t:1h", "-o", "json")
		Expect(o.code).To(Equal(3), o.stderr)
		Expect(o.stdout).To(ContainSubstring(`"code": "fault_invalid"`))
		Expect(o.stdout).To(ContainSubstring("fires the world event world.dep_update, and world \\\"cloud\\\" at " + cloud.url + " does not undergo it (its describe declares no events capability)"))
	}, SpecTimeout(3*time.Minute))

	It("refuses dep-update on a world without the event (exit 3, fault_invalid)", func(ctx SpecContext) {
		o := overnight(ctx, stateDir(), nil, "run", "deploy", "--fault", "dep-update@t:1h")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring("dep-update fires the world event world.dep_update, which world cloud does not undergo (the worlds that do: fleet"))
	})
})
