package harness_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	dnetwork "github.com/docker/docker/api/types/network"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/builtin"
)

func week() *scenarios.Scenario {
	raw, ok := builtin.Lookup("week")
	Expect(ok).To(BeTrue())
	s, err := scenarios.Parse("builtin:week", raw)
	Expect(err).NotTo(HaveOccurred())
	return s
}

func faultResult(res *harness.Result, kind string) harness.FaultResult {
	for _, f := range res.Faults {
		if f.Kind == kind {
			return f
		}
	}
	Fail("no fault of kind " + kind + " in the result")
	return harness.FaultResult{}
}

var _ = Describe("every fault kind against the real engine and real connections", func() {
	DescribeTable("the well-behaved deployer survives it, and really meets it",
		func(ctx SpecContext, spec string, attempts int, check func(*harness.Result, []harness.AttemptLog)) {
			h := newHarness(ctx, nil)
			res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults(spec)})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v\n%+v", res.Reason, res.Invariants, res.Faults)
			Expect(res.Faults).To(HaveLen(1))
			Expect(res.Faults[0].Applied).To(BeTrue())
			Expect(res.Faults[0].Met).To(BeTrue(), res.Faults[0].MetDetail)
			Expect(res.Attempts).To(Equal(attempts))
			Expect(res.Effects.Duplicates).To(Equal(0))
			logs, err := h.Logs(res.RunID)
			Expect(err).NotTo(HaveOccurred())
			if check != nil {
				check(res, logs)
			}
		},
		Entry("stop: SIGTERM, a new attempt", "stop:2s@step:2", 2, func(res *harness.Result, logs []harness.AttemptLog) {
			Expect(logs[0].End).To(Equal("killed by fault stop:2s@step:2"))
		}, SpecTimeout(2*time.Minute)),
		Entry("stop with a down window: the next attempt waits it out in virtual time", "stop:2s@step:2/3h", 2, func(res *harness.Result, _ []harness.AttemptLog) {
			Expect(res.VirtualMS).To(BeNumerically(">=", (3 * time.Hour).Milliseconds()))
		}, SpecTimeout(2*time.Minute)),
		Entry("restart", "restart@step:3", 2, nil, SpecTimeout(2*time.Minute)),
		Entry("pause: frozen, thawed when its virtual duration is over", "pause@step:2/30m", 1, func(res *harness.Result, _ []harness.AttemptLog) {
			Expect(res.Faults[0].MetDetail).To(ContainSubstring("frozen"))
			Expect(*res.Faults[0].HealedVirtualMS - *res.Faults[0].AppliedVirtualMS).To(Equal((30 * time.Minute).Milliseconds()))
		}, SpecTimeout(2*time.Minute)),
		Entry("netdrop: the link drops, heals while the agent retries", "netdrop@step:2/1h", 1, func(res *harness.Result, _ []harness.AttemptLog) {
			Expect(res.VirtualMS).To(BeNumerically(">=", time.Hour.Milliseconds()))
		}, SpecTimeout(2*time.Minute)),
		Entry("netdrop landing mid-effect", "netdrop@effect:3/20m", 1, nil, SpecTimeout(2*time.Minute)),
		Entry("blackhole: swallowed connections are reset, the agent retries", "blackhole@step:2/1h", 1, nil, SpecTimeout(2*time.Minute)),
		Entry("latency: responses are slower", "latency:150ms@step:1/1h", 1, func(res *harness.Result, _ []harness.AttemptLog) {
			Expect(res.Faults[0].MetDetail).To(MatchRegexp(`[1-9][0-9]* of the agent's connections or responses were hit`))
			Expect(res.WallMS).To(BeNumerically(">=", 150))
		}, SpecTimeout(2*time.Minute)),
		Entry("api-version: the agent adapts by reading the world's errors", "api-version:v2@step:2", 1, nil, SpecTimeout(2*time.Minute)),
		Entry("effect-5xx: a transient failure the agent retries", "effect-5xx@effect:2", 1, func(res *harness.Result, _ []harness.AttemptLog) {
			Expect(res.Effects.Executed).To(Equal(5), "the failed effect never reached the world")
		}, SpecTimeout(2*time.Minute)),
		Entry("effect-slow", "effect-slow:300ms@effect:2", 1, func(res *harness.Result, _ []harness.AttemptLog) {
			Expect(res.WallMS).To(BeNumerically(">=", 300))
		}, SpecTimeout(2*time.Minute)),
		Entry("clock-jump", "clock-jump:6h@step:2", 1, func(res *harness.Result, _ []harness.AttemptLog) {
			Expect(res.VirtualMS).To(Equal((6 * time.Hour).Milliseconds()))
		}, SpecTimeout(2*time.Minute)),
		Entry("llm-429: the agent waits out Retry-After (in virtual time) and asks again", "llm-429:30s@llm:1", 1, func(res *harness.Result, _ []harness.AttemptLog) {
			Expect(res.VirtualMS).To(Equal((30 * time.Second).Milliseconds()))
			Expect(res.LLM.Answered).To(Equal(1), "the 429 never reached the model")
			Expect(res.LLM.Calls).To(Equal(2), "but it was a call")
			Expect(res.LLM.RefusedBy).To(Equal(map[string]int{"rate_limit_exceeded": 1}))
			Expect(res.Faults[0].MetDetail).To(ContainSubstring("(30s of virtual time)"))
		}, SpecTimeout(2*time.Minute)),
		Entry("llm-5xx: the agent asks again", "llm-5xx@llm:1", 1, nil, SpecTimeout(2*time.Minute)),
		Entry("llm-timeout: the call is held, its connection reset, the agent asks again", "llm-timeout@llm:1", 1, nil, SpecTimeout(2*time.Minute)),
		Entry("llm-truncated: the agent asks again for the whole answer", "llm-truncated@llm:1", 1, func(res *harness.Result, _ []harness.AttemptLog) {
			Expect(res.LLM.Calls).To(Equal(2))
		}, SpecTimeout(2*time.Minute)),
		Entry("llm-malformed-tool-call: the agent answers the model with the error and asks again", "llm-malformed-tool-call@llm:1", 1, func(res *harness.Result, _ []harness.AttemptLog) {
			Expect(res.LLM.Calls).To(Equal(2))
		}, SpecTimeout(2*time.Minute)),
		Entry("effect-5xx for an hour: the agent waits in virtual time and retries until it heals", "effect-5xx@effect:2/1h", 1, func(res *harness.Result, _ []harness.AttemptLog) {
			Expect(res.VirtualMS).To(BeNumerically(">=", time.Hour.Milliseconds()))
			Expect(res.Effects.Executed).To(Equal(5))
		}, SpecTimeout(2*time.Minute)),
		Entry("llm-5xx for an hour: the agent waits in virtual time and asks again", "llm-5xx@llm:1/1h", 1, func(res *harness.Result, _ []harness.AttemptLog) {
			Expect(res.VirtualMS).To(BeNumerically(">=", time.Hour.Milliseconds()))
		}, SpecTimeout(2*time.Minute)),
		Entry("kill landing after the world acted, before the result is journaled", "kill@effect:3", 2, func(res *harness.Result, _ []harness.AttemptLog) {
			Expect(res.Effects.Executed).To(Equal(5))
			Expect(res.Effects.Deduplicated).To(Equal(1), "the repeat of effect 3 is answered from the journal")
		}, SpecTimeout(2*time.Minute)),
	)

	It("sees the built-in agent retry a transient failure under the same key, never a new one", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults("effect-5xx@effect:2")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		run, err := h.History().Load(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		keys := []string{}
		for _, e := range run.Effects {
			keys = append(keys, e.Key)
		}
		Expect(keys).To(Equal([]string{"step-1/0", "step-2/0", "step-3/0", "step-4/0", "step-5/0"}), "one key per step: the retry reused its key")
		Expect(run.Effects[1].Intents).To(Equal(2), "step 2 was sent twice under that key")
		Expect(run.Effects[1].Executions).To(Equal(1), "and reached the world once")
	}, SpecTimeout(2*time.Minute))

	It("holds every reply to an attempt a stop signalled: an agent that ignores SIGTERM gets no further than the fault's step", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		s := deployWith("  stubborn: {builtin: deployer, args: [--ignore-sigterm]}\n")
		res, err := h.Run(ctx, harness.RunRequest{Scenario: s, Agent: "stubborn", Faults: faults("stop:1s@step:2")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v", res.Reason, res.Invariants)
		// Had the reply to its step-2 checkpoint gone out, the agent would
		// have finished all five steps in its first attempt long before
		// the SIGKILL that ends the grace.
		Expect(res.Attempts).To(Equal(2))
		logs, err := h.Logs(res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(logs[0].End).To(Equal("killed by fault stop:1s@step:2"))
		Expect(logs[0].ExitCode).NotTo(BeNil())
		Expect(*logs[0].ExitCode).To(Equal(137), "SIGKILLed at the end of the grace")
		Expect(logs[1].Stdout).To(ContainSubstring("starting after step 2 of 5"))
		Expect(res.Effects.Executed).To(Equal(5))
	}, SpecTimeout(2*time.Minute))

	It("fails an agent that does not retry a transient failure? no: the naive agent meets effect-5xx and the verdict says what happened", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Agent: "naive", Faults: faults("effect-5xx@effect:2")})
		Expect(err).NotTo(HaveOccurred())
		Expect(faultResult(res, "effect-5xx").Met).To(BeTrue())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "an unkeyed retry of an effect the world never saw duplicates nothing: %s", res.Reason)
	}, SpecTimeout(2*time.Minute))

	It("undoes active faults on cancellation: the paused container is thawed and removed, the fault healed", func(ctx SpecContext) {
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		progress := &syncBuffer{}
		progress.notify = func(line string) {
			// Faults fire in schedule order: once the netdrop fires, the
			// pause before it is in effect.
			if strings.Contains(line, "fault netdrop@step:1/1h applied") {
				cancel()
			}
		}
		h := newHarness(ctx, progress)
		var runID string
		_, err := h.Run(runCtx, harness.RunRequest{Scenario: deploy(), Faults: faults("pause@step:1/1h", "netdrop@step:1/1h"), Started: func(id string) { runID = id }})
		Expect(err).To(MatchError(harness.ErrInterrupted))
		left, err := harnesstest.Containers(ctx, dockerCli, h.StateDir())
		Expect(err).NotTo(HaveOccurred())
		Expect(left).To(BeEmpty(), "no container, paused or not, is left behind")
		// Undone physically, but not healed: the faults still last their
		// hour of virtual time once the run is resumed.
		Expect(progress.String()).NotTo(ContainSubstring("healed"))
		res, err := h.Resume(ctx, runID)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		drop := faultResult(res, "netdrop")
		Expect(*drop.HealedVirtualMS-*drop.AppliedVirtualMS).To(Equal(time.Hour.Milliseconds()), "the outage heals on schedule after the resume")
	}, SpecTimeout(2*time.Minute))
})

