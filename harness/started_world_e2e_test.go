package harness_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/builtin"
)

// deployOn is the built-in deploy scenario with its world replaced by
// world (a YAML flow mapping), written to a file of the spec's own (a
// command world runs in the scenario file's directory).
func deployOn(world string) *scenarios.Scenario {
	GinkgoHelper()
	raw, ok := builtin.Lookup("deploy")
	Expect(ok).To(BeTrue())
	text := strings.Replace(string(raw), "\nworld: cloud\n", "\nworld: "+world+"\n", 1)
	Expect(text).NotTo(Equal(string(raw)))
	file := filepath.Join(GinkgoT().TempDir(), "deploy-world.yaml")
	Expect(os.WriteFile(file, []byte(text), 0o644)).To(Succeed())
	s, err := scenarios.Load(file)
	Expect(err).NotTo(HaveOccurred())
	return s
}

// commandWorld is the cloud world served by `overnight world serve` as a
// command world, its state in $OVERNIGHT_WORLD_DATA.
func commandWorld() string {
	return fmt.Sprintf("{name: cloud, command: [%s, world, serve, cloud, --data, $OVERNIGHT_WORLD_DATA]}", overnightBinary)
}

// worldLog is run runID's world's log in state.
func worldLog(state, runID string) string {
	GinkgoHelper()
	b, err := os.ReadFile(filepath.Join(state, "worlds", "cloud-"+runID, "world.log"))
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

// effectAt is the run's effect of order n.
func effectAt(h *harness.Harness, runID string, n int64) history.EffectRecord {
	GinkgoHelper()
	effects, err := h.History().Effects(runID)
	Expect(err).NotTo(HaveOccurred())
	for _, e := range effects {
		if e.Order == n {
			return e
		}
	}
	Fail(fmt.Sprintf("run %s has no effect %d", runID, n))
	return history.EffectRecord{}
}

var _ = Describe("Image worlds: a world the harness starts per run from an image on the engine", Ordered, func() {
	var tag string
	BeforeAll(func(ctx SpecContext) {
		tag = fmt.Sprintf("overnight-test/cloud-world:%d", GinkgoParallelProcess()*1_000_000_000+int(time.Now().UnixNano()%1_000_000_000))
		DeferCleanup(func(ctx SpecContext) { Expect(harnesstest.RemoveImage(ctx, dockerCli, tag)).To(Succeed()) })
		Expect(harnesstest.WorldImage(ctx, dockerCli, overnightBinary, tag, "cloud", 8080)).To(Succeed())
	}, NodeTimeout(2*time.Minute))

	It("runs deploy through a kill to the verdict and history digest of the in-process world, keeps the world's data and log, and leaves no container", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		local, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults("kill@step:3")})
		Expect(err).NotTo(HaveOccurred())
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deployOn("{name: cloud, image: " + tag + ", port: 8080}"), Faults: faults("kill@step:3")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Attempts).To(Equal(2))
		Expect(res.Effects).To(Equal(local.Effects))
		Expect(res.HistoryDigest).To(Equal(local.HistoryDigest))

		// Its container went with the run; its output is in its log, its
		// state in its data dir (a Badger database, the harness's own).
		left, err := harnesstest.Containers(ctx, dockerCli, h.StateDir())
		Expect(err).NotTo(HaveOccurred())
		Expect(left).To(BeEmpty(), "the world's container outlived its run")
		log := worldLog(h.StateDir(), res.RunID)
		Expect(log).To(ContainSubstring("--- overnight: starting image " + tag + " for run " + res.RunID))
		Expect(log).To(MatchRegexp(`serving world cloud on http://\S+:8080, state in /data\n`))
		Expect(log).To(ContainSubstring("stopped by the harness"))
		data, err := os.ReadDir(filepath.Join(h.StateDir(), "worlds", "cloud-"+res.RunID, "data"))
		Expect(err).NotTo(HaveOccurred())
		Expect(data).NotTo(BeEmpty())
		fi, err := os.Stat(filepath.Join(h.StateDir(), "worlds", "cloud-"+res.RunID, "data", data[0].Name()))
		Expect(err).NotTo(HaveOccurred())
		Expect(fi.Sys()).To(HaveField("Uid", BeEquivalentTo(os.Getuid())), "the world writes its data as the harness's user")

		// Its history still reads, the ledger from the journal of the
		// world's answers.
		run, err := h.History().Load(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(run.Ledger).To(HaveLen(5))
	}, SpecTimeout(3*time.Minute))

	It("kills the image world at effect 2 after it acted (world-crash): the effect is reconciled by lookup on the world started again on its data", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deployOn("{name: cloud, image: " + tag + ", port: 8080}"), Faults: faults("world-crash@effect:2")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v", res.Reason, res.Faults)
		Expect(res.Effects.Duplicates).To(Equal(0))
		Expect(res.Faults[0].Met).To(BeTrue(), res.Faults[0].MetDetail)
		Expect(res.Faults[0].MetDetail).To(Equal("the run's world was killed after it acted on effect 2, whose answer was lost"))
		e := effectAt(h, res.RunID, 2)
		Expect(e.Status).To(Equal("done"))
		Expect(e.Reconciled).To(BeTrue())
		Expect(e.Executions).To(Equal(1))
		log := worldLog(h.StateDir(), res.RunID)
		Expect(strings.Count(log, "--- overnight: starting image")).To(Equal(2), log)
		Expect(log).To(ContainSubstring("its container exited (code 137)"))
	}, SpecTimeout(3*time.Minute))

	It("refuses a world whose container exits before it answers describe, with the end of its log, before any run is recorded", func(ctx SpecContext) {
		broken := tag + "-broken"
		DeferCleanup(func(ctx SpecContext) { Expect(harnesstest.RemoveImage(ctx, dockerCli, broken)).To(Succeed()) })
		Expect(harnesstest.WorldImage(ctx, dockerCli, overnightBinary, broken, "nosuch", 8080)).To(Succeed())
		h := newHarness(ctx, nil)
		_, err := h.Run(ctx, harness.RunRequest{Scenario: deployOn("{name: cloud, image: " + broken + "}")})
		Expect(err).To(MatchError(harness.ErrWorldUnreachable))
		Expect(err.Error()).To(ContainSubstring("its container exited (code 3)"))
		Expect(err.Error()).To(ContainSubstring(`no built-in world "nosuch"`))
		runs, err := h.History().Runs()
		Expect(err).NotTo(HaveOccurred())
		Expect(runs).To(BeEmpty())
	}, SpecTimeout(time.Minute))

	It("refuses an image that is not on the engine before any run is recorded, naming it", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		_, err := h.Run(ctx, harness.RunRequest{Scenario: deployOn("{name: cloud, image: overnight-test/no-such-world:1}")})
		Expect(err).To(MatchError(sandbox.ErrImageNotFound))
		Expect(err.Error()).To(ContainSubstring("image overnight-test/no-such-world:1 is not on the engine, which pulls nothing"))
		runs, err := h.History().Runs()
		Expect(err).NotTo(HaveOccurred())
		Expect(runs).To(BeEmpty())
	}, SpecTimeout(time.Minute))
})

