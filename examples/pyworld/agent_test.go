package pyworld_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.yaml.in/yaml/v3"

	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// scenarioFile is what these specs read of scenario.yaml.
type scenarioFile struct {
	Name  string `yaml:"name"`
	World struct {
		Name    string   `yaml:"name"`
		Command []string `yaml:"command"`
	} `yaml:"world"`
	Agent struct {
		Binary string `yaml:"binary"`
	} `yaml:"agent"`
	Agents map[string]struct {
		Binary string   `yaml:"binary"`
		Args   []string `yaml:"args"`
	} `yaml:"agents"`
	Task       map[string]any `yaml:"task"`
	Faults     []string       `yaml:"faults"`
	Invariants []string       `yaml:"invariants"`
}

func readScenario() scenarioFile {
	GinkgoHelper()
	b, err := os.ReadFile("scenario.yaml")
	Expect(err).NotTo(HaveOccurred())
	var s scenarioFile
	Expect(yaml.Unmarshal(b, &s)).To(Succeed())
	return s
}

// buildAgent builds ./agent as a static binary in a temporary directory.
func buildAgent(ctx context.Context) string {
	GinkgoHelper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		Skip("the go command is not on PATH: the example agent cannot be built (" + err.Error() + ")")
	}
	bin := filepath.Join(GinkgoT().TempDir(), "inventory-agent")
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "./agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build ./agent:\n%s", out)
	return bin
}

// miniHarness is a stand-in for the overnight harness's effect path, just
// enough to run the example agent as a real process against the real
// inventory world: the real gateway server (harness/gateway) on loopback,
// checkpoints in memory, one attempt's token at a time (older ones fenced),
// and effects executed in the world through the world protocol, each key
// once — an effect whose result was never recorded (the agent was killed
// in between) is reconciled with the world's lookup, as the harness does.
// The full harness runs scenario.yaml itself; this checks the agent.
type miniHarness struct {
	world *pyWorld
	task  json.RawMessage
	// killAt: SIGKILL the agent once the world has executed this many
	// effects, before the result is recorded or answered (0: never).
	killAt int

	mu         sync.Mutex
	attempt    int
	agent      *exec.Cmd
	exited     chan struct{}
	cp         protocol.Checkpoint
	results    map[string]protocol.EffectResult // by world key
	inDoubt    map[string]bool                  // world keys executed with no recorded result
	unkeyed    int
	executed   int
	reconciled int
	done       *protocol.Done
	now        time.Time
}

var _ gateway.Backend = (*miniHarness)(nil)