// deployOnNetwork is the built-in deploy scenario with its sandbox on an
// internal network of its own (what the disconnect fault acts on).
func deployOnNetwork() *scenarios.Scenario {
	raw, ok := builtin.Lookup("deploy")
	Expect(ok).To(BeTrue())
	s, err := scenarios.Parse("deploy-net.yaml", append(append([]byte(nil), raw...), []byte("sandbox: {network: internal}\n")...))
	Expect(err).NotTo(HaveOccurred())
	return s
}

var _ = Describe("the disconnect fault", func() {
	It("detaches the sandbox from its network through the Docker network API, and attaches it back", func(ctx SpecContext) {
		s := deployOnNetwork()
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: s, Faults: faults("disconnect@step:2/1h")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s %+v", res.Reason, res.Faults)
		f := faultResult(res, "disconnect")
		Expect(f.Met).To(BeTrue(), f.MetDetail)
		Expect(f.MetDetail).To(ContainSubstring("attempt 1's sandbox was cut from its run's network"))

		_, err = h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults("disconnect@step:2/1h")})
		Expect(err).To(MatchError(chaos.ErrUnsupported))
		Expect(err).To(MatchError(ContainSubstring("this scenario gives its sandbox none: add `sandbox: {network: internal}`")))
	}, SpecTimeout(2*time.Minute))
})

