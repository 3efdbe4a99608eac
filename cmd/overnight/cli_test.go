package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/docker/docker/client"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/docker"
)

// These specs run the real overnight binary as a child process: exit
// codes, JSON on stdout, a harness that SIGKILLs itself, and resume.
var (
	bin        string // the overnight CLI
	sandboxBin string // the overnight-sandbox built with it, which it injects
	dockerCli  *client.Client
)

var _ = BeforeSuite(func(ctx SpecContext) {
	dir, err := os.MkdirTemp("", "ovn-cli-bin-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		// The sandbox images this suite's own binaries made go with them.
		if dockerCli != nil {
			eng := docker.New(dockerCli, docker.Options{})
			for _, init := range []string{sandboxBin, bin} {
				if ref, err := eng.ImageRef(ctx, docker.ImageSpec{InitBinary: init}); err == nil {
					Expect(eng.RemoveImage(ctx, ref)).To(Succeed())
				}
			}
		}
		Expect(os.RemoveAll(dir)).To(Succeed())
	})
	bin, sandboxBin, err = harnesstest.BuildCLI(ctx, dir, fmt.Sprintf("cli-%d", time.Now().UnixNano()))
	Expect(err).NotTo(HaveOccurred())
	dockerCli, err = docker.Connect(ctx)
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(6*time.Minute))

type outcome struct {
	code   int
	stdout string
	stderr string
}

// overnight runs the binary against state with args, bounded in time.
func overnight(ctx context.Context, state string, env []string, args ...string) outcome {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--state", state}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	return runProcess(cmd)
}

// runProcess runs cmd and returns its exit code (128+N for a signal) and
// output.
func runProcess(cmd *exec.Cmd) outcome {
	GinkgoHelper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		Expect(ok).To(BeTrue(), "run overnight: %v", err)
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	return outcome{code, out.String(), errb.String()}
}

// stateDir is a fresh state dir whose containers must all be gone after the spec.
func stateDir() string {
	state := GinkgoT().TempDir()
	DeferCleanup(func(ctx SpecContext) {
		Expect(harnesstest.Leftovers(ctx, dockerCli, state)).To(BeEmpty(), "containers left behind")
	})
	return state
}

func decodeResult(s string) harness.Result {
	var res harness.Result
	ExpectWithOffset(1, json.Unmarshal([]byte(s), &res)).To(Succeed(), "stdout must be exactly one JSON object:\n%s", s)
	return res
}

// runIDOf is the run id that `run` prints first on stderr ("run ID"), which
// a caller has even when the harness dies.
func runIDOf(stderr string) string {
	return strings.TrimPrefix(strings.SplitN(stderr, "\n", 2)[0], "run ")
}

