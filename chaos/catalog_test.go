package chaos_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/chaos"
)

func mustSpec(text string) chaos.Spec {
	s, err := chaos.ParseSpec(text)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return s
}

func texts(specs []chaos.Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.String()
	}
	return out
}

var _ = Describe("the fault catalog", func() {
	reg := chaos.Default()

	DescribeTable("builds what each kind can take",
		func(text string) {
			_, err := reg.Build(mustSpec(text))
			Expect(err).NotTo(HaveOccurred())
		},
		Entry(nil, "kill@step:3"), Entry(nil, "kill@effect:2:after"), Entry(nil, "kill@every:1d"),
		Entry(nil, "stop@t:1d"), Entry(nil, "stop:5s@t:1d/1h"), Entry(nil, "restart@rate:2/1d"),
		Entry(nil, "pause@t:1d/30m"), Entry(nil, "harness-crash@effect:2"),
		Entry(nil, "netdrop@t:36h/2h"), Entry(nil, "blackhole@step:2/1h"), Entry(nil, "latency:200ms+50ms@step:2/1h"),
		Entry(nil, "api-version:v2@t:4d"), Entry(nil, "dep-update@t:3d"), Entry(nil, "dep-update:zlog@effect:2"), Entry(nil, "effect-5xx@effect:2"), Entry(nil, "effect-5xx@t:1d/1h"),
		Entry(nil, "effect-slow:1s@effect:3"), Entry(nil, "clock-jump:6h@t:2d"),
		Entry(nil, "world-crash@effect:2"), Entry(nil, "world-crash@effect:2:before"), Entry(nil, "world-crash@t:1d"),
	)

	DescribeTable("refuses what a kind cannot take, saying why",
		func(text, want string) {
			_, err := reg.Build(mustSpec(text))
			Expect(err).To(MatchError(ContainSubstring(want)))
		},
		Entry(nil, "meteor@step:1", `unknown fault kind "meteor"`),
		Entry(nil, "harness-crash@every:1d", "does not support trigger every"),
		Entry(nil, "netdrop@t:1d", "must heal"),
		Entry(nil, "pause@step:1", "must heal"),
		Entry(nil, "kill@step:1/1h", "instantaneous"),
		Entry(nil, "kill:now@step:1", "takes no argument"),
		Entry(nil, "api-version@t:1d", "needs an argument"),
		Entry(nil, "latency:3s@t:1d/1h", "delay in (0, 2s]"),
		Entry(nil, "effect-slow:1m@effect:1", "(0, 5s]"),
		Entry(nil, "stop:2m@t:1d", "grace"),
		Entry(nil, "clock-jump:x@t:1d", "clock-jump"),
		Entry(nil, "world-crash@every:1d", "does not support trigger every"),
		Entry(nil, "world-crash@effect:2/1h", "instantaneous"),
		Entry(nil, "world-crash:now@effect:2", "takes no argument"),
	)

	It("lands effect triggers where the kind says, unless the spec names a phase", func() {
		Expect(reg.PhaseOf(mustSpec("harness-crash@effect:2"))).To(Equal(chaos.PhaseMid))
		Expect(reg.PhaseOf(mustSpec("effect-5xx@effect:2"))).To(Equal(chaos.PhaseBefore))
		Expect(reg.PhaseOf(mustSpec("kill@effect:2:after"))).To(Equal(chaos.PhaseAfter))
		Expect(reg.PhaseOf(mustSpec("world-crash@effect:2"))).To(Equal(chaos.PhaseMid))
		Expect(reg.PhaseOf(mustSpec("world-crash@effect:2:before"))).To(Equal(chaos.PhaseBefore))
	})

	It("never draws world-crash at random, saying it needs a world the harness starts", func() {
		k, ok := reg.Lookup("world-crash")
		Expect(ok).To(BeTrue())
		Expect(k.StartedWorld).To(BeTrue())
		err := reg.CheckDrawable("world-crash", chaos.Reach{Steps: 5, Effects: 5})
		Expect(err).To(MatchError(chaos.ErrNotDrawable))
		Expect(err.Error()).To(ContainSubstring("it acts only on a world the harness starts for the run (a command or image world)"))
	})
})

