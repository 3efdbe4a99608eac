package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/sandbox"
)

// startKilled starts the binary with args and SIGKILLs it after delay (or
// when it ends first); it returns the run id it announced, if any.
func startKilled(ctx context.Context, state string, delay time.Duration, args ...string) string {
	GinkgoHelper()
	return startKilledWhen(ctx, state, func(since time.Duration) bool { return since >= delay }, args...)
}

// startKilledWhen starts the binary with args and SIGKILLs it as soon as
// when, asked every 20 ms with the time since the start, says so (or when
// it ends first); it returns the run id it announced, if any.
func startKilledWhen(ctx context.Context, state string, when func(since time.Duration) bool, args ...string) string {
	GinkgoHelper()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--state", state}, args...)...)
	stderr, err := cmd.StderrPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(cmd.Start()).To(Succeed())
	id := ""
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "run "); ok && id == "" && !strings.Contains(rest, " ") {
				id = rest
			}
		}
	}()
	t0 := time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for killed := false; ; {
		select {
		case <-read: // EOF: the process is dead (or done), its stderr closed
			_ = cmd.Wait()
			return id
		case <-tick.C:
			if !killed && when(time.Since(t0)) {
				_ = cmd.Process.Signal(syscall.SIGKILL)
				killed = true
			}
		}
	}
}

// managed lists the containers labelled with the state dir, the
// network-namespace holders of the processes that died included.
func managed(ctx context.Context, state string) []string {
	GinkgoHelper()
	list, err := dockerCli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", sandbox.LabelManaged+"=true"), filters.Arg("label", sandbox.LabelState+"="+sandbox.StateHash(state)))})
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, c := range list {
		out = append(out, fmt.Sprintf("%.12s %s %s", c.ID, c.Names, c.State))
	}
	return out
}

var _ = Describe("torture: harnesses SIGKILLed at random", func() {
	It("leaves no container behind once `overnight gc` has run, whatever they were doing", func(ctx SpecContext) {
		state := stateDir()
		rng := rand.New(rand.NewPCG(uint64(GinkgoRandomSeed()), 7))
		scenarios := [][]string{
			{"run", "deploy", "--fault", "kill@step:2"},
			{"run", "deploy", "--fault", "pause@step:2/30m"},
			{"run", "week", "--seed", "42"},
			{"run", "deploy-v2", "--lessons", "none"},
			{"run", "deploy", "--chaos", "random", "--chaos-kinds", "kill,restart,stop"},
			{"suite", "deploy", "--seeds", "8", "--parallel", "2", "--chaos", "random", "--chaos-kinds", "kill,restart"}, // warms two namespace holders (suite.warmHolders)
		}
		var ids []string
		for i := range 8 {
			args := scenarios[rng.IntN(len(scenarios))]
			if args[0] == "run" {
				args = append(append([]string{}, args...), "--seed", fmt.Sprint(i+1))
			}
			delay := time.Duration(600+rng.IntN(2400)) * time.Millisecond
			if id := startKilled(ctx, state, delay, args...); id != "" {
				ids = append(ids, id)
			}
			// Half the time, a resume of a killed run is killed too.
			if len(ids) > 0 && rng.IntN(2) == 0 {
				startKilled(ctx, state, time.Duration(200+rng.IntN(800))*time.Millisecond, "resume", ids[rng.IntN(len(ids))])
			}
		}
		left := managed(ctx, state)
		GinkgoWriter.Printf("left by %d killed harnesses: %v\n", len(ids), left)
		Expect(left).NotTo(BeEmpty(), "the torture left nothing to clean: it tested nothing")
		gc := overnight(ctx, state, nil, "gc", "-o", "json")
		Expect(gc.code).To(Equal(0), gc.stderr)
		Expect(managed(ctx, state)).To(BeEmpty(), "overnight gc leaves no container of a state dir whose harnesses all died")
		vols := harnesstest.Leftovers(ctx, dockerCli, state)
		GinkgoWriter.Printf("workspaces kept for resumable runs: %v\n", vols)
	}, SpecTimeout(8*time.Minute))
})