// lateFreeze is the real engine whose pause call freezes the container
// and then reports a failure, as a call that timed out on a loaded engine
// while the daemon went on with it.
type lateFreeze struct{ docker.API }

func (l lateFreeze) ContainerPause(ctx context.Context, id string) error {
	if err := l.API.ContainerPause(ctx, id); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

var _ = Describe("a pause whose engine call failed", func() {
	It("thaws the container, which may be frozen all the same: the run goes on, the fault recorded as not injected", func(ctx SpecContext) {
		h := newHarnessOn(ctx, lateFreeze{dockerCli}, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults("pause@step:2/30m")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Attempts).To(Equal(1))
		Expect(res.StepsCompleted).To(Equal(5), "%s %+v", res.Reason, res.Faults)
		Expect(res.Faults[0].MetDetail).To(HavePrefix("not injected: "))
	}, SpecTimeout(time.Minute))
})

// lateDisconnect is the real engine whose disconnect call detaches the
// container and then reports a failure; it records whether the container
// was attached again.
type lateDisconnect struct {
	docker.API
	reattached *atomic.Bool
}

func (l lateDisconnect) NetworkDisconnect(ctx context.Context, network, id string, force bool) error {
	if err := l.API.NetworkDisconnect(ctx, network, id, force); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

func (l lateDisconnect) NetworkConnect(ctx context.Context, network, id string, cfg *dnetwork.EndpointSettings) error {
	err := l.API.NetworkConnect(ctx, network, id, cfg)
	if err == nil {
		l.reattached.Store(true)
	}
	return err
}

var _ = Describe("a disconnect whose engine call failed", func() {
	It("attaches the sandbox again, which may be detached all the same", func(ctx SpecContext) {
		s := deployOnNetwork()
		var reattached atomic.Bool
		h := newHarnessOn(ctx, lateDisconnect{dockerCli, &reattached}, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: s, Faults: faults("disconnect@step:2/1h")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Faults[0].MetDetail).To(HavePrefix("not injected: "))
		Expect(reattached.Load()).To(BeTrue(), "the detached sandbox was attached to its network again")
	}, SpecTimeout(time.Minute))
})

var _ = Describe("overlapping faults", func() {
	It("lets the most severe fault on the link act, and says a covered one was never met", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults("netdrop@step:1/1h", "latency:10ms@step:1/10m")})
		Expect(err).NotTo(HaveOccurred())
		drop, lat := faultResult(res, "netdrop"), faultResult(res, "latency")
		Expect(drop.Met).To(BeTrue(), drop.MetDetail)
		Expect(*drop.HealedVirtualMS).To(Equal(time.Hour.Milliseconds()), "the outage lasts its hour")
		Expect(lat.Met).To(BeFalse())
		Expect(lat.MetDetail).To(ContainSubstring("covered"))
		Expect(res.Verdict).To(Equal(harness.VerdictUnknown), "a fault the agent never met tested nothing")
	}, SpecTimeout(2*time.Minute))

	It("gives a window toxic back its place after a one-shot toxic on the same path", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults("effect-slow:50ms@effect:1/1h", "effect-5xx@effect:2")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s %+v", res.Reason, res.Faults)
		Expect(faultResult(res, "effect-slow").Met).To(BeTrue())
		Expect(faultResult(res, "effect-5xx").Met).To(BeTrue())
	}, SpecTimeout(2*time.Minute))
})