var _ = Describe("overnight run", func() {
	It("prints only the JSON result on stdout, the run id on stderr, and exits 0 on pass", func(ctx SpecContext) {
		state := stateDir()
		o := overnight(ctx, state, nil, "run", "deploy", "--seed", "1", "--fault", "kill@step:3", "--output", "json")
		Expect(o.code).To(Equal(0), o.stderr)
		res := decodeResult(o.stdout)
		Expect(o.stderr).To(HavePrefix("run " + res.RunID + "\n"))
		Expect(res.Verdict).To(Equal("pass"))
		Expect(res.Seed).To(Equal(int64(1)))
		Expect(res.Attempts).To(Equal(2))
		Expect(res.StepsCompleted).To(Equal(5))
		Expect(res.Faults).To(HaveLen(1))
		Expect(res.Faults[0].At).To(Equal("step:3"))

		var raw map[string]any
		Expect(json.Unmarshal([]byte(o.stdout), &raw)).To(Succeed())
		for _, field := range []string{"run_id", "scenario", "seed", "verdict", "attempts", "steps_completed", "faults",
			"effects", "invariants", "wall_ms", "virtual_ms", "history_digest"} {
			Expect(raw).To(HaveKey(field))
		}
		for _, field := range []string{"executed", "deduplicated", "duplicates", "unknown"} {
			Expect(raw["effects"]).To(HaveKey(field))
		}
		for _, field := range []string{"kind", "at", "applied", "applied_virtual_ms", "healed_virtual_ms"} {
			Expect(raw["faults"].([]any)[0]).To(HaveKey(field))
		}

		runs := overnight(ctx, state, nil, "runs", "--output", "json")
		Expect(runs.code).To(Equal(0))
		var list struct {
			Runs []map[string]any `json:"runs"`
		}
		Expect(json.Unmarshal([]byte(runs.stdout), &list)).To(Succeed())
		Expect(list.Runs).To(HaveLen(1))
		for _, field := range []string{"run_id", "scenario", "seed", "status", "verdict", "started_at"} {
			Expect(list.Runs[0]).To(HaveKey(field))
		}
		Expect(list.Runs[0]["status"]).To(Equal("finished"))

		logs := overnight(ctx, state, nil, "logs", res.RunID)
		Expect(logs.code).To(Equal(0))
		Expect(logs.stdout).To(ContainSubstring("=== attempt 1"))
		Expect(logs.stdout).To(ContainSubstring("starting after step 3 of 5"))
	}, SpecTimeout(3*time.Minute))

	It("exits 1 when the naive agent duplicates effects", func(ctx SpecContext) {
		o := overnight(ctx, stateDir(), nil, "run", "deploy", "--agent", "naive", "--fault", "kill@step:3", "-o", "json")
		Expect(o.code).To(Equal(1), o.stderr)
		res := decodeResult(o.stdout)
		Expect(res.Verdict).To(Equal("fail"))
		Expect(res.Effects.Duplicates).To(BeNumerically(">", 0))
	}, SpecTimeout(3*time.Minute))

	It("exits 2 when a scheduled fault never fires", func(ctx SpecContext) {
		o := overnight(ctx, stateDir(), nil, "run", "deploy", "--fault", "kill@step:9", "-o", "json")
		Expect(o.code).To(Equal(2), o.stderr)
		Expect(decodeResult(o.stdout).Verdict).To(Equal("unknown"))
	}, SpecTimeout(3*time.Minute))

	It("survives harness-crash: the harness SIGKILLs itself, resume finishes from the journal alone", func(ctx SpecContext) {
		state := stateDir()
		o := overnight(ctx, state, nil, "run", "deploy", "--seed", "1", "--fault", "harness-crash@step:3", "--output", "json")
		Expect(o.code).To(Equal(128+int(syscall.SIGKILL)), "the harness must really die by SIGKILL:\n%s", o.stderr)
		Expect(o.stdout).To(BeEmpty())
		runID := runIDOf(o.stderr)
		Expect(runID).NotTo(BeEmpty())

		// The orphaned sandbox is still there: nobody cleaned up after the crash.
		left, err := harnesstest.Containers(ctx, dockerCli, state)
		Expect(err).NotTo(HaveOccurred())
		Expect(left).To(HaveLen(1))

		runs := overnight(ctx, state, nil, "runs", "-o", "json")
		Expect(runs.stdout).To(ContainSubstring(`"status": "interrupted"`))

		r := overnight(ctx, state, nil, "resume", runID, "--output", "json")
		Expect(r.code).To(Equal(0), r.stderr)
		res := decodeResult(r.stdout)
		Expect(res.RunID).To(Equal(runID))
		Expect(res.Verdict).To(Equal("pass"), res.Reason)
		Expect(res.Attempts).To(Equal(2))
		Expect(res.Effects.Executed).To(Equal(5), "no effect may run twice across the crash")
		Expect(res.Effects.Duplicates).To(Equal(0))
		// The resources created before the crash are the ones the goal uses.
		var goal harness.InvariantResult
		for _, ir := range res.Invariants {
			if ir.Name == "goal-reached" {
				goal = ir
			}
		}
		Expect(goal.Detail).To(ContainSubstring("db-1 v3 on net-1"))

		logs := overnight(ctx, state, nil, "logs", runID, "--attempt", "1")
		Expect(logs.code).To(Equal(0))
		Expect(logs.stdout).To(ContainSubstring("orphaned"))
		Expect(logs.stdout).To(ContainSubstring("step 2 done"))
	}, SpecTimeout(3*time.Minute))
})

