package harness_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/builtin"
)

// These specs drive whole runs against the real Docker engine: real
// containers, real SIGKILLs, the real gateway over the bind-mounted socket.
var (
	initBinary      string // overnight-sandbox, the sandboxes' PID 1 (what the CLI injects)
	overnightBinary string // the full overnight CLI, for `overnight world serve` and CLI commands
	testBinary      string // sandbox/internal/testinit, for agents that misbehave on purpose
	dockerCli       *client.Client
)

var _ = SynchronizedBeforeSuite(func(ctx SpecContext) []byte {
	dir, err := os.MkdirTemp("", "ovn-e2e-bin-")
	Expect(err).NotTo(HaveOccurred())
	nonce := fmt.Sprintf("harness-%d", time.Now().UnixNano())
	built := false
	defer func() {
		if !built {
			_ = os.RemoveAll(dir)
		}
	}()
	Expect(harnesstest.Build(ctx, "./cmd/overnight-sandbox", filepath.Join(dir, "overnight-sandbox"), nonce)).To(Succeed())
	Expect(harnesstest.Build(ctx, "./cmd/overnight", filepath.Join(dir, "overnight"), nonce)).To(Succeed())
	Expect(harnesstest.Build(ctx, "./sandbox/internal/testinit", filepath.Join(dir, "testinit"), "")).To(Succeed())
	built = true
	return []byte(dir)
}, func(ctx SpecContext, dir []byte) {
	initBinary = filepath.Join(string(dir), "overnight-sandbox")
	overnightBinary = filepath.Join(string(dir), "overnight")
	testBinary = filepath.Join(string(dir), "testinit")
	var err error
	dockerCli, err = docker.Connect(ctx)
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(6*time.Minute))

var _ = SynchronizedAfterSuite(func() {}, func(ctx SpecContext) {
	if initBinary == "" {
		return
	}
	// The sandbox images this suite's binaries made are removed with them.
	if dockerCli != nil {
		eng := docker.New(dockerCli, docker.Options{})
		for _, spec := range []docker.ImageSpec{{InitBinary: initBinary}, {InitBinary: initBinary, AgentBinary: testBinary}} {
			if ref, err := eng.ImageRef(ctx, spec); err == nil {
				Expect(eng.RemoveImage(ctx, ref)).To(Succeed())
			}
		}
	}
	Expect(os.RemoveAll(filepath.Dir(initBinary))).To(Succeed())
})

// newHarness opens a harness on a fresh state dir and, after the spec,
// checks that no container of that state dir is left behind.
func newHarness(ctx context.Context, progress *syncBuffer) *harness.Harness {
	return newHarnessOn(ctx, dockerCli, progress)
}

// newHarnessOn is newHarness whose harness reaches the engine through api
// (the real engine with some calls changed, say).
func newHarnessOn(ctx context.Context, api docker.API, progress *syncBuffer) *harness.Harness {
	return newHarnessWith(ctx, api, progress, harness.Options{})
}

// newHarnessWith is newHarnessOn with more options (Invariants, say); the
// state dir, init binary, sandbox, logger and progress are set here.
func newHarnessWith(ctx context.Context, api docker.API, progress *syncBuffer, opts harness.Options) *harness.Harness {
	state := GinkgoT().TempDir()
	// The harness's diagnostics (warnings of engine calls that failed, for
	// one) are shown with a spec that fails.
	opts.StateDir, opts.InitBinary, opts.Sandbox = state, initBinary, docker.Using(api)
	opts.Logger = slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if progress != nil {
		opts.Progress = progress
	}
	h, err := harness.Open(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(h.Close()).To(Succeed())
		Expect(harnesstest.Leftovers(ctx, dockerCli, state)).To(BeEmpty(), "containers left behind by the run")
	})
	return h
}

func deploy() *scenarios.Scenario { return deployWith("") }

// deployWith is the built-in deploy scenario with extra agent variants,
// given as YAML lines under `agents:`. The scenario is built from text, as
// the harness stores and re-reads it on resume.
func deployWith(variants string) *scenarios.Scenario {
	raw, ok := builtin.Lookup("deploy")
	Expect(ok).To(BeTrue())
	if variants == "" {
		s, err := scenarios.Parse("builtin:deploy", raw)
		Expect(err).NotTo(HaveOccurred())
		return s
	}
	text := strings.Replace(string(raw), "\nagents:\n", "\nagents:\n"+variants, 1)
	s, err := scenarios.Parse("deploy-test.yaml", []byte(text))
	Expect(err).NotTo(HaveOccurred())
	return s
}

func faults(texts ...string) []chaos.Spec {
	out := []chaos.Spec{}
	for _, t := range texts {
		s, err := chaos.ParseSpec(t)
		Expect(err).NotTo(HaveOccurred())
		out = append(out, s)
	}
	return out
}

func invariant(res *harness.Result, name string) harness.InvariantResult {
	for _, ir := range res.Invariants {
		if ir.Name == name {
			return ir
		}
	}
	Fail("no invariant " + name + " in the result")
	return harness.InvariantResult{}
}