var _ = Describe("schedules", func() {
	reg := chaos.Default()

	It("expands every:D into firings before the horizon", func() {
		inst, err := chaos.Expand([]chaos.Spec{mustSpec("restart@every:1d"), mustSpec("kill@step:2")}, 3*24*time.Hour+time.Hour, nil)
		Expect(err).NotTo(HaveOccurred())
		var got []string
		for _, i := range inst {
			got = append(got, i.Spec.String()+" from "+i.From)
		}
		Expect(got).To(Equal([]string{
			"restart@t:1d from restart@every:1d", "restart@t:2d from restart@every:1d", "restart@t:3d from restart@every:1d",
			"kill@step:2 from kill@step:2",
		}))
	})

	It("draws rate:R/D firings from the seed: the same seed gives the same times, another seed others", func() {
		spec := []chaos.Spec{mustSpec("kill@rate:3/1d")}
		draw := func(seed int64) []string {
			inst, err := chaos.Expand(spec, 7*24*time.Hour, chaos.NewStreams(seed).For("schedule"))
			Expect(err).NotTo(HaveOccurred())
			var out []string
			for _, i := range inst {
				Expect(i.Spec.Trigger.At).To(BeNumerically("<", 7*24*time.Hour))
				out = append(out, i.Spec.String())
			}
			return out
		}
		a := draw(42)
		Expect(a).To(Equal(draw(42)))
		Expect(a).NotTo(Equal(draw(43)))
		Expect(len(a)).To(BeNumerically(">", 5), "about 21 expected in a week")
		Expect(len(a)).To(BeNumerically("<", 50))
	})

	It("refuses a recurring fault that would fire too often", func() {
		_, err := chaos.Expand([]chaos.Spec{mustSpec("kill@every:1s")}, 30*24*time.Hour, nil)
		Expect(err).To(MatchError(ContainSubstring("more than 1000 times")))
	})

	It("draws exact counts at seeded times inside the window", func() {
		d := chaos.Draw{Kinds: []string{"kill", "stop", "restart"}, Count: 3, Between: [2]time.Duration{6 * time.Hour, 6 * 24 * time.Hour}}
		a, err := d.Specs(chaos.NewStreams(1).For("schedule"), reg)
		Expect(err).NotTo(HaveOccurred())
		Expect(a).To(HaveLen(3))
		for _, s := range a {
			Expect(s.Trigger.At).To(BeNumerically(">=", 6*time.Hour))
			Expect(s.Trigger.At).To(BeNumerically("<", 6*24*time.Hour))
			Expect(s.Trigger.At % time.Minute).To(BeZero())
		}
		b, err := d.Specs(chaos.NewStreams(1).For("schedule"), reg)
		Expect(err).NotTo(HaveOccurred())
		Expect(texts(b)).To(Equal(texts(a)))
		out := chaos.Draw{Kinds: []string{"netdrop"}, Count: 2, Between: [2]time.Duration{time.Hour, 2 * time.Hour}, Duration: [2]time.Duration{30 * time.Minute, time.Hour}}
		nd, err := out.Specs(chaos.NewStreams(1).For("x"), reg)
		Expect(err).NotTo(HaveOccurred())
		for _, s := range nd {
			Expect(s.Duration).To(BeNumerically(">=", 30*time.Minute))
			Expect(s.Duration).To(BeNumerically("<=", time.Hour))
		}
	})

	It("draws random chaos only from triggers the run can reach, never harness-crash", func() {
		reach := chaos.Reach{Steps: 5, Effects: 5}
		for seed := int64(0); seed < 20; seed++ {
			specs, err := chaos.RandomSchedule(chaos.NewStreams(seed).For("random-chaos"), reg, reach, 6)
			Expect(err).NotTo(HaveOccurred())
			Expect(specs).To(HaveLen(6))
			points := map[string]string{}
			for _, s := range specs {
				k, _ := reg.Lookup(s.Kind)
				p := fmt.Sprintf("%s:%d", s.Trigger.Type, s.Trigger.N)
				Expect(points).NotTo(HaveKey(k.Group+"@"+p), "%s and %s cover each other", points[k.Group+"@"+p], s)
				Expect(points).NotTo(HaveKey("process@"+p), "%s covers %s", points["process@"+p], s)
				if k.Group == "process" {
					Expect(points).NotTo(HaveKey(p), "%s covers %s", s, points[p])
				}
				points[k.Group+"@"+p], points[p] = s.String(), s.String()
				Expect(s.Kind).NotTo(Equal("harness-crash"))
				Expect(s.Trigger.Type).To(BeElementOf(chaos.TriggerStep, chaos.TriggerEffect), s.String())
				Expect(s.Trigger.N).To(BeNumerically("<=", 5))
				_, err := reg.Build(s)
				Expect(err).NotTo(HaveOccurred())
			}
		}
		a, _ := chaos.RandomSchedule(chaos.NewStreams(7).For("random-chaos"), reg, reach, 6)
		b, _ := chaos.RandomSchedule(chaos.NewStreams(7).For("random-chaos"), reg, reach, 6)
		c, _ := chaos.RandomSchedule(chaos.NewStreams(8).For("random-chaos"), reg, reach, 6)
		Expect(texts(a)).To(Equal(texts(b)))
		Expect(texts(a)).NotTo(Equal(texts(c)))
	})

	It("draws, without a kinds filter, exactly the schedules it drew before kinds could be limited", func() {
		// Pinned from the draw as it was before Reach.Kinds existed: a
		// filter must not move a single unfiltered seed.
		deploy := chaos.Reach{Steps: 5, Effects: 5, LLMCalls: 1}
		week := chaos.Reach{Steps: 8, Effects: 9, Virtual: 7 * 24 * time.Hour}
		want := map[int64][2][]string{
			1: {{"blackhole@llm:1/6m", "stop:2s@effect:5:after/3m", "api-version:v2@effect:2", "pause@effect:4:before/4m", "blackhole@step:1/1m"},
				{"blackhole@t:2d6h28m/9h47m", "stop:2s@effect:8:after/2h31m", "api-version:v2@effect:4", "pause@effect:7:before/5h10m", "blackhole@step:4/11m"}},
			2: {{"api-version:v2@effect:3", "blackhole@step:3/3m", "llm-5xx@llm:1", "blackhole@llm:1/8m", "effect-5xx@effect:4"},
				{"api-version:v2@effect:5", "blackhole@step:6/4h25m", "netdrop@t:5d6h20m/3h28m", "latency:78ms+22ms@effect:5:after/13h20m", "pause@effect:9:after/13h50m"}},
			3: {{"kill@llm:1", "clock-jump:1h@step:2", "api-version:v2@effect:2", "api-version:v2@effect:3", "effect-slow:193ms@effect:5"},
				{"kill@t:6d23h34m", "clock-jump:1h@step:7", "api-version:v2@effect:3", "api-version:v2@effect:5", "blackhole@t:18h14m/1h13m"}},
			4: {{"effect-slow:238ms@effect:1", "api-version:v2@effect:2", "blackhole@step:1/1m", "latency:30ms+26ms@effect:5/7m", "clock-jump:10h@llm:1"},
				{"effect-slow:238ms@effect:2", "api-version:v2@effect:3", "blackhole@step:5/1h20m", "latency:30ms+26ms@effect:8/10h33m", "pause@step:7/10h57m"}},
		}
		for seed, w := range want {
			for i, reach := range []chaos.Reach{deploy, week} {
				specs, err := chaos.RandomSchedule(chaos.NewStreams(seed).For("random-chaos"), reg, reach, 5)
				Expect(err).NotTo(HaveOccurred())
				Expect(texts(specs)).To(Equal(w[i]), "seed %d, reach %+v", seed, reach)
			}
		}
	})

	It("draws only the kinds reach.Kinds names, the same schedule per seed whatever their order", func() {
		reach := chaos.Reach{Steps: 5, Effects: 5, LLMCalls: 1, Kinds: []string{"kill", "restart"}}
		seen := map[string]int{}
		for seed := int64(1); seed <= 60; seed++ {
			specs, err := chaos.RandomSchedule(chaos.NewStreams(seed).For("random-chaos"), reg, reach, 5)
			Expect(err).NotTo(HaveOccurred())
			Expect(specs).To(HaveLen(5))
			for _, s := range specs {
				Expect(s.Kind).To(BeElementOf("kill", "restart"), "seed %d: %s", seed, s)
				seen[s.Kind]++
			}
			again := reach
			again.Kinds = []string{"restart", "kill", "restart"}
			same, err := chaos.RandomSchedule(chaos.NewStreams(seed).For("random-chaos"), reg, again, 5)
			Expect(err).NotTo(HaveOccurred())
			Expect(texts(same)).To(Equal(texts(specs)), "seed %d", seed)
		}
		Expect(seen).To(HaveKey("kill"))
		Expect(seen).To(HaveKey("restart"))

		worldOnly := chaos.Reach{Steps: 5, Effects: 5, Kinds: []string{"effect-5xx", "effect-slow"}}
		for seed := int64(1); seed <= 20; seed++ {
			specs, err := chaos.RandomSchedule(chaos.NewStreams(seed).For("random-chaos"), reg, worldOnly, 3)
			Expect(err).NotTo(HaveOccurred())
			for _, s := range specs {
				Expect(s.Kind).To(BeElementOf("effect-5xx", "effect-slow"), "seed %d: %s", seed, s)
			}
		}
	})

	DescribeTable("refuses a kind random chaos cannot draw, saying why and what to do",
		func(reach chaos.Reach, kind string, sentinel error, want ...string) {
			reach.Kinds = []string{"kill", kind}
			_, err := chaos.RandomSchedule(chaos.NewStreams(1).For("random-chaos"), reg, reach, 3)
			Expect(err).To(MatchError(sentinel))
			for _, w := range want {
				Expect(err.Error()).To(ContainSubstring(w))
			}
			Expect(reg.CheckDrawable(kind, reach)).To(MatchError(err.Error()))
		},
		Entry("an unknown kind, listing the kinds random draws", chaos.Reach{Steps: 5}, "kil", chaos.ErrUnknownFault,
			`unknown fault kind "kil" (the kinds --chaos random draws: kill, pause, restart, stop, blackhole, latency, netdrop, llm-429,`),
		Entry("harness-crash, which ends the harness", chaos.Reach{Steps: 5}, "harness-crash", chaos.ErrNotDrawable,
			"harness-crash is not drawn at random: it ends the harness's own process; schedule it by hand instead, as in --fault harness-crash@effect:2"),
		Entry("disconnect, which random never draws", chaos.Reach{Steps: 5}, "disconnect", chaos.ErrNotDrawable,
			"disconnect is not drawn at random; schedule it by hand instead, as in --fault disconnect@t:1d/2h"),
		Entry("an LLM fault in a run without LLM calls", chaos.Reach{Steps: 5, Effects: 5}, "llm-429", chaos.ErrNotDrawable,
			"llm-429 is not drawn at random for this run: it is drawn only at an LLM call (llm:N), and the run reaches none (reach: steps 5, effects 5, llm_calls 0, virtual 0s); give the scenario's reach llm_calls, or leave llm-429 out"),
		Entry("a world fault in a run without effects", chaos.Reach{Steps: 5}, "api-version", chaos.ErrNotDrawable,
			"drawn only at an effect (effect:N)", "give the scenario's reach effects"),
	)

	It("still draws a schedule that needs more faults than the reach has free points", func() {
		for seed := int64(0); seed < 50; seed++ {
			specs, err := chaos.RandomSchedule(chaos.NewStreams(seed).For("random-chaos"), reg, chaos.Reach{Steps: 1}, 3)
			Expect(err).NotTo(HaveOccurred(), "seed %d", seed)
			Expect(specs).To(HaveLen(3))
			specs, err = chaos.RandomSchedule(chaos.NewStreams(seed).For("random-chaos"), reg, chaos.Reach{Steps: 5, Effects: 5, LLMCalls: 2}, 40)
			Expect(err).NotTo(HaveOccurred(), "seed %d", seed)
			Expect(specs).To(HaveLen(40))
		}
	})

	It("keeps the streams of different components independent", func() {
		s := chaos.NewStreams(5)
		Expect(s.For("a").Int64()).To(Equal(s.For("a").Int64()))
		Expect(s.For("a").Int64()).NotTo(Equal(s.For("b").Int64()))
	})
})