// slowScenario writes the deploy scenario with a "slow" variant whose
// agent waits before each step, so that a run can be hit mid-way.
func slowScenario(delay string) string {
	raw, err := os.ReadFile(filepath.Join(harnesstest.ModuleRoot(), "scenarios", "builtin", "deploy.yaml"))
	Expect(err).NotTo(HaveOccurred())
	file := filepath.Join(GinkgoT().TempDir(), "slow.yaml")
	slow := strings.Replace(string(raw), "\nagents:\n", "\nagents:\n  slow: {builtin: deployer, args: [--step-delay, "+delay+"]}\n", 1)
	Expect(os.WriteFile(file, []byte(slow), 0o644)).To(Succeed())
	return file
}

var _ = Describe("a harness SIGKILLed at random points", func() {
	It("always resumes to the same history, with no effect run twice", func(ctx SpecContext) {
		file := slowScenario("150ms")
		ref := overnight(ctx, stateDir(), nil, "run", file, "--agent", "slow", "-o", "json", "-q")
		Expect(ref.code).To(Equal(0), ref.stderr)
		want := decodeResult(ref.stdout).HistoryDigest

		rng := rand.New(rand.NewPCG(uint64(GinkgoRandomSeed()), 7))
		for i := 0; i < 4; i++ {
			state := stateDir()
			delay := time.Duration(rng.IntN(1200)) * time.Millisecond
			By(fmt.Sprintf("killing the harness %s after it starts (seed %d)", delay, GinkgoRandomSeed()))
			cmd := exec.CommandContext(ctx, bin, "--state", state, "run", file, "--agent", "slow", "-o", "json", "-q")
			var errb bytes.Buffer
			cmd.Stderr = &errb
			Expect(cmd.Start()).To(Succeed())
			time.Sleep(delay)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			first := strings.SplitN(errb.String(), "\n", 2)[0]
			if !strings.HasPrefix(first, "run ") {
				continue // killed before the run was recorded: nothing to resume
			}
			runID := strings.TrimPrefix(first, "run ")
			r := overnight(ctx, state, nil, "resume", runID, "-o", "json", "-q")
			Expect(r.code).To(Equal(0), r.stderr)
			res := decodeResult(r.stdout)
			Expect(res.Verdict).To(Equal("pass"), res.Reason)
			Expect(res.Effects.Executed).To(Equal(5), "no effect may run twice")
			Expect(res.Effects.Duplicates).To(Equal(0))
			Expect(res.HistoryDigest).To(Equal(want), "a crash must not change what happened")
		}
	}, SpecTimeout(4*time.Minute))
})

var _ = Describe("a state dir in use", func() {
	It("lists its runs and their logs through the live owner's control socket; other commands name the owner", func(ctx SpecContext) {
		state := stateDir()
		file := slowScenario("600ms")
		cmd := exec.CommandContext(ctx, bin, "--state", state, "run", file, "--agent", "slow", "-o", "json", "-q")
		var out bytes.Buffer
		cmd.Stdout = &out
		stderr, err := cmd.StderrPipe()
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd.Start()).To(Succeed())
		line, err := bufio.NewReader(stderr).ReadString('\n')
		Expect(err).NotTo(HaveOccurred())
		runID := strings.TrimSpace(strings.TrimPrefix(line, "run "))

		o := overnight(ctx, state, nil, "runs", "-o", "json")
		Expect(o.code).To(Equal(0), o.stderr)
		var listed struct {
			Runs []harness.RunSummary `json:"runs"`
		}
		Expect(json.Unmarshal([]byte(o.stdout), &listed)).To(Succeed(), o.stdout)
		Expect(listed.Runs).To(HaveLen(1))
		Expect(listed.Runs[0].RunID).To(Equal(runID))
		Expect(listed.Runs[0].Status).To(Equal("running"))

		o = overnight(ctx, state, nil, "logs", runID, "-o", "json")
		Expect(o.code).To(Equal(0), o.stderr)
		Expect(o.stdout).To(ContainSubstring(`"attempt": 1`))
		o = overnight(ctx, state, nil, "logs", "no-such-run")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring(`no such run "no-such-run"`))

		o = overnight(ctx, state, nil, "run", "deploy")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(MatchRegexp(`in use by pid %d`, cmd.Process.Pid))

		_, _ = io.Copy(io.Discard, stderr)
		Expect(cmd.Wait()).To(Succeed())
		Expect(decodeResult(out.String()).Verdict).To(Equal("pass"))
		o = overnight(ctx, state, nil, "runs", "-o", "json")
		Expect(o.code).To(Equal(0), o.stderr)
		Expect(o.stdout).To(ContainSubstring(`"status": "finished"`))
	}, SpecTimeout(3*time.Minute))
})

