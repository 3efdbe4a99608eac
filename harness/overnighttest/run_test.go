package overnighttest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/overnighttest"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/builtin"
)

var _ = Describe("Run and RunTrials", func() {
	Describe("refusing before anything runs", func() {
		It("refuses a harness crash, which would end the test process", func(ctx SpecContext) {
			_, err := overnighttest.Run(ctx, "deploy", overnighttest.Faults("kill@step:1", "harness-crash@step:2"))
			Expect(err).To(MatchError(overnighttest.ErrHarnessCrash))
			Expect(err).To(MatchError(ContainSubstring("fault harness-crash@step:2; test a harness crash with the overnight CLI as a child process")))
			_, err = overnighttest.RunTrials(ctx, "deploy", overnighttest.Seeds(2), overnighttest.Faults("harness-crash@effect:2"))
			Expect(err).To(MatchError(overnighttest.ErrHarnessCrash))

			raw, _ := builtin.Lookup("deploy")
			crashing := strings.Replace(string(raw), "faults: []", "faults: [harness-crash@step:2]", 1)
			_, err = overnighttest.Run(ctx, []byte(crashing))
			Expect(err).To(MatchError(overnighttest.ErrHarnessCrash))
		})

		It("refuses bad options, scenarios and init binaries, saying what to give", func(ctx SpecContext) {
			_, err := overnighttest.Run(ctx, "deploy", overnighttest.Faults("kill@step:3"), overnighttest.ChaosRandom(3))
			Expect(err).To(MatchError(harness.ErrFaultSources))
			_, err = overnighttest.Run(ctx, "deploy", overnighttest.Faults("kill@stp:3"))
			Expect(err).To(MatchError(ContainSubstring(`Faults: fault "kill@stp:3": at column 6`)))
			_, err = overnighttest.Run(ctx, "deploy", overnighttest.ChaosRandom(0))
			Expect(err).To(MatchError("ChaosRandom(0): want 1..100 faults"))
			_, err = overnighttest.Run(ctx, "no-such-scenario")
			Expect(err).To(MatchError(scenarios.ErrUnknownScenario))
			_, err = overnighttest.Run(ctx, 42)
			Expect(err).To(MatchError("overnighttest: a scenario is a built-in name or a file path (string), YAML ([]byte) or a *scenarios.Scenario, not int"))
			_, err = overnighttest.Run(ctx, []byte("apiVersion: overnight/v1\nkind: Scenario\nname: x\n"))
			Expect(err).To(MatchError(ContainSubstring("<yaml>:")))
			_, err = overnighttest.RunTrials(ctx, "deploy", overnighttest.Seeds(2), overnighttest.Seed(4))
			Expect(err).To(MatchError(ContainSubstring("RunTrials runs the seeds it is given")))
			_, err = overnighttest.RunTrials(ctx, "deploy", nil)
			Expect(err).To(MatchError(ContainSubstring("no seeds")))
			_, err = overnighttest.Run(ctx, "deploy", overnighttest.InitBinary(filepath.Join(GinkgoT().TempDir(), "missing")))
			Expect(err).To(MatchError(overnighttest.ErrNoInitBinary))
		})
	})

	// These specs drive real runs against the Docker engine.
	Describe("against the Docker engine", Ordered, func() {
		var (
			bin       string // the sandboxes' overnight-sandbox
			cli       string // the overnight CLI, which injects bin here
			dockerCli *client.Client
		)
		BeforeAll(func(ctx SpecContext) {
			bin = overnighttest.BuildInitBinary(ctx, GinkgoT())
			cli = filepath.Join(GinkgoT().TempDir(), "overnight")
			Expect(harnesstest.Build(ctx, "./cmd/overnight", cli, "")).To(Succeed())
			var err error
			dockerCli, err = docker.Connect(ctx)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(dockerCli.Close)
		}, NodeTimeout(6*time.Minute))

		// noLeftovers checks that nothing labelled with the state dir is
		// left on the engine (and removes what is).
		noLeftovers := func(ctx context.Context, dir string) {
			GinkgoHelper()
			Expect(harnesstest.Leftovers(ctx, dockerCli, dir)).To(BeEmpty(), "containers, volumes or networks left behind")
		}

		It("runs a built-in scenario through a kill on a state dir it keeps, and reads its history", func(ctx SpecContext) {
			dir := GinkgoT().TempDir()
			res, err := overnighttest.Run(ctx, "deploy", overnighttest.Seed(2), overnighttest.Faults("kill@step:3"),
				overnighttest.StateDir(dir), overnighttest.Progress(GinkgoWriter))
			Expect(err).NotTo(HaveOccurred())
			Expect(res).To(overnighttest.Pass())
			Expect(res).To(overnighttest.SurviveFaults())
			Expect(res).To(overnighttest.HoldInvariant("no-duplicate-effects"))
			Expect(res.Attempts).To(Equal(2))
			Expect(res.History.Ledger).To(HaveLen(5), "the world received each of the five steps once")
			Expect(res.StateDir).To(Equal(dir))
			Expect(res.InMemory).To(BeFalse())
			Expect(res.Reproduce).To(Equal("overnight --state " + dir + " run deploy --seed 2 --fault kill@step:3 --lessons none"))

			// The state dir is released and kept: the CLI lists the run.
			out, err := exec.CommandContext(ctx, cli, "--state", dir, "runs", "--output", "json").Output()
			Expect(err).NotTo(HaveOccurred())
			Expect(string(out)).To(ContainSubstring(res.RunID))
			noLeftovers(ctx, dir)
		})

		It("explains a failing run with a command that reproduces it to the same history", func(ctx SpecContext) {
			res, err := overnighttest.Run(ctx, "deploy", overnighttest.Agent("naive"), overnighttest.Faults("kill@step:3"))
			Expect(err).NotTo(HaveOccurred())
			Expect(res).NotTo(overnighttest.HoldInvariant("no-duplicate-effects"))
			Expect(res).NotTo(overnighttest.Pass())
			Expect(res.Reproduce).To(Equal("overnight run deploy --seed 1 --agent naive --fault kill@step:3 --lessons none"))

			held := overnighttest.HoldInvariant("no-duplicate-effects")
			Expect(held.Match(res)).To(BeFalse())
			msg := held.FailureMessage(res)
			Expect(msg).To(HavePrefix("Expected invariant no-duplicate-effects to hold in run " + res.RunID + " (deploy, seed 1, agent naive), but it failed\n  verdict: fail after 2 attempts"))
			Expect(msg).To(ContainSubstring(`  invariant no-duplicate-effects (always) fail: network "prod-net" created 2 times`))
			Expect(msg).To(HaveSuffix("\n  reproduce: " + res.Reproduce))

			// Its temporary state dir is gone, with all that was labelled with it.
			Expect(res.StateDir).NotTo(BeADirectory())
			noLeftovers(ctx, res.StateDir)

			// The overnight CLI, given the reproducing command, makes the same history.
			state := GinkgoT().TempDir()
			line := strings.Replace(res.Reproduce, "overnight ", cli+" --init-binary "+bin+" --state "+state+" -q ", 1) + " --output json"
			out, err := exec.CommandContext(ctx, "sh", "-c", line).Output()
			var exit *exec.ExitError
			Expect(errors.As(err, &exit)).To(BeTrue(), "%s: %v", line, err)
			Expect(exit.ExitCode()).To(Equal(1), "exit code 1: fail")
			var again harness.Result
			Expect(json.Unmarshal(out, &again)).To(Succeed())
			Expect(again.Verdict).To(Equal("fail"))
			Expect(again.HistoryDigest).To(Equal(res.HistoryDigest))
			noLeftovers(ctx, state)
		})

		It("runs a scenario given as YAML, or as a file, and names it in the reproducing command", func(ctx SpecContext) {
			raw, _ := builtin.Lookup("deploy")
			mine := []byte(strings.Replace(string(raw), "\nname: deploy\n", "\nname: my-deploy\n", 1))
			res, err := overnighttest.Run(ctx, mine, overnighttest.Faults())
			Expect(err).NotTo(HaveOccurred())
			Expect(res).To(overnighttest.Pass())
			Expect(res.Spec.Name).To(Equal("my-deploy"))
			Expect(res.InMemory).To(BeTrue())
			Expect(res.Reproduce).To(Equal("overnight run my-deploy.yaml --seed 1 --fault '' --lessons none"))
			pass := overnighttest.Pass()
			Expect(pass.Match(res)).To(BeTrue())
			Expect(pass.NegatedFailureMessage(res)).To(HaveSuffix("\n  (scenario my-deploy was given in Go: save its YAML, Spec.Raw, as my-deploy.yaml to reproduce)"))

			file := filepath.Join(GinkgoT().TempDir(), "my-deploy.yaml")
			Expect(os.WriteFile(file, mine, 0o644)).To(Succeed())
			res, err = overnighttest.Run(ctx, file, overnighttest.Seed(4))
			Expect(err).NotTo(HaveOccurred())
			Expect(res).To(overnighttest.Pass())
			Expect(res.InMemory).To(BeFalse())
			Expect(res.Reproduce).To(Equal("overnight run " + file + " --seed 4 --lessons none"))
		})

		It("runs seeds as trials under --chaos random, through harness/suite, and judges pass^k", func(ctx SpecContext) {
			scen, err := harness.LoadScenario("deploy")
			Expect(err).NotTo(HaveOccurred())
			trials, err := overnighttest.RunTrials(ctx, scen, overnighttest.Seeds(3), overnighttest.ChaosRandom(3), overnighttest.Parallel(3))
			Expect(err).NotTo(HaveOccurred())
			Expect(trials).To(overnighttest.HavePassK(3, 0.9))
			Expect(trials).To(overnighttest.SurviveFaults())
			Expect(trials).To(overnighttest.HoldInvariant("no-duplicate-effects"))
			passK, ok := trials.PassK(3)
			Expect(ok).To(BeTrue())
			Expect(passK).To(BeNumerically("==", 1))
			Expect(trials.Runs).To(HaveLen(3))
			for _, r := range trials.Runs {
				Expect(r.Faults).To(HaveLen(3))
				Expect(r.Reproduce).To(Equal(fmt.Sprintf("overnight run deploy --seed %d --chaos random --chaos-faults 3 --lessons none", r.Seed)))
			}
			Expect(trials.StateDir).NotTo(BeADirectory())
			noLeftovers(ctx, trials.StateDir)
		})

		It("draws only the kinds ChaosRandom names, and says so in the reproducing command", func(ctx SpecContext) {
			res, err := overnighttest.Run(ctx, "deploy", overnighttest.Seed(2), overnighttest.ChaosRandom(2, "kill"))
			Expect(err).NotTo(HaveOccurred())
			Expect(res).To(overnighttest.Pass())
			Expect(res.Faults).To(HaveLen(2))
			Expect(res.Faults).To(HaveEach(HaveField("Kind", "kill")))
			Expect(res.Reproduce).To(Equal("overnight run deploy --seed 2 --chaos random --chaos-faults 2 --chaos-kinds kill --lessons none"))
		})

		It("judges the naive agent's trials, naming each run that failed", func(ctx SpecContext) {
			dir := GinkgoT().TempDir()
			trials, err := overnighttest.RunTrials(ctx, "deploy", overnighttest.Seeds(2), overnighttest.Agent("naive"),
				overnighttest.Faults("kill@step:3"), overnighttest.StateDir(dir))
			Expect(err).NotTo(HaveOccurred())
			Expect(trials).NotTo(overnighttest.HoldInvariant("no-duplicate-effects"))
			passK := overnighttest.HavePassK(1, 0.5)
			Expect(passK.Match(trials)).To(BeFalse())
			msg := passK.FailureMessage(trials)
			Expect(msg).To(HavePrefix("Expected pass^1 >= 0.5 over the 2 runs of deploy (agent naive), seeds 1-2, but pass^1 is 0.0000\n  deploy/naive: pass^1 0.0000 (0 of 2 passed, 2 failed, 0 unknown)\n"))
			Expect(msg).To(ContainSubstring("      reproduce: overnight --state " + dir + " run deploy --seed 2 --agent naive --fault kill@step:3 --lessons none"))
			noLeftovers(ctx, dir)
		})

		It("cleans up after a run it was stopped in, and says it is resumable", func(ctx SpecContext) {
			dir := GinkgoT().TempDir()
			DeferCleanup(func(ctx SpecContext) { harnesstest.Leftovers(ctx, dockerCli, dir) }) // the stopped run's volume, kept to resume it
			stop, cancel := context.WithCancel(ctx)
			started := make(chan struct{})
			progress := &lineWatcher{match: "attempt 1 started", seen: started}
			go func() {
				select {
				case <-started:
				case <-ctx.Done():
				}
				cancel()
			}()
			_, err := overnighttest.Run(stop, "deploy", overnighttest.StateDir(dir), overnighttest.Progress(progress))
			Expect(err).To(MatchError(harness.ErrInterrupted))
			ids, err := harnesstest.Containers(ctx, dockerCli, dir)
			Expect(err).NotTo(HaveOccurred())
			Expect(ids).To(BeEmpty(), "containers left behind by a stopped run")
		})
	})
})

// lineWatcher closes seen when a progress line containing match is written.
type lineWatcher struct {
	match string
	seen  chan struct{}
	once  sync.Once
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.match) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}