func (h *miniHarness) Authenticate(token string) (gateway.Caller, bool) {
	var n int
	if _, err := fmt.Sscanf(token, "attempt-%d", &n); err != nil {
		return gateway.Caller{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return gateway.Caller{Attempt: n}, n >= 1 && n <= h.attempt
}

// fence refuses an older attempt's write (h.mu held).
func (h *miniHarness) fence(c gateway.Caller) error {
	if c.Attempt != h.attempt {
		return gateway.Errorf(http.StatusConflict, protocol.CodeFenced, "attempt %d is fenced: attempt %d owns the run", c.Attempt, h.attempt)
	}
	return nil
}

func (h *miniHarness) RunInfo(_ context.Context, c gateway.Caller) (protocol.RunInfo, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return protocol.RunInfo{RunID: "pyworld-spec", Attempt: c.Attempt, Scenario: "inventory", Task: h.task, Lessons: []protocol.Lesson{}, Now: h.now}, nil
}

func (h *miniHarness) Checkpoint(context.Context, gateway.Caller) (protocol.Checkpoint, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cp, nil
}

func (h *miniHarness) PutCheckpoint(_ context.Context, c gateway.Caller, req protocol.PutCheckpoint) (protocol.CheckpointAck, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fence(c); err != nil {
		return protocol.CheckpointAck{}, err
	}
	if req.ExpectSeq != nil && *req.ExpectSeq != h.cp.Seq {
		return protocol.CheckpointAck{}, gateway.Errorf(http.StatusConflict, protocol.CodeConflict, "expect_seq %d, checkpoint is at %d", *req.ExpectSeq, h.cp.Seq)
	}
	h.cp = protocol.Checkpoint{Seq: h.cp.Seq + 1, Step: req.Step, State: req.State}
	return protocol.CheckpointAck{Seq: h.cp.Seq}, nil
}

func (h *miniHarness) Effect(ctx context.Context, c gateway.Caller, req protocol.EffectRequest) (protocol.EffectResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fence(c); err != nil {
		return protocol.EffectResult{}, err
	}
	key := "k/" + req.Key
	if req.Key == "" {
		h.unkeyed++
		key = fmt.Sprintf("u/%d", h.unkeyed)
	}
	if res, ok := h.results[key]; ok {
		res.Replayed = true
		return res, nil
	}
	if h.inDoubt[key] {
		// Executed before the agent died, result never recorded: ask the world.
		var found remote.LookupResponse
		if status, data := h.world.do(remote.PathLookup, remote.LookupRequest{Key: key}); status != http.StatusOK || json.Unmarshal(data, &found) != nil {
			return protocol.EffectResult{}, fmt.Errorf("lookup %s: %d %s", key, status, data)
		}
		if found.Found {
			h.reconciled++
			delete(h.inDoubt, key)
			res := h.record(key, req.Key, *found.Outcome)
			res.Replayed = true
			return res, nil
		}
	}
	var applied remote.ApplyResponse
	status, data := h.world.do(remote.PathApply, remote.ApplyRequest{Key: key, Kind: req.Kind, Args: req.Args, Now: h.now})
	if status != http.StatusOK || json.Unmarshal(data, &applied) != nil {
		return protocol.EffectResult{}, fmt.Errorf("apply %s: %d %s", key, status, data)
	}
	h.executed++
	if h.executed == h.killAt {
		h.inDoubt[key] = true
		_ = h.agent.Process.Signal(syscall.SIGKILL)
		select {
		case <-h.exited:
		case <-time.After(10 * time.Second):
		}
		return protocol.EffectResult{}, fmt.Errorf("the agent was killed after effect %d", h.executed)
	}
	return h.record(key, req.Key, applied.Outcome), nil
}

func (h *miniHarness) record(key, agentKey string, o world.Outcome) protocol.EffectResult {
	res := protocol.EffectResult{Key: agentKey, Status: o.Status, Result: o.Result, Error: o.Error}
	h.results[key] = res
	return res
}

func (h *miniHarness) Clock(context.Context, gateway.Caller) (protocol.Clock, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return protocol.Clock{Now: h.now}, nil
}

func (h *miniHarness) Sleep(_ context.Context, _ gateway.Caller, req protocol.SleepRequest) (protocol.Clock, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case req.Until != nil && req.Until.After(h.now):
		h.now = *req.Until
	case req.Seconds != nil:
		h.now = h.now.Add(time.Duration(*req.Seconds * float64(time.Second)))
	}
	return protocol.Clock{Now: h.now}, nil
}

func (h *miniHarness) Event(_ context.Context, c gateway.Caller, ev protocol.Event) error {
	fmt.Fprintf(GinkgoWriter, "attempt %d event %s: %s\n", c.Attempt, ev.Type, ev.Message)
	return nil
}

func (h *miniHarness) Done(_ context.Context, c gateway.Caller, d protocol.Done) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fence(c); err != nil {
		return err
	}
	h.done = &d
	return nil
}

// run serves the gateway on loopback and runs the agent binary, one
// attempt after another, until it reports done (at most maxAttempts); it
// returns the number of attempts.
func (h *miniHarness) run(ctx context.Context, bin string, args ...string) int {
	GinkgoHelper()
	h.results, h.inDoubt, h.now = map[string]protocol.EffectResult{}, map[string]bool{}, t0
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	srv := gateway.New(h, nil)
	go func() { _ = srv.Serve(l) }()
	DeferCleanup(srv.Close)

	const maxAttempts = 4
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = []string{
			protocol.EnvURL + "=http://" + l.Addr().String(),
			protocol.EnvToken + fmt.Sprintf("=attempt-%d", attempt),
			protocol.EnvAttempt + fmt.Sprintf("=%d", attempt),
		}
		cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
		exited := make(chan struct{})
		h.mu.Lock()
		h.attempt, h.agent, h.exited = attempt, cmd, exited
		h.mu.Unlock()
		Expect(cmd.Start()).To(Succeed())
		err := cmd.Wait()
		close(exited)
		fmt.Fprintf(GinkgoWriter, "attempt %d ended: %v\n", attempt, err)
		h.mu.Lock()
		finished := h.done != nil
		h.mu.Unlock()
		if finished {
			Expect(err).NotTo(HaveOccurred(), "the attempt that reported done exits 0")
			return attempt
		}
	}
	Fail(fmt.Sprintf("the agent reported nothing in %d attempts", maxAttempts))
	return 0
}