var _ = Describe("a harness SIGKILLed with a standby up", func() {
	It("leaves its standby to `overnight gc`, which leaves nothing", func(ctx SpecContext) {
		state := stateDir()
		cmd := exec.CommandContext(ctx, bin, "--state", state, "run", "week", "--seed", "5", "--fault", "kill@every:8h")
		Expect(cmd.Start()).To(Succeed())
		DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		// A standby waits, still unused, beside the attempt that runs.
		Eventually(func() bool { return standbyWaiting(ctx, state) }).WithTimeout(2 * time.Minute).WithPolling(20 * time.Millisecond).Should(BeTrue())
		Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		_ = cmd.Wait()
		Expect(standbyWaiting(ctx, state)).To(BeTrue(), "the standby outlives the harness that made it")
		gc := overnight(ctx, state, nil, "gc", "-o", "json")
		Expect(gc.code).To(Equal(0), gc.stderr)
		Expect(managed(ctx, state)).To(BeEmpty(), "overnight gc leaves no container, standbys included")
		// What gc keeps is the killed run's workspace: it can be resumed.
		Expect(harnesstest.Leftovers(ctx, dockerCli, state)).To(HaveEach(HavePrefix("volume overnight-ws-")))
	}, SpecTimeout(5*time.Minute))
})

var _ = Describe("a harness SIGKILLed while a reflection's standbys wait", func() {
	It("leaves them to `overnight gc`, which leaves nothing of them", func(ctx SpecContext) {
		state := stateDir()
		cmd := exec.CommandContext(ctx, bin, "--state", state, "run", "deploy-v2")
		Expect(cmd.Start()).To(Succeed())
		DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		// The reflection's isolated runs' standbys wait beside the run's
		// own next attempt's: standbys of more than one run.
		Eventually(func() int { return len(standbysWaiting(ctx, state)) }).WithTimeout(2 * time.Minute).WithPolling(20 * time.Millisecond).
			Should(BeNumerically(">=", 2))
		Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		_ = cmd.Wait()
		gc := overnight(ctx, state, nil, "gc", "-o", "json")
		Expect(gc.code).To(Equal(0), gc.stderr)
		Expect(managed(ctx, state)).To(BeEmpty(), "overnight gc leaves no container, the isolated runs' standbys included")
		// What gc keeps is the killed run's workspace alone: it can be
		// resumed; an isolated run's cannot.
		Expect(harnesstest.Leftovers(ctx, dockerCli, state)).To(ConsistOf(HavePrefix("volume overnight-ws-")))
	}, SpecTimeout(5*time.Minute))
})

// standbyWaiting reports whether a running container of the state dir is a
// standby whose handover has not come.
func standbyWaiting(ctx context.Context, state string) bool {
	return len(standbysWaiting(ctx, state)) > 0
}

// standbyWaitingAmong is standbyWaiting among the running containers f
// selects, but those in skip.
func standbyWaitingAmong(ctx context.Context, f filters.Args, skip map[string]bool) bool {
	return len(standbysWaitingAmong(ctx, f, skip)) > 0
}

// standbysWaiting are the runs with a running container of the state dir
// that is a standby whose handover has not come.
func standbysWaiting(ctx context.Context, state string) map[string]bool {
	return standbysWaitingAmong(ctx, filters.NewArgs(
		filters.Arg("label", sandbox.LabelManaged+"=true"), filters.Arg("label", sandbox.LabelState+"="+sandbox.StateHash(state))), nil)
}

// standbysWaitingAmong are the runs with a running container f selects (but
// those in skip) that is a standby whose handover has not come: its
// environment names the directory its init waits in, and that directory
// holds no handover.
func standbysWaitingAmong(ctx context.Context, f filters.Args, skip map[string]bool) map[string]bool {
	runs := map[string]bool{}
	list, err := dockerCli.ContainerList(ctx, container.ListOptions{Filters: f})
	if err != nil {
		return runs
	}
	for _, c := range list {
		if skip[c.ID] {
			continue
		}
		info, err := dockerCli.ContainerInspect(ctx, c.ID)
		if err != nil || info.Config == nil {
			continue
		}
		for _, kv := range info.Config.Env {
			dir, ok := strings.CutPrefix(kv, sandbox.EnvStandby+"=")
			if !ok {
				continue
			}
			for _, m := range info.Mounts {
				if m.Destination == sandbox.GatewayDir {
					if _, err := sandbox.ReadHandover(m.Source + strings.TrimPrefix(dir, sandbox.GatewayDir)); err != nil {
						runs[c.Labels[sandbox.LabelRun]] = true
					}
				}
			}
		}
	}
	return runs
}