var _ = Describe("Ctrl-C", func() {
	It("kills the attempt, leaves the run resumable, exits 3, and resume finishes it", func(ctx SpecContext) {
		state := stateDir()
		file := slowScenario("400ms")

		cmd := exec.CommandContext(ctx, bin, "--state", state, "run", file, "--agent", "slow")
		var out bytes.Buffer
		cmd.Stdout = &out
		stderr, err := cmd.StderrPipe()
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd.Start()).To(Succeed())
		var errText strings.Builder
		buf := make([]byte, 4096)
		for !strings.Contains(errText.String(), "attempt 1 started") {
			n, err := stderr.Read(buf)
			errText.Write(buf[:n])
			Expect(err).NotTo(HaveOccurred(), errText.String())
		}
		Expect(cmd.Process.Signal(os.Interrupt)).To(Succeed())
		rest, _ := io.ReadAll(stderr)
		errText.Write(rest)
		err = cmd.Wait()
		Expect(err).To(HaveOccurred())
		Expect(cmd.ProcessState.ExitCode()).To(Equal(3), errText.String())
		Expect(out.String()).To(BeEmpty())
		Expect(errText.String()).To(ContainSubstring("overnight resume"))
		runID := strings.TrimPrefix(strings.SplitN(errText.String(), "\n", 2)[0], "run ")

		left, err := harnesstest.Containers(ctx, dockerCli, state)
		Expect(err).NotTo(HaveOccurred())
		Expect(left).To(BeEmpty(), "Ctrl-C must remove the run's containers")

		r := overnight(ctx, state, nil, "resume", runID, "-o", "json")
		Expect(r.code).To(Equal(0), r.stderr)
		res := decodeResult(r.stdout)
		Expect(res.Verdict).To(Equal("pass"))
		Expect(res.Attempts).To(Equal(2))
		Expect(res.Effects.Duplicates).To(Equal(0))
	}, SpecTimeout(3*time.Minute))
})

var _ = Describe("harness-crash at the hardest point", func() {
	It("dies after the world acted and before the result is journaled; resume reconciles the effect, nothing runs twice", func(ctx SpecContext) {
		state := stateDir()
		o := overnight(ctx, state, nil, "run", "deploy", "--fault", "harness-crash@effect:3", "-o", "json", "-q")
		Expect(o.code).To(Equal(128+int(syscall.SIGKILL)), o.stderr)
		runID := runIDOf(o.stderr)
		r := overnight(ctx, state, nil, "resume", runID, "-o", "json", "-q")
		Expect(r.code).To(Equal(0), r.stderr)
		res := decodeResult(r.stdout)
		Expect(res.Verdict).To(Equal("pass"), res.Reason)
		Expect(res.Effects.Executed).To(Equal(5), "the world acted once per effect")
		Expect(res.Effects.Deduplicated).To(Equal(1), "effect 3, reconciled with the world, is answered from the journal")
		Expect(res.Effects.Duplicates).To(Equal(0))
		Expect(res.Faults[0].Met).To(BeTrue())
	}, SpecTimeout(3*time.Minute))
})

var _ = Describe("the binary's GOMAXPROCS", func() {
	It("is 1 unless $GOMAXPROCS says otherwise", func(ctx SpecContext) {
		o := overnight(ctx, GinkgoT().TempDir(), []string{"GOMAXPROCS="}, "-v", "faults", "-o", "json")
		Expect(o.code).To(Equal(0), o.stderr)
		Expect(o.stderr).To(ContainSubstring("gomaxprocs=1"))
		o = overnight(ctx, GinkgoT().TempDir(), []string{"GOMAXPROCS=3"}, "-v", "faults", "-o", "json")
		Expect(o.code).To(Equal(0), o.stderr)
		Expect(o.stderr).To(ContainSubstring("gomaxprocs=3"))
	})
})

