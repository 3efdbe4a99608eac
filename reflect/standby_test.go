package reflect_test

import (
	"context"
	"os"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/reflect"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/scenarios/agents"
)

// openWith is open with the reflection loop's options and the harness's
// standby policy.
func openWith(ctx context.Context, opts reflect.Options, policy harness.StandbyPolicy) *harness.Harness {
	state := GinkgoT().TempDir()
	ext, err := reflect.New(opts)
	Expect(err).NotTo(HaveOccurred())
	h, err := harness.Open(ctx, harness.Options{StateDir: state, InitBinary: initBinary, Sandbox: docker.Using(dockerCli), Extension: ext,
		BuiltinAgents: agents.Names(), Standby: policy})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(h.Close()).To(Succeed())
		Expect(harnesstest.Leftovers(ctx, dockerCli, state)).To(BeEmpty(), "containers, workspaces or networks left behind")
	})
	return h
}

// isolatedAttempts are the first attempts of a reflection's isolated runs:
// the replays', the counterfactual's and the verification's.
func isolatedAttempts(h *harness.Harness, r history.ReflectionRecord) map[string]history.AttemptRecord {
	GinkgoHelper()
	out := map[string]history.AttemptRecord{}
	for _, id := range append([]string{r.Counterfactual.RunID, r.Verification.RunID}, replayIDs(r)...) {
		atts, err := h.History().Attempts(id)
		Expect(err).NotTo(HaveOccurred())
		Expect(atts).To(HaveLen(1), "isolated run %s", id)
		out[id] = atts[0]
	}
	return out
}

// socketDirGone says whether an isolated run's gateway socket dir was
// removed with its drive.
func socketDirGone(h *harness.Harness, id string) bool {
	rec, err := h.History().Run(id)
	Expect(err).NotTo(HaveOccurred())
	Expect(rec.SocketDir).NotTo(BeEmpty())
	_, err = os.Stat(rec.SocketDir)
	return os.IsNotExist(err)
}

var _ = Describe("standbys for a reflection's isolated runs", func() {
	It("starts them ahead, as a run with faults begins: every replay, the counterfactual and the verification take one over before the failure, and nothing is left", func(ctx SpecContext) {
		h := openWith(ctx, reflect.Options{Lessons: reflect.LessonsNone}, harness.StandbyAuto)
		engine := watchContainers(ctx, h.StateDir())
		r := reflectsOnStandbys(ctx, h)
		seen := engine()
		// The run has a fault schedule: every isolated run's sandbox was
		// created as it began, before its failure.
		for _, id := range append([]string{r.Counterfactual.RunID, r.Verification.RunID}, replayIDs(r)...) {
			Expect(seen[id]["create"]).NotTo(BeZero(), "isolated run %s's sandbox was created", id)
			Expect(seen[id]["create"]).To(BeNumerically("<", r.OpenedAt.UnixNano()), "isolated run %s's sandbox was created before the failure", id)
		}
	}, SpecTimeout(4*time.Minute))

	It("starts them as the reflection opens with IsolatedAtFailure: the verification's once the others have started", func(ctx SpecContext) {
		h := openWith(ctx, reflect.Options{Lessons: reflect.LessonsNone, IsolatedAtFailure: true}, harness.StandbyAuto)
		engine := watchContainers(ctx, h.StateDir())
		r := reflectsOnStandbys(ctx, h)
		seen := engine()
		verification := seen[r.Verification.RunID]["create"]
		Expect(verification).NotTo(BeZero(), "the verification's sandbox was created")
		for _, id := range append([]string{r.Counterfactual.RunID}, replayIDs(r)...) {
			Expect(seen[id]["create"]).To(BeNumerically(">=", r.OpenedAt.UnixNano()), "isolated run %s's sandbox was created as the reflection opened", id)
			Expect(seen[id]["start"]).NotTo(BeZero(), "isolated run %s's sandbox was started", id)
			Expect(seen[id]["start"]).To(BeNumerically("<=", verification), "isolated run %s's sandbox started before the verification's was created", id)
		}
	}, SpecTimeout(4*time.Minute))

	It("starts none ahead for a run without faults: one that passes started only its own sandboxes", func(ctx SpecContext) {
		h := openWith(ctx, reflect.Options{Lessons: reflect.LessonsNone}, harness.StandbyAuto)
		engine := watchContainers(ctx, h.StateDir())
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deployV2("faults: [api-version:v2@step:3]", "faults: []")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Reflections).To(BeEmpty())
		seen := engine()
		Expect(seen).To(HaveKey(res.RunID), "the engine's events were seen")
		Expect(seen).To(HaveLen(1), "no sandbox of another run (an isolated run's standby) was created")
	}, SpecTimeout(4*time.Minute))

	It("starts them cold with ColdIsolated, and with the harness's standbys off", func(ctx SpecContext) {
		for _, c := range []struct {
			opts   reflect.Options
			policy harness.StandbyPolicy
		}{
			{reflect.Options{Lessons: reflect.LessonsNone, ColdIsolated: true}, harness.StandbyAuto},
			{reflect.Options{Lessons: reflect.LessonsNone}, harness.StandbyOff},
		} {
			h := openWith(ctx, c.opts, c.policy)
			res, err := h.Run(ctx, harness.RunRequest{Scenario: deployV2()})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
			refls, err := h.History().Reflections(res.RunID)
			Expect(err).NotTo(HaveOccurred())
			for id, a := range isolatedAttempts(h, refls[0]) {
				Expect(a.Standby).To(BeFalse(), "isolated run %s started cold", id)
			}
		}
	}, SpecTimeout(6*time.Minute))

	It("gives up a standby no run took: its sandbox, workspace and socket dir go", func(ctx SpecContext) {
		h := openWith(ctx, reflect.Options{Lessons: reflect.LessonsNone}, harness.StandbyAuto)
		parent := mustRun(ctx, h)
		sbs, err := h.StandbyIsolated(ctx, parent, 2)
		Expect(err).NotTo(HaveOccurred())
		Expect(sbs).To(HaveLen(2))
		Eventually(func() ([]string, error) { return harnesstest.AllContainers(ctx, dockerCli, h.StateDir()) }).
			WithTimeout(time.Minute).Should(HaveLen(2), "both standbys started")
		for _, s := range sbs {
			Expect(s.SocketDir()).To(BeADirectory())
			Expect(s.Release(ctx)).To(Succeed())
			Expect(s.Release(ctx)).To(Succeed(), "twice is harmless")
			Expect(s.SocketDir()).NotTo(BeAnExistingFile(), "its socket dir went with it")
		}
		Expect(harnesstest.AllContainers(ctx, dockerCli, h.StateDir())).To(BeEmpty())
		_, err = h.Isolated(ctx, harness.IsolatedRequest{Parent: parent, Standby: sbs[0]})
		Expect(err).To(MatchError(ContainSubstring("released already")), "a released standby serves no run")
	}, SpecTimeout(4*time.Minute))
})

