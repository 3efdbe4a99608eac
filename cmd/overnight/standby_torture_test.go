package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/docker"
)

var _ = Describe("torture with standbys up: harnesses SIGKILLed at random", func() {
	It("leaves no container, labelled or not, once `overnight gc` has run, and a killed run still resumes", func(ctx SpecContext) {
		state := stateDir() // its cleanup removes whatever is left of the state dir
		rng := rand.New(rand.NewPCG(uint64(GinkgoRandomSeed()), 21))
		// Every workload keeps a standby ahead (StandbyAuto): kill faults,
		// or reflection (deploy-v2). The slow deploy's attempts outlive a
		// container's start, so its standby is up before the next kill.
		slow := []string{"run", slowScenario("400ms"), "--agent", "slow", "--fault", "kill@step:1", "--fault", "kill@step:3"}
		workloads := [][]string{
			slow,
			{"run", "week", "--fault", "kill@every:8h"},
			{"run", "deploy-v2", "--lessons", "none"},
			{"suite", "deploy", "--seeds", "2", "--parallel", "2", "--chaos", "random", "--chaos-kinds", "kill,restart"},
		}
		// A standby is told by its image (this test binary's, made for
		// this process alone), not its labels: a standby that lost them
		// still counts, and is still looked for after gc below.
		ref, err := docker.New(dockerCli, docker.Options{}).ImageRef(ctx, docker.ImageSpec{InitBinary: sandboxBin})
		Expect(err).NotTo(HaveOccurred())
		ours := filters.NewArgs(filters.Arg("ancestor", ref))
		killedWithStandby := 0
		// kill decides when to SIGKILL the harness about to start: after a
		// random delay, or a random moment after a standby it made is seen
		// waiting (bounded by limit); either way it notes whether one was.
		// The standbys of the harnesses killed before do not count.
		kill := func(afterStandby bool, delay, limit time.Duration) func(time.Duration) bool {
			list, err := dockerCli.ContainerList(ctx, container.ListOptions{All: true, Filters: ours})
			Expect(err).NotTo(HaveOccurred())
			before := map[string]bool{}
			for _, c := range list {
				before[c.ID] = true
			}
			var seen time.Duration = -1
			return func(since time.Duration) bool {
				if afterStandby && seen < 0 && standbyWaitingAmong(ctx, ours, before) {
					seen = since
				}
				now := since >= limit || (afterStandby && seen >= 0 && since-seen >= delay) || (!afterStandby && since >= delay)
				if now && standbyWaitingAmong(ctx, ours, before) {
					killedWithStandby++
				}
				return now
			}
		}

		// Round 0 kills the slow deploy once its standby waits, so one run
		// is surely cut short with a standby up; it is resumed at the end.
		runA := startKilledWhen(ctx, state, kill(true, time.Duration(rng.IntN(300))*time.Millisecond, time.Minute), append(slow, "--seed", "1")...)
		Expect(runA).NotTo(BeEmpty(), "the first harness died before it announced its run")
		var others []string
		for i := 1; i <= 4; i++ {
			w := rng.IntN(len(workloads))
			args := workloads[w]
			if args[0] == "run" {
				args = append(append([]string{}, args...), "--seed", fmt.Sprint(i+1))
			}
			afterStandby := rng.IntN(2) == 0
			delay := time.Duration(300+rng.IntN(2200)) * time.Millisecond
			if afterStandby {
				delay = time.Duration(rng.IntN(500)) * time.Millisecond
			}
			id := startKilledWhen(ctx, state, kill(afterStandby, delay, 8*time.Second), args...)
			GinkgoWriter.Printf("round %d: %v, killed (after a standby: %v) %v in: run %q\n", i, args, afterStandby, delay, id)
			if id != "" {
				others = append(others, id)
			}
			// A third of the time, a resume of a killed run is killed too.
			if len(others) > 0 && rng.IntN(3) == 0 {
				startKilledWhen(ctx, state, kill(false, time.Duration(200+rng.IntN(1300))*time.Millisecond, 8*time.Second), "resume", others[rng.IntN(len(others))])
			}
		}
		GinkgoWriter.Printf("harnesses SIGKILLed with a standby waiting: %d\n", killedWithStandby)
		Expect(killedWithStandby).To(BeNumerically(">=", 1), "no harness died with a standby up: the torture tested nothing of standbys")
		Expect(managed(ctx, state)).NotTo(BeEmpty(), "the killed harnesses left nothing to clean: it tested nothing")

		// The check below finds a container by its name alone: a standby
		// that lost its labels, which the label filter (and gc) would miss,
		// is still caught.
		ids := runIDs(ctx, state)
		planted := docker.ContainerName(runA, 99)
		made, err := dockerCli.ContainerCreate(ctx, &container.Config{Image: ref, Cmd: []string{sandbox.InitPath, "pause"},
			Env: []string{sandbox.EnvStandby + "=" + sandbox.GatewayDir}}, &container.HostConfig{NetworkMode: "none"}, nil, nil, planted)
		DeferCleanup(func(ctx SpecContext) {
			_ = dockerCli.ContainerRemove(ctx, planted, container.RemoveOptions{Force: true})
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(strays(ctx, state, ids)).To(ContainElement(HavePrefix(made.ID[:12])), "an unlabelled standby is found by its name")
		Expect(managed(ctx, state)).NotTo(ContainElement(HavePrefix(made.ID[:12])), "the label filter alone would miss it")
		Expect(dockerCli.ContainerRemove(ctx, made.ID, container.RemoveOptions{Force: true})).To(Succeed())

		gc := overnight(ctx, state, nil, "gc", "-o", "json")
		Expect(gc.code).To(Equal(0), gc.stderr)
		Expect(managed(ctx, state)).To(BeEmpty(), "docker ps -a --filter label=overnight.managed=true (this state dir) after gc")
		Expect(strays(ctx, state, runIDs(ctx, state))).To(BeEmpty(), "a container of this state dir's runs, labelled or not, after gc")

		// gc kept what a resume needs: the run cut short with a standby up finishes.
		r := overnight(ctx, state, nil, "resume", runA, "--output", "json")
		Expect(r.code).To(Equal(0), r.stderr)
		res := decodeResult(r.stdout)
		Expect(res.Verdict).To(Equal("pass"), res.Reason)
		Expect(res.Effects.Duplicates).To(BeZero())
		Expect(managed(ctx, state)).To(BeEmpty(), "the resumed run's harness removes its own standby")
		Expect(strays(ctx, state, runIDs(ctx, state))).To(BeEmpty())
		// What is left is the workspaces gc keeps for the runs still cut short.
		Expect(harnesstest.Leftovers(ctx, dockerCli, state)).To(HaveEach(HavePrefix("volume overnight-ws-")))
	}, SpecTimeout(5*time.Minute))
})

// runIDs lists every run of the state dir (isolated re-runs included).
func runIDs(ctx context.Context, state string) []string {
	GinkgoHelper()
	o := overnight(ctx, state, nil, "runs", "-o", "json")
	Expect(o.code).To(Equal(0), o.stderr)
	var listed struct {
		Runs []harness.RunSummary `json:"runs"`
	}
	Expect(json.Unmarshal([]byte(o.stdout), &listed)).To(Succeed(), o.stdout)
	ids := make([]string, 0, len(listed.Runs))
	for _, r := range listed.Runs {
		ids = append(ids, r.RunID)
	}
	return ids
}

// strays lists every container of the engine, whatever its labels, named
// as a sandbox or standby of one of the runs ("overnight-<run>-<attempt>")
// or as a network-namespace holder of the state dir: what a leak that lost
// its labels would still be called.
func strays(ctx context.Context, state string, runs []string) []string {
	GinkgoHelper()
	list, err := dockerCli.ContainerList(ctx, container.ListOptions{All: true})
	Expect(err).NotTo(HaveOccurred())
	prefixes := []string{"/overnight-netns-" + sandbox.StateHash(state)[:12] + "-"}
	for _, id := range runs {
		prefixes = append(prefixes, "/"+strings.TrimSuffix(docker.ContainerName(id, 0), "0"))
	}
	var out []string
	for _, c := range list {
		for _, name := range c.Names {
			for _, p := range prefixes {
				if strings.HasPrefix(name, p) {
					out = append(out, fmt.Sprintf("%.12s %s %s", c.ID, name, c.State))
				}
			}
		}
	}
	return out
}