// syncBuffer is a progress writer safe for the harness's goroutines.
type syncBuffer struct {
	mu     sync.Mutex
	b      strings.Builder
	notify func(line string)
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.b.Write(p)
	n := s.notify
	s.mu.Unlock()
	if n != nil {
		n(string(p))
	}
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cutProxy relays a unix socket to the real Docker engine until cut, when
// it closes its listener and every relayed connection: the engine "goes
// away" in the middle of a run.
type cutProxy struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(sock, target string) *cutProxy {
	l, err := net.Listen("unix", sock)
	Expect(err).NotTo(HaveOccurred())
	p := &cutProxy{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	DeferCleanup(p.cut)
	return p
}

func (p *cutProxy) cut() {
	_ = p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

var _ = Describe("the deploy scenario against the real engine", func() {
	It("passes without faults in one attempt", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy()})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Attempts).To(Equal(1))
		Expect(res.StepsCompleted).To(Equal(5))
		Expect(res.Outcome).To(Equal("success"))
		Expect(res.Effects).To(Equal(harness.EffectCounts{Executed: 5}))
		Expect(res.HistoryDigest).To(HaveLen(64))

		logs, err := h.Logs(res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(logs).To(HaveLen(1))
		Expect(logs[0].Stdout).To(ContainSubstring("step 5 done"))
		Expect(*logs[0].ExitCode).To(Equal(0))
	}, SpecTimeout(2*time.Minute))

	DescribeTable("survives a SIGKILL of the agent after each step",
		func(ctx SpecContext, step int) {
			h := newHarness(ctx, nil)
			res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults(fmt.Sprintf("kill@step:%d", step))})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v", res.Reason, res.Invariants)
			Expect(res.Attempts).To(Equal(2))
			Expect(res.StepsCompleted).To(Equal(5))
			Expect(res.Faults).To(HaveLen(1))
			Expect(res.Faults[0].Applied).To(BeTrue())
			Expect(res.Faults[0].Attempt).To(Equal(1))
			Expect(res.Effects.Executed).To(Equal(5), "no effect may run twice")
			Expect(res.Effects.Duplicates).To(Equal(0))

			logs, err := h.Logs(res.RunID)
			Expect(err).NotTo(HaveOccurred())
			Expect(logs).To(HaveLen(2))
			Expect(logs[0].End).To(Equal("killed by fault kill@step:" + fmt.Sprint(step)))
			Expect(*logs[0].ExitCode).To(Equal(137))
			Expect(logs[1].Stdout).To(ContainSubstring(fmt.Sprintf("starting after step %d of 5", step)))
		},
		Entry("kill@step:1", 1, SpecTimeout(2*time.Minute)), Entry("kill@step:2", 2, SpecTimeout(2*time.Minute)),
		Entry("kill@step:3", 3, SpecTimeout(2*time.Minute)), Entry("kill@step:4", 4, SpecTimeout(2*time.Minute)),
		Entry("kill@step:5", 5, SpecTimeout(2*time.Minute)),
	)

	It("catches the naive agent that starts over after kill@step:3", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Agent: "naive", Faults: faults("kill@step:3")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictFail))
		dup := invariant(res, harness.InvNoDuplicateEffects)
		Expect(dup.Verdict).To(Equal(harness.VerdictFail))
		Expect(dup.Detail).To(ContainSubstring(`network "prod-net" created 2 times`))
		Expect(invariant(res, harness.InvNoLostProgress).Verdict).To(Equal(harness.VerdictFail))
		Expect(res.Effects.Duplicates).To(Equal(2))
		Expect(res.Effects.Unkeyed).To(Equal(8))
	}, SpecTimeout(2*time.Minute))

	It("gives the same history digest for the same scenario, seed and faults", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		var digests []string
		for i := 0; i < 2; i++ {
			res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults("kill@step:2")})
			Expect(err).NotTo(HaveOccurred())
			digests = append(digests, res.HistoryDigest)
		}
		Expect(digests[0]).To(Equal(digests[1]))
		other, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults("kill@step:4")})
		Expect(err).NotTo(HaveOccurred())
		Expect(other.HistoryDigest).NotTo(Equal(digests[0]), "a different fault history must change the digest")
	}, SpecTimeout(3*time.Minute))

	It("ends a crash loop with fail and a reason once max attempts are used", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		s := deployWith("  broken: {builtin: deployer, args: [--no-such-flag]}\n")
		res, err := h.Run(ctx, harness.RunRequest{Scenario: s, Agent: "broken", MaxAttempts: 3})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictFail))
		Expect(res.Attempts).To(Equal(3))
		Expect(res.Reason).To(ContainSubstring("crash loop: 3 attempts"))
		logs, err := h.Logs(res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(logs[2].Stderr).To(ContainSubstring("no-such-flag"))
	}, SpecTimeout(2*time.Minute))

	It("ends a hung agent at the wall-clock timeout with fail", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		s := deployWith("  hung: {binary: " + testBinary + ", args: [sleep, 10m]}\n")
		start := time.Now()
		res, err := h.Run(ctx, harness.RunRequest{Scenario: s, Agent: "hung", Timeout: 3 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictFail))
		Expect(res.Reason).To(ContainSubstring("wall-clock timeout"))
		Expect(time.Since(start)).To(BeNumerically("<", 90*time.Second))
	}, SpecTimeout(2*time.Minute))

	It("leaves the run resumable on cancellation (Ctrl-C), with no container behind, and resumes it", func(ctx SpecContext) {
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		progress := &syncBuffer{}
		progress.notify = func(line string) {
			if strings.Contains(line, "attempt 1 started") {
				cancel()
			}
		}
		h := newHarness(ctx, progress)
		var runID string
		s := deployWith("  slow: {builtin: deployer, args: [--step-delay, 300ms]}\n")
		_, err := h.Run(runCtx, harness.RunRequest{Scenario: s, Agent: "slow", Started: func(id string) { runID = id }})
		Expect(err).To(MatchError(harness.ErrInterrupted))
		runs, err := h.Runs()
		Expect(err).NotTo(HaveOccurred())
		Expect(runs[0].RunID).To(Equal(runID))
		Expect(runs[0].Status).To(Equal(harness.StatusInterrupted))
		left, err := harnesstest.Containers(ctx, dockerCli, h.StateDir())
		Expect(err).NotTo(HaveOccurred())
		Expect(left).To(BeEmpty())

		res, err := h.Resume(ctx, runID)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Attempts).To(Equal(2))
		Expect(res.Effects.Duplicates).To(Equal(0))
		again, err := h.Resume(ctx, runID)
		Expect(err).NotTo(HaveOccurred())
		Expect(again).To(Equal(res), "a finished run resumes to its recorded result")
	}, SpecTimeout(2*time.Minute))

	It("ends the run interrupted, not with a guessed exit code, when the engine goes away mid-run; resume finishes it", func(ctx SpecContext) {
		target := strings.TrimPrefix(dockerCli.DaemonHost(), "unix://")
		Expect(target).NotTo(Equal(dockerCli.DaemonHost()), "this test needs the engine on a unix socket")
		proxy := newCutProxy(filepath.Join(GinkgoT().TempDir(), "docker.sock"), target)
		flaky, err := client.NewClientWithOpts(client.WithHost("unix://"+proxy.l.Addr().String()), client.WithAPIVersionNegotiation())
		Expect(err).NotTo(HaveOccurred())
		defer flaky.Close()

		state := GinkgoT().TempDir()
		DeferCleanup(func(ctx SpecContext) {
			Expect(harnesstest.Leftovers(ctx, dockerCli, state)).To(BeEmpty(), "left behind by the run")
		})
		progress := &syncBuffer{}
		progress.notify = func(line string) {
			if strings.Contains(line, "attempt 1 started") {
				go func() { time.Sleep(500 * time.Millisecond); proxy.cut() }()
			}
		}
		h, err := harness.Open(ctx, harness.Options{StateDir: state, InitBinary: initBinary, Sandbox: docker.Using(flaky), Progress: progress})
		Expect(err).NotTo(HaveOccurred())
		var runID string
		s := deployWith("  slow: {builtin: deployer, args: [--step-delay, 300ms]}\n")
		_, err = h.Run(ctx, harness.RunRequest{Scenario: s, Agent: "slow", Started: func(id string) { runID = id }})
		Expect(err).To(MatchError(ContainSubstring("lost track of sandbox")))
		Expect(h.Close()).To(Succeed())

		h2, err := harness.Open(ctx, harness.Options{StateDir: state, InitBinary: initBinary, Sandbox: docker.Using(dockerCli)})
		Expect(err).NotTo(HaveOccurred())
		defer h2.Close()
		runs, err := h2.Runs()
		Expect(err).NotTo(HaveOccurred())
		Expect(runs[0].Status).To(Equal(harness.StatusInterrupted))
		res, err := h2.Resume(ctx, runID)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Attempts).To(Equal(2), "no attempt was burnt while the engine was away")
		Expect(res.Effects.Duplicates).To(Equal(0))
		logs, err := h2.Logs(runID)
		Expect(err).NotTo(HaveOccurred())
		Expect(logs[0].ExitCode).To(BeNil(), "an exit code nobody saw is not recorded")
		Expect(logs[0].End).To(HavePrefix("lost:"))
		Expect(logs[0].Stdout).To(ContainSubstring("attempt 1: starting"), "the orphan's logs are recovered when it is reaped")
	}, SpecTimeout(3*time.Minute))

	It("refuses an unknown agent variant and an unknown fault before recording anything", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		_, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Agent: "nope"})
		Expect(err).To(MatchError(ContainSubstring("naive")))
		_, err = h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults("meteor@step:1")})
		Expect(err).To(MatchError(chaos.ErrUnknownFault))
		runs, err := h.Runs()
		Expect(err).NotTo(HaveOccurred())
		Expect(runs).To(BeEmpty())
	})
})