var _ = Describe("chaos from the command line", func() {
	It("prints the fault catalog as JSON", func(ctx SpecContext) {
		o := overnight(ctx, GinkgoT().TempDir(), nil, "faults", "-o", "json")
		Expect(o.code).To(Equal(0), o.stderr)
		var cat struct {
			Faults []map[string]any `json:"faults"`
		}
		Expect(json.Unmarshal([]byte(o.stdout), &cat)).To(Succeed())
		names := map[string]map[string]any{}
		for _, k := range cat.Faults {
			names[k["name"].(string)] = k
		}
		for _, want := range []string{"kill", "stop", "restart", "pause", "harness-crash", "netdrop", "blackhole", "latency", "disconnect",
			"llm-429", "llm-5xx", "llm-timeout", "llm-truncated", "llm-malformed-tool-call", "api-version", "effect-5xx", "effect-slow", "world-crash", "clock-jump",
			"mcp-error", "mcp-rpc-error", "mcp-timeout", "mcp-slow", "mcp-crash", "mcp-tool-gone", "mcp-schema"} {
			Expect(names).To(HaveKey(want))
		}
		Expect(names["netdrop"]["duration"]).To(Equal("required"))
		Expect(names["kill"]["duration"]).To(Equal("none"))
		Expect(names["mcp-error"]["group"]).To(Equal("mcp"))
		Expect(names["mcp-error"]["mcp"]).To(BeTrue())
	})

	It("draws --chaos random from the seed, replays a fault log exactly, and shrinks a failure to a command that reproduces it", func(ctx SpecContext) {
		state := stateDir()
		a := overnight(ctx, state, nil, "run", "deploy", "--chaos", "random", "--seed", "7", "-o", "json", "-q")
		b := overnight(ctx, state, nil, "run", "deploy", "--chaos", "random", "--seed", "7", "-o", "json", "-q")
		ra, rb := decodeResult(a.stdout), decodeResult(b.stdout)
		Expect(ra.Faults).To(HaveLen(5))
		Expect(ra.Verdict).To(Equal("pass"), "the well-behaved agent meets every drawn fault: %s", ra.Reason)
		Expect(rb.Faults).To(Equal(ra.Faults))
		Expect(rb.HistoryDigest).To(Equal(ra.HistoryDigest))

		r := overnight(ctx, state, nil, "run", "deploy", "--replay-faults", ra.RunID, "-o", "json", "-q")
		rr := decodeResult(r.stdout)
		Expect(rr.Seed).To(Equal(int64(7)), "a replayed schedule keeps its run's seed")
		Expect(rr.HistoryDigest).To(Equal(ra.HistoryDigest))

		o := overnight(ctx, state, nil, "run", "deploy", "--fault", "kill@step:1", "--chaos", "random")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring("use one"))

		failed := overnight(ctx, state, nil, "run", "deploy", "--agent", "naive", "--seed", "2", "-o", "json", "-q",
			"--fault", "latency:5ms@step:1/10m", "--fault", "kill@step:2", "--fault", "clock-jump:1h@step:3")
		Expect(failed.code).To(Equal(1), failed.stderr)
		sh := overnight(ctx, state, nil, "shrink", decodeResult(failed.stdout).RunID, "-o", "json", "-q")
		Expect(sh.code).To(Equal(0), sh.stderr)
		var out map[string]any
		Expect(json.Unmarshal([]byte(sh.stdout), &out)).To(Succeed())
		for _, k := range []string{"run_id", "faults", "invariant", "command", "runs_tried"} {
			Expect(out).To(HaveKey(k))
		}
		Expect(out["faults"]).To(Equal([]any{"kill@step:1"}))
		Expect(out["invariant"]).To(Equal("no-duplicate-effects"))
		cmd := strings.Fields(out["command"].(string))
		Expect(cmd[0]).To(Equal("overnight"))
		again := overnight(ctx, state, nil, append(cmd[1:], "-o", "json", "-q")...)
		Expect(again.code).To(Equal(1), "the printed command reproduces the failure")

		passed := overnight(ctx, state, nil, "shrink", ra.RunID)
		Expect(passed.code).To(Equal(2), "a run that did not fail has nothing to shrink")
	}, SpecTimeout(5*time.Minute))

	It("keeps a fault's state across a harness crash: an API change rolled back on schedule, a stop's down window held", func(ctx SpecContext) {
		state := stateDir()
		o := overnight(ctx, state, nil, "run", "week", "--fault", "api-version:v2@t:12h/1d", "--fault", "harness-crash@t:13h", "-o", "json", "-q")
		Expect(o.code).To(Equal(137), o.stderr)
		id := runIDOf(o.stderr)
		r := overnight(ctx, state, nil, "resume", id, "-o", "json", "-q")
		Expect(r.code).To(Equal(0), r.stderr)
		res := decodeResult(r.stdout)
		var version harness.FaultResult
		for _, f := range res.Faults {
			if f.Kind == "api-version" {
				version = f
			}
		}
		Expect(*version.HealedVirtualMS).To(Equal((36 * time.Hour).Milliseconds()), "healed on schedule after the crash")

		o = overnight(ctx, state, nil, "run", "deploy", "--fault", "stop:1s@step:2/1h", "--fault", "harness-crash@step:2", "-o", "json", "-q")
		Expect(o.code).To(Equal(137), o.stderr)
		id = runIDOf(o.stderr)
		r = overnight(ctx, state, nil, "resume", id, "-o", "json", "-q")
		Expect(r.code).To(Equal(0), r.stderr)
		Expect(decodeResult(r.stdout).VirtualMS).To(BeNumerically(">=", time.Hour.Milliseconds()), "the down window outlives the crash")
	}, SpecTimeout(4*time.Minute))
})