var _ = Describe("the week scenario", func() {
	It("gives the same fault log and history for the same seed, another for another seed", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		seed := func(n int64) *int64 { return &n }
		a, err := h.Run(ctx, harness.RunRequest{Scenario: week(), Seed: seed(42)})
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Verdict).To(Equal(harness.VerdictPass), "%s %+v", a.Reason, a.Faults)
		Expect(a.VirtualMS).To(BeNumerically(">=", (7 * 24 * time.Hour).Milliseconds()))
		kinds := map[string]int{}
		for _, f := range a.Faults {
			kinds[f.Kind]++
			Expect(f.Applied).To(BeTrue(), f.Spec)
			Expect(f.Met).To(BeTrue(), f.Spec+": "+f.MetDetail)
		}
		Expect(kinds["kill"] + kinds["stop"] + kinds["restart"]).To(Equal(3))
		Expect(kinds["netdrop"]).To(Equal(2))
		Expect(kinds["api-version"]).To(Equal(1))

		b, err := h.Run(ctx, harness.RunRequest{Scenario: week(), Seed: seed(42)})
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Faults).To(Equal(a.Faults))
		Expect(b.HistoryDigest).To(Equal(a.HistoryDigest))

		c, err := h.Run(ctx, harness.RunRequest{Scenario: week(), Seed: seed(43)})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Verdict).To(Equal(harness.VerdictPass), c.Reason)
		var as, cs []string
		for i := range a.Faults {
			as, cs = append(as, a.Faults[i].Spec), append(cs, c.Faults[i].Spec)
		}
		Expect(cs).NotTo(Equal(as))

		// --replay-faults re-applies a recorded schedule exactly, whatever the seed says.
		d, err := h.Run(ctx, harness.RunRequest{Scenario: week(), Seed: seed(43), ReplayFaults: a.RunID})
		Expect(err).NotTo(HaveOccurred())
		var ds []string
		for _, f := range d.Faults {
			ds = append(ds, f.Spec)
		}
		Expect(ds).To(Equal(as))
	}, SpecTimeout(3*time.Minute))

	It("is deterministic under --chaos random too, and across seeds", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		digests := map[int64][]string{}
		for _, seed := range []int64{1, 2, 7} {
			for i := 0; i < 2; i++ {
				sd := seed
				res, err := h.Run(ctx, harness.RunRequest{Scenario: week(), Seed: &sd, RandomFaults: 6})
				Expect(err).NotTo(HaveOccurred())
				digests[seed] = append(digests[seed], res.HistoryDigest+" "+res.Verdict)
			}
			Expect(digests[seed][0]).To(Equal(digests[seed][1]), "seed %d", seed)
		}
	}, SpecTimeout(3*time.Minute))

	It("survives an API change that is rolled back a day later: the agent forgets what it learned", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: week(), Faults: faults("api-version:v2@t:12h/1d")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s %+v", res.Reason, res.Faults)
		Expect(*res.Faults[0].HealedVirtualMS).To(Equal((36 * time.Hour).Milliseconds()))
	}, SpecTimeout(2*time.Minute))

	It("fails the naive maintainer", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		seed := int64(42)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: week(), Agent: "naive", Seed: &seed})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictFail))
		Expect(invariant(res, harness.InvNoDuplicateEffects).Verdict).To(Equal(harness.VerdictFail))
	}, SpecTimeout(2*time.Minute))
})