var _ = Describe("Shrink", func() {
	It("finds the faults that matter, then shortens and moves them earlier", func(ctx SpecContext) {
		var faults []chaos.Spec
		for i := 1; i <= 12; i++ {
			faults = append(faults, mustSpec(fmt.Sprintf("latency:10ms@step:%d/1h", i)))
		}
		faults[4] = mustSpec("kill@step:5")
		faults[9] = mustSpec("netdrop@t:2d/4h")
		// The run fails when a kill lands at step >= 3 and an outage of at
		// least 30m happens after 12h: a stand-in for a real run's verdict.
		oracle := func(_ context.Context, fs []chaos.Spec) (bool, error) {
			kill, drop := false, false
			for _, f := range fs {
				if f.Kind == "kill" && f.Trigger.N >= 3 {
					kill = true
				}
				if f.Kind == "netdrop" && f.Duration >= 30*time.Minute && f.Trigger.At >= 12*time.Hour {
					drop = true
				}
			}
			return kill && drop, nil
		}
		res, err := chaos.Shrink(ctx, faults, oracle, 200)
		Expect(err).NotTo(HaveOccurred())
		Expect(texts(res.Faults)).To(Equal([]string{"kill@step:3", "netdrop@t:12h/30m"}))
		Expect(res.Runs).To(BeNumerically("<", 100))
	})

	It("stops at its run budget with a schedule that still fails", func(ctx SpecContext) {
		var faults []chaos.Spec
		for i := 1; i <= 16; i++ {
			faults = append(faults, mustSpec(fmt.Sprintf("kill@step:%d", i)))
		}
		oracle := func(_ context.Context, fs []chaos.Spec) (bool, error) {
			return strings.Contains(strings.Join(texts(fs), " "), "kill@step:16"), nil
		}
		res, err := chaos.Shrink(ctx, faults, oracle, 3)
		Expect(err).To(MatchError(chaos.ErrShrinkBudget))
		Expect(res.Runs).To(Equal(3))
		ok, _ := oracle(ctx, res.Faults)
		Expect(ok).To(BeTrue())
	})

	It("reports a schedule whose failure needs no fault at all as empty", func(ctx SpecContext) {
		res, err := chaos.Shrink(ctx, []chaos.Spec{mustSpec("kill@step:1"), mustSpec("kill@step:2")},
			func(context.Context, []chaos.Spec) (bool, error) { return true, nil }, 50)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Faults).To(BeEmpty())
	})
})