var _ = Describe("bad input", func() {
	It("exits 3 with file:line:column for a malformed scenario file", func(ctx SpecContext) {
		file := filepath.Join(GinkgoT().TempDir(), "bad.yaml")
		Expect(os.WriteFile(file, []byte("apiVersion: overnight/v1\nkind: Scenario\nname: bad\nworld: cloud\nagent: {builtin: deployer}\nfaults: [kill@stp:3]\n"), 0o644)).To(Succeed())
		o := overnight(ctx, stateDir(), nil, "run", file)
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring(file + ":6:"))
		Expect(o.stderr).To(ContainSubstring(`unknown trigger "stp"`))
	})

	It("exits 3 for an unknown fault kind, an unknown agent and an unknown scenario", func(ctx SpecContext) {
		state := stateDir()
		o := overnight(ctx, state, nil, "run", "deploy", "--fault", "meteor@step:1")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring(`unknown fault kind "meteor"`))
		o = overnight(ctx, state, nil, "run", "deploy", "--agent", "nobody")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring("naive"))
		o = overnight(ctx, state, nil, "run", "no-such-scenario")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring("deploy"))
		o = overnight(ctx, state, nil, "resume", "no-such-run")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring("no such run"))
		Expect(o.stderr).NotTo(ContainSubstring("run no-such-run\n"), "an unknown run is not announced")
		o = overnight(ctx, state, nil, "run", "deploy", "--timeout", "-1s")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring("--timeout"))
		o = overnight(ctx, state, nil, "run", "deploy", "--max-attempts", "-2")
		Expect(o.code).To(Equal(3))
		o = overnight(ctx, state, nil, "runs", "--output", "yaml")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring("want text or json"))
	})

	It("exits 3 for runs, logs and resume on a state dir that does not exist, and creates nothing", func(ctx SpecContext) {
		missing := filepath.Join(GinkgoT().TempDir(), "typo")
		for _, args := range [][]string{{"runs"}, {"logs", "x"}, {"resume", "x"}} {
			o := overnight(ctx, missing, nil, args...)
			Expect(o.code).To(Equal(3), "%v", args)
			Expect(o.stderr).To(ContainSubstring("no such state dir"))
		}
		Expect(missing).NotTo(BeADirectory())
	})

	It("exits 3 when the Docker engine is unreachable, and records no run", func(ctx SpecContext) {
		state := stateDir()
		o := overnight(ctx, state, []string{"DOCKER_HOST=unix:///tmp/ovn-no-such-docker.sock"}, "run", "deploy")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring("cannot reach the Docker engine"))
		runs := overnight(ctx, state, nil, "runs", "-o", "json")
		Expect(runs.stdout).To(MatchJSON(`{"runs": []}`))
	})

	It("exits 3 naming the owner's pid when the state dir is in use", func(ctx SpecContext) {
		state := stateDir()
		// This test process owns the state dir while the CLI tries it.
		j, err := journal.Open(state, journal.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(j.Close)
		o := overnight(ctx, state, nil, "runs")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring(fmt.Sprintf("in use by pid %d", os.Getpid())))
	})

	It("exits 3 for a state dir written by another journal format, and leaves it as it was", func(ctx SpecContext) {
		state := stateDir()
		j, err := journal.Open(state, journal.Options{})
		Expect(err).NotTo(HaveOccurred())
		Expect(j.Close()).To(Succeed())
		// A journal from a future overnight: its format key says so.
		db, err := badger.Open(badger.DefaultOptions(filepath.Join(state, "journal")).WithLogger(nil))
		Expect(err).NotTo(HaveOccurred())
		Expect(db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("meta/format"), []byte("999")) })).To(Succeed())
		Expect(db.Close()).To(Succeed())
		o := overnight(ctx, state, nil, "runs")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring("format"))
		_, err = journal.Open(state, journal.Options{})
		Expect(err).To(MatchError(journal.ErrFormat))
		db, err = badger.Open(badger.DefaultOptions(filepath.Join(state, "journal")).WithLogger(nil))
		Expect(err).NotTo(HaveOccurred())
		defer db.Close()
		Expect(db.View(func(txn *badger.Txn) error {
			item, err := txn.Get([]byte("meta/format"))
			if err != nil {
				return err
			}
			return item.Value(func(v []byte) error {
				Expect(string(v)).To(Equal("999"), "the format key must not be rewritten")
				return nil
			})
		})).To(Succeed())
	})
})