// deployReaching is the built-in deploy scenario with reach: replaced.
func deployReaching(reach string) *scenarios.Scenario {
	raw, ok := builtin.Lookup("deploy")
	Expect(ok).To(BeTrue())
	text := strings.Replace(string(raw), "reach: {steps: 5, effects: 5, llm_calls: 1}", reach, 1)
	Expect(text).NotTo(Equal(string(raw)), "the deploy scenario's reach: line moved")
	s, err := scenarios.Parse("deploy-reach.yaml", []byte(text))
	Expect(err).NotTo(HaveOccurred())
	return s
}

var _ = Describe("the kinds --chaos random draws", func() {
	kindsOf := func(res *harness.Result) []string {
		var out []string
		for _, f := range res.Faults {
			out = append(out, f.Kind)
		}
		return out
	}

	It("are the scenario's reach.kinds, and RandomKinds (--chaos-kinds) overrides them", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		seed := int64(3)
		scen := deployReaching("reach: {steps: 5, effects: 5, llm_calls: 1, kinds: [kill]}")
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, Seed: &seed, RandomFaults: 3})
		Expect(err).NotTo(HaveOccurred())
		Expect(kindsOf(res)).To(Equal([]string{"kill", "kill", "kill"}), "%+v", res.Faults)

		res, err = h.Run(ctx, harness.RunRequest{Scenario: scen, Seed: &seed, RandomFaults: 3, RandomKinds: []string{"effect-5xx"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(kindsOf(res)).To(Equal([]string{"effect-5xx", "effect-5xx", "effect-5xx"}), "%+v", res.Faults)
	}, SpecTimeout(3*time.Minute))

	It("refuse a kind the run cannot draw, at its place in the file, before anything is recorded", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		scen := deployReaching("reach: {steps: 5, effects: 5, kinds: [kill, llm-429]}")
		_, err := h.Run(ctx, harness.RunRequest{Scenario: scen, RandomFaults: 3})
		var at *scenarios.Error
		Expect(errors.As(err, &at)).To(BeTrue(), "%v", err)
		Expect(at.Error()).To(HavePrefix("deploy-reach.yaml:54:45: reach.kinds[1]: llm-429 is not drawn at random for this run: it is drawn only at an LLM call (llm:N)"))

		_, err = h.Run(ctx, harness.RunRequest{Scenario: deploy(), RandomFaults: 3, RandomKinds: []string{"kill", "harness-crash"}})
		Expect(err).To(MatchError(chaos.ErrNotDrawable))
		Expect(err.Error()).To(HavePrefix("--chaos-kinds, scenario deploy: harness-crash is not drawn at random: it ends the harness's own process"))
		_, err = h.Run(ctx, harness.RunRequest{Scenario: deploy(), RandomFaults: 3, RandomKinds: []string{"kil"}})
		Expect(err).To(MatchError(chaos.ErrUnknownFault))
		_, err = h.Run(ctx, harness.RunRequest{Scenario: deploy(), RandomKinds: []string{"kill"}})
		Expect(err).To(MatchError(harness.ErrFaultSources))

		// Without --chaos random, reach.kinds is not used, and not in the way.
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, Faults: faults()})
		Expect(err).NotTo(HaveOccurred())
		runs, err := h.Runs()
		Expect(err).NotTo(HaveOccurred())
		Expect(runs).To(ConsistOf(HaveField("RunID", res.RunID)), "only the run without random chaos was recorded")
	}, SpecTimeout(2*time.Minute))
})