// mustRun runs deploy-v2 without reflection's gate (a quick real run to
// be a parent) and returns its id.
func mustRun(ctx context.Context, h *harness.Harness) string {
	GinkgoHelper()
	scen := deployV2("reflect: {replays: 3, max: 2}\n", "", "policy: verify}", "policy: allow}", "policy: verify}", "policy: allow}")
	res, err := h.Run(ctx, harness.RunRequest{Scenario: scen})
	Expect(err).NotTo(HaveOccurred())
	return res.RunID
}

// reflectsOnStandbys runs deploy-v2 and checks that its one reflection
// decided as without standbys, each of its five isolated runs on one, and
// that nothing of the run is left; it returns the reflection.
func reflectsOnStandbys(ctx context.Context, h *harness.Harness) history.ReflectionRecord {
	GinkgoHelper()
	res, err := h.Run(ctx, harness.RunRequest{Scenario: deployV2()})
	Expect(err).NotTo(HaveOccurred())
	Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
	refls, err := h.History().Reflections(res.RunID)
	Expect(err).NotTo(HaveOccurred())
	Expect(refls).To(HaveLen(1))
	r := refls[0]
	// Determinism holds as without standbys: three replays that fail the
	// same way, no divergence, a counterfactual that passes.
	Expect(res.Reflections).To(HaveLen(1))
	Expect(res.Reflections[0].Reproduced).To(Equal(history.Reproduced{Runs: 3, Failed: 3}))
	Expect(r.Divergence).To(BeEmpty())
	Expect(r.Counterfactual.Reproduced).To(BeFalse())
	Expect(r.Decision).To(Equal(history.DecisionVerify))
	atts := isolatedAttempts(h, r)
	Expect(atts).To(HaveLen(5))
	for id, a := range atts {
		Expect(a.Standby).To(BeTrue(), "isolated run %s took over a standby", id)
		Expect(a.Container).NotTo(BeEmpty())
		Expect(socketDirGone(h, id)).To(BeTrue(), "isolated run %s's socket dir", id)
	}
	// No sandbox of the run's state dir is left once the run ended (the
	// spec's cleanup checks the workspaces and networks too).
	Expect(harnesstest.AllContainers(ctx, dockerCli, h.StateDir())).To(BeEmpty())
	return r
}

// watchContainers follows the engine's create and start events of the
// sandboxes of state dir's runs from now; the function it returns stops
// following and gives, for each run, the engine's time (ns) of each event.
func watchContainers(ctx context.Context, stateDir string) func() map[string]map[string]int64 {
	GinkgoHelper()
	wctx, cancel := context.WithCancel(ctx)
	msgs, errs := dockerCli.Events(wctx, events.ListOptions{Filters: filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("label", sandbox.LabelState+"="+sandbox.StateHash(stateDir)),
		filters.Arg("event", string(events.ActionCreate)), filters.Arg("event", string(events.ActionStart)))})
	seen := map[string]map[string]int64{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case m := <-msgs:
				run := m.Actor.Attributes[sandbox.LabelRun]
				if run == "" {
					continue
				}
				if seen[run] == nil {
					seen[run] = map[string]int64{}
				}
				seen[run][string(m.Action)] = m.TimeNano
			case <-errs:
				return
			}
		}
	}()
	DeferCleanup(cancel)
	return func() map[string]map[string]int64 {
		time.Sleep(200 * time.Millisecond) // events the engine has not sent yet
		cancel()
		<-done
		return seen
	}
}