var _ = Describe("a damaged state dir", func() {
	It("exits 3 saying so, and changes nothing in it", func(ctx SpecContext) {
		state := stateDir()
		j, err := journal.Open(state, journal.Options{})
		Expect(err).NotTo(HaveOccurred())
		Expect(j.Close()).To(Succeed())
		manifest := filepath.Join(state, "journal", "MANIFEST")
		Expect(os.WriteFile(manifest, []byte("garbage"), 0o600)).To(Succeed())
		o := overnight(ctx, state, nil, "runs")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring("may be damaged"))
		Expect(os.ReadFile(manifest)).To(Equal([]byte("garbage")))
	})
})

var _ = Describe("overnight gc", func() {
	It("removes this state dir's leftovers of dead runs and nothing of other state dirs", func(ctx SpecContext) {
		mine, other := stateDir(), stateDir()
		img, err := docker.New(dockerCli, docker.Options{}).EnsureImage(ctx, docker.ImageSpec{InitBinary: sandboxBin})
		Expect(err).NotTo(HaveOccurred())
		var ids []string
		for _, st := range []string{mine, other} {
			eng := docker.New(dockerCli, docker.Options{StateHash: sandbox.StateHash(st)})
			dir, cleanup, err := sandbox.NewSocketDir()
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(cleanup)
			sb, err := eng.Create(ctx, docker.ContainerSpec{RunID: fmt.Sprintf("dead-%d", len(ids)), Attempt: 1, Image: img,
				Cmd: []string{sandbox.InitPath, "agent", "deployer"}, SocketDir: dir})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) { _ = eng.Remove(ctx, sb.ID) })
			ids = append(ids, sb.ID)
		}
		o := overnight(ctx, mine, nil, "gc")
		Expect(o.code).To(Equal(0), o.stderr)
		Expect(o.stdout).To(ContainSubstring("removed 1 containers"))
		left, err := harnesstest.Containers(ctx, dockerCli, other)
		Expect(err).NotTo(HaveOccurred())
		Expect(left).To(ConsistOf(ids[1]))
		Expect(docker.New(dockerCli, docker.Options{StateHash: sandbox.StateHash(other)}).Remove(ctx, ids[1])).To(Succeed())
	})
})