var _ = Describe("shrink", func() {
	It("reduces a failing random schedule of 12 faults to the one or two that matter", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		seed := int64(2)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Agent: "naive", Seed: &seed, RandomFaults: 12})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Faults).To(HaveLen(12))
		Expect(res.Verdict).To(Equal(harness.VerdictFail))

		out, err := h.Shrink(ctx, harness.ShrinkRequest{RunID: res.RunID, MaxRuns: 40})
		Expect(err).NotTo(HaveOccurred())
		Expect(len(out.Faults)).To(BeNumerically("<=", 2), "%v", out.Faults)
		Expect(len(out.Faults)).To(BeNumerically(">=", 1))
		Expect(out.Invariant).To(Equal(harness.InvNoDuplicateEffects))
		Expect(out.Command).To(HavePrefix("overnight run deploy --seed 2 --agent naive --fault "))
		Expect(out.RunsTried).To(BeNumerically("<=", 40))

		// The reproducer really fails that way.
		again, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Agent: "naive", Seed: &seed, Faults: faults(out.Faults...)})
		Expect(err).NotTo(HaveOccurred())
		Expect(invariant(again, harness.InvNoDuplicateEffects).Verdict).To(Equal(harness.VerdictFail))
	}, SpecTimeout(5*time.Minute))

	It("refuses a run that passed", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy()})
		Expect(err).NotTo(HaveOccurred())
		_, err = h.Shrink(ctx, harness.ShrinkRequest{RunID: res.RunID})
		Expect(err).To(MatchError(harness.ErrNotFailing))
	}, SpecTimeout(2*time.Minute))
})