var _ = Describe("the example agent and scenario.yaml", Ordered, func() {
	var bin string
	var sc scenarioFile
	var task json.RawMessage
	BeforeAll(func(ctx SpecContext) {
		sc = readScenario()
		var err error
		task, err = json.Marshal(sc.Task)
		Expect(err).NotTo(HaveOccurred())
		bin = buildAgent(ctx)
	}, NodeTimeout(2*time.Minute))

	It("declares the inventory world as a command, the agent and its naive variant, a kill and the invariants", func() {
		Expect(sc.Name).To(Equal("inventory"))
		Expect(sc.World.Name).To(Equal("inventory"))
		Expect(sc.World.Command).To(Equal([]string{"python3", "inventory.py"}))
		Expect(sc.Agent.Binary).To(Equal("./bin/inventory-agent"))
		Expect(sc.Agents).To(HaveKey("naive"))
		Expect(sc.Agents["naive"].Args).To(Equal([]string{"--naive"}))
		Expect(sc.Faults).To(Equal([]string{"kill@effect:3"}))
		Expect(sc.Invariants).To(ContainElements("no-duplicate-effects", "goal-reached"))
	})

	It("killed after the world executed its third effect, resumes and finishes without doing anything twice", func(ctx SpecContext) {
		w := startWorld(nil, "--addr", "127.0.0.1:0")
		h := &miniHarness{world: w, task: task, killAt: 3}
		Expect(h.run(ctx, bin)).To(Equal(2), "the attempt killed, and one that resumed")
		Expect(h.done.Outcome).To(Equal(protocol.OutcomeSuccess), h.done.Summary)
		Expect(h.reconciled).To(Equal(1), "the in-doubt effect was sent again under its key and found in the world")
		Expect(h.unkeyed).To(BeZero())

		Expect(duplicates(w)).To(BeEmpty())
		check := goal(w, string(task))
		Expect(check.OK).To(BeTrue(), check.Detail)
		Expect(check.Detail).To(Equal("A-1: 10 stocked (3 reserved, 7 available); B-2: 5 stocked (2 reserved, 3 available); order order-7: 3 of A-1 (res-1); order order-8: 2 of B-2 (res-2)"))
		var keys []string
		for _, e := range ledger(w, "") {
			keys = append(keys, e.Key)
		}
		Expect(keys).To(Equal([]string{"k/step-1/0", "k/step-2/0", "k/step-3/0", "k/step-4/0"}), "each step executed once, under its step's key")
	})

	It("corrects its requests when the world's API is v2, learning the rename from the world's error", func(ctx SpecContext) {
		w := startWorld(nil, "--addr", "127.0.0.1:0")
		w.must(remote.PathSetVersion, remote.SetVersionRequest{Version: "v2", Now: t0}, nil)
		h := &miniHarness{world: w, task: task}
		Expect(h.run(ctx, bin)).To(Equal(1))
		Expect(h.done.Outcome).To(Equal(protocol.OutcomeSuccess), h.done.Summary)
		Expect(duplicates(w)).To(BeEmpty())
		Expect(goal(w, string(task)).OK).To(BeTrue())
		var outcomes []string
		for _, e := range ledger(w, "") {
			s := e.Outcome.Status
			if e.Outcome.Error != nil {
				s += " " + e.Outcome.Error.Code
			}
			outcomes = append(outcomes, e.Key+" "+s)
		}
		Expect(outcomes).To(Equal([]string{
			" done", // the version switch
			"k/step-1/0 failed field_renamed",
			"k/step-1/1 done", // corrected, under a new key
			"k/step-2/0 done", "k/step-3/0 done", "k/step-4/0 done",
		}))
	})

	It("--naive, killed at the same point, starts over and stocks and reserves twice: the world shows the duplicates", func(ctx SpecContext) {
		w := startWorld(nil, "--addr", "127.0.0.1:0")
		h := &miniHarness{world: w, task: task, killAt: 3}
		Expect(h.run(ctx, bin, sc.Agents["naive"].Args...)).To(Equal(2))
		Expect(h.unkeyed).To(Equal(3+4), "three effects before the kill, four after, none keyed")
		Expect(h.reconciled).To(BeZero())

		dups := duplicates(w)
		Expect(dups).To(HaveLen(3))
		Expect(dups[0]).To(Equal(world.Duplicate{Kind: "item", Name: "A-1", IDs: []string{"item-1", "item-3"}, Keys: []string{"u/1", "u/4"}, Count: 2}))
		Expect(dups[1].Name).To(Equal("B-2"))
		Expect(dups[2]).To(Equal(world.Duplicate{Kind: "reservation", Name: "order-7", IDs: []string{"res-1", "res-2"}, Keys: []string{"u/3", "u/6"}, Count: 2}))
		check := goal(w, string(task))
		Expect(check.OK).To(BeFalse())
		Expect(check.Detail).To(ContainSubstring("A-1 has 20 stocked in 2 record(s), want 10"))
		Expect(check.Detail).To(ContainSubstring("order order-7 is reserved 2 times"))
	})
})