var _ = Describe("The world-crash fault", func() {
	It("kills a command world after it acted on effect 2: the answer is lost, the effect reconciled by lookup once the world is back, nothing twice", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deployOn(commandWorld()), Faults: faults("world-crash@effect:2")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v", res.Reason, res.Faults)
		Expect(res.Attempts).To(Equal(1))
		Expect(res.Effects.Duplicates).To(Equal(0))
		Expect(res.Effects.Unknown).To(Equal(0))
		Expect(res.Effects.Executed).To(Equal(5), "the world acted once on each effect")
		Expect(res.Faults[0].Applied).To(BeTrue())
		Expect(res.Faults[0].Met).To(BeTrue(), res.Faults[0].MetDetail)
		e := effectAt(h, res.RunID, 2)
		Expect(e.Status).To(Equal("done"))
		Expect(e.Reconciled).To(BeTrue(), "the agent's retry found it in the world")
		Expect(e.Intents).To(Equal(1))
		Expect(e.Executions).To(Equal(1))
		events, err := h.History().Events(res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(events).To(ContainElement(HaveField("Message", "effect "+history.EffectLabel(e.ID)+" reconciled: done")))
		log := worldLog(h.StateDir(), res.RunID)
		Expect(strings.Count(log, "--- overnight: starting")).To(Equal(2), log)
	}, SpecTimeout(2*time.Minute))

	It("kills a command world before effect 2 reaches it (effect:2:before): lookup finds nothing, not_executed, and the agent's retry runs it", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deployOn(commandWorld()), Faults: faults("world-crash@effect:2:before")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v", res.Reason, res.Faults)
		Expect(res.Effects.Duplicates).To(Equal(0))
		Expect(res.Effects.Executed).To(Equal(5))
		Expect(res.Faults[0].MetDetail).To(Equal("the run's world was killed before effect 2 reached it"))
		e := effectAt(h, res.RunID, 2)
		Expect(e.Status).To(Equal("done"))
		Expect(e.Reconciled).To(BeTrue())
		Expect(e.Intents).To(Equal(2), "sent, lost, then sent again")
		Expect(e.Executions).To(Equal(1), "executed once, by the retry")
		events, err := h.History().Events(res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(events).To(ContainElement(HaveField("Message", "effect "+history.EffectLabel(e.ID)+" reconciled: failed")), "not_executed")
		log := worldLog(h.StateDir(), res.RunID)
		Expect(strings.Count(log, "--- overnight: starting")).To(Equal(2), log)
	}, SpecTimeout(2*time.Minute))

	It("is refused before the run on a built-in world or a world reached by URL", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		_, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults("world-crash@effect:2")})
		Expect(err).To(MatchError(chaos.ErrUnsupported))
		Expect(err.Error()).To(ContainSubstring("world-crash acts on a world the harness starts for the run, and this scenario's world cloud is built into the harness"))
		_, err = h.Run(ctx, harness.RunRequest{Scenario: deploy(), World: "http://127.0.0.1:9", Faults: faults("world-crash@step:1")})
		Expect(err).To(MatchError(chaos.ErrUnsupported))
		Expect(err.Error()).To(ContainSubstring("world at http://127.0.0.1:9 is reached by URL, and the harness cannot restart it"))
		runs, err := h.History().Runs()
		Expect(err).NotTo(HaveOccurred())
		Expect(runs).To(BeEmpty())

		// validate says so too, at the fault's place in the file.
		raw, _ := builtin.Lookup("deploy")
		scen, err := scenarios.Parse("crash.yaml", []byte(strings.Replace(string(raw), "\nfaults: []\n", "\nfaults: [world-crash@effect:2]\n", 1)))
		Expect(err).NotTo(HaveOccurred())
		err = harness.CheckScenario(scen, harness.CheckOptions{Faults: chaos.Default()})
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("faults[0]: world-crash acts on a world the harness starts for the run"))
	}, SpecTimeout(time.Minute))
})