var _ = Describe("an API change an effect triggers, and whether the agent met it", func() {
	// The quitter reports failure on the first refusal: under v2 that is
	// the first effect the world sees after the change.
	quitter := "  quitter: {builtin: deployer, args: [--give-up]}\n"
	DescribeTable("counts the triggering effect only when the change came before the world saw it",
		func(ctx SpecContext, agent, spec string, met bool, detail, verdict, firedVerdict, reason string) {
			h := newHarness(ctx, nil)
			res, err := h.Run(ctx, harness.RunRequest{Scenario: deployWith(quitter), Agent: agent, Faults: faults(spec), MaxAttempts: 1})
			Expect(err).NotTo(HaveOccurred())
			f := faultResult(res, "api-version")
			Expect(f.Applied).To(BeTrue())
			Expect(f.Met).To(Equal(met), f.MetDetail)
			Expect(f.MetDetail).To(Equal(detail))
			fired := invariant(res, harness.InvFaultsFired)
			Expect(fired.Verdict).To(Equal(firedVerdict), fired.Detail)
			if firedVerdict == harness.VerdictPass {
				Expect(fired.Detail).To(Equal("the 1 scheduled fault fired and the agent met it"))
			}
			Expect(res.Verdict).To(Equal(verdict), res.Reason)
			Expect(res.Reason).To(HavePrefix(reason))
			Expect(invariant(res, harness.InvNoLostProgress).Detail).To(ContainSubstring(" over 1 attempt never went back"))
		},
		Entry("effect:3 (before, api-version's default): effect 3, refused under v2, met it", "quitter", "api-version:v2@effect:3",
			true, "effect 3 was sent under the new API", harness.VerdictFail, harness.VerdictPass,
			`the agent reported done with outcome failure: "step 3: `, SpecTimeout(2*time.Minute)),
		Entry("effect:3:after: effect 3 went through under v1, effect 4 met it", "quitter", "api-version:v2@effect:3:after",
			true, "effect 4 was sent under the new API", harness.VerdictFail, harness.VerdictPass,
			`the agent reported done with outcome failure: "step 4: `, SpecTimeout(2*time.Minute)),
		Entry("effect:5:after: the last effect went through under v1 and nothing came after", "", "api-version:v2@effect:5:after",
			false, "no effect was sent after the API changed", harness.VerdictUnknown, harness.VerdictUnknown,
			"the agent reported done with outcome success; faults-fired unknown", SpecTimeout(2*time.Minute)),
	)
})

var _ = Describe("the LLM path in real runs", func() {
	It("records every exchange, and a replay from the recording gives the same history", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults("kill@step:2", "api-version:v2@step:3")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.LLM).NotTo(BeNil())
		Expect(res.LLM.TestDouble).To(BeTrue())
		Expect(res.LLM.Calls).To(BeNumerically(">=", 2), "a plan, and a correction after the API change")

		again, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), LLM: "replay:" + res.RunID, ReplayFaults: res.RunID})
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Verdict).To(Equal(harness.VerdictPass), again.Reason)
		Expect(again.LLM.ReplayOf).To(Equal(res.RunID))
		Expect(again.LLM.TestDouble).To(BeTrue(), "the recording's model was the scripted test double")
		Expect(again.LLM.Calls).To(Equal(res.LLM.Calls))
		Expect(again.HistoryDigest).To(Equal(res.HistoryDigest))
	}, SpecTimeout(3*time.Minute))

	It("ends a replay that diverges from its recording with verdict unknown and the first difference", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy()})
		Expect(err).NotTo(HaveOccurred())
		// The replay meets an API change the recording never saw: the
		// deployer asks the model for a correction the recording lacks.
		div, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), LLM: "replay:" + res.RunID, Faults: faults("api-version:v2@effect:2")})
		Expect(err).NotTo(HaveOccurred())
		Expect(div.Verdict).To(Equal(harness.VerdictUnknown))
		Expect(div.Reason).To(ContainSubstring("diverged"))
	}, SpecTimeout(2*time.Minute))

	It("ends a run whose token budget is spent the same way every time", func(ctx SpecContext) {
		raw, ok := builtin.Lookup("deploy")
		Expect(ok).To(BeTrue())
		s, err := scenarios.Parse("deploy-tokens.yaml", []byte(strings.Replace(string(raw), "budget: {calls: 40}", "budget: {tokens: 100}", 1)))
		Expect(err).NotTo(HaveOccurred())
		h := newHarness(ctx, nil)
		var seen []string
		for i := 0; i < 3; i++ {
			res, err := h.Run(ctx, harness.RunRequest{Scenario: s})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Verdict).To(Equal(harness.VerdictFail))
			Expect(res.Reason).To(ContainSubstring("tokens spent"))
			seen = append(seen, res.HistoryDigest)
		}
		Expect(seen[1]).To(Equal(seen[0]))
		Expect(seen[2]).To(Equal(seen[0]))
	}, SpecTimeout(2*time.Minute))

	It("ends a run whose LLM budget is spent with fail and the reason", func(ctx SpecContext) {
		raw, ok := builtin.Lookup("deploy")
		Expect(ok).To(BeTrue())
		s, err := scenarios.Parse("deploy-budget.yaml", []byte(strings.Replace(string(raw), "budget: {calls: 40}", "budget: {calls: 1}", 1)))
		Expect(err).NotTo(HaveOccurred())
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: s, Faults: faults("api-version:v2@step:1")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictFail))
		Expect(res.Reason).To(ContainSubstring("LLM budget: 1 call spent"))
	}, SpecTimeout(2*time.Minute))

	It("builds the sandbox's environment from scratch: the run token, never the harness's provider keys", func(ctx SpecContext) {
		GinkgoT().Setenv("OPENAI_API_KEY", "sk-host-secret-never-in-a-sandbox")
		GinkgoT().Setenv("ANTHROPIC_API_KEY", "sk-ant-host-secret")
		GinkgoT().Setenv("HARNESS_ONLY_SENTINEL", "from-the-harness")
		h := newHarness(ctx, nil)
		s := deployWith("  env: {binary: " + testBinary + ", args: [env]}\n")
		res, err := h.Run(ctx, harness.RunRequest{Scenario: s, Agent: "env", MaxAttempts: 1})
		Expect(err).NotTo(HaveOccurred())
		logs, err := h.Logs(res.RunID)
		Expect(err).NotTo(HaveOccurred())
		out := logs[0].Stdout
		Expect(out).To(ContainSubstring("OPENAI_BASE_URL=http://127.0.0.1:7070/v1/llm"))
		Expect(out).To(MatchRegexp(`OPENAI_API_KEY=[0-9a-f]{64}`), "the key an OpenAI client inside sees is the attempt's token")
		Expect(out).NotTo(ContainSubstring("sk-host-secret"))
		Expect(out).NotTo(ContainSubstring("ANTHROPIC_API_KEY"))
		Expect(out).NotTo(ContainSubstring("HARNESS_ONLY_SENTINEL"), "nothing of the harness's environment is inherited")
	}, SpecTimeout(2*time.Minute))
})
