package harness_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/reflect"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/scenarios"
)

// mcpReflectScenario is examples/mcp/reflect.yaml with its agent at bin,
// and each pair of replace applied to its text.
func mcpReflectScenario(bin string, replace ...string) *scenarios.Scenario {
	GinkgoHelper()
	path := filepath.Join(harnesstest.ModuleRoot(), "examples", "mcp", "reflect.yaml")
	raw, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	text := strings.NewReplacer(replace...).Replace(string(raw))
	text = strings.ReplaceAll(text, "./bin/mcp-agent", bin)
	s, err := scenarios.Parse(path, []byte(text))
	Expect(err).NotTo(HaveOccurred())
	return s
}

// ticketsSeen is every state of a real tickets.py's own file read while a
// run goes on, each with when it was first read.
type ticketsSeen struct {
	mu     sync.Mutex
	states [][]ticket
	at     []time.Time
}

// watchTickets reads run's tickets.json every 10 ms, from the moment
// run's id is known, until stop is called.
func watchTickets(h *harness.Harness, runID func() string) (seen *ticketsSeen, stop func()) {
	seen = &ticketsSeen{}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var last []byte
		for {
			if id := runID(); id != "" {
				raw, err := os.ReadFile(filepath.Join(h.StateDir(), "mcp", "tickets-"+id, "data", "tickets.json"))
				if err != nil && !errors.Is(err, os.ErrNotExist) {
					panic(err)
				}
				if err == nil && string(raw) != string(last) {
					var state struct {
						Tickets []ticket `json:"tickets"`
					}
					if json.Unmarshal(raw, &state) == nil { // os.Replace: never half a file
						last = raw
						seen.mu.Lock()
						seen.states = append(seen.states, state.Tickets)
						seen.at = append(seen.at, time.Now())
						seen.mu.Unlock()
					}
				}
			}
			select {
			case <-quit:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return seen, func() { close(quit); <-done }
}

func keyed(ts []ticket) []string {
	var out []string
	for _, t := range ts {
		k := "<none>"
		if t.Key != nil {
			k = *t.Key
		}
		out = append(out, t.Title+" @ "+k)
	}
	return out
}

var _ = Describe("a reflection on a run whose tools are an MCP server, verified on fresh instances restored from the run", Ordered, func() {
	var agentBin string
	BeforeAll(func(ctx SpecContext) {
		dir, err := os.MkdirTemp("", "ovn-mcp-reflect-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		agentBin = filepath.Join(dir, "mcp-agent")
		Expect(harnesstest.Build(ctx, "./examples/mcp/agent", agentBin, fmt.Sprintf("mcp-reflect-%d", time.Now().UnixNano()))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			eng := docker.New(dockerCli, docker.Options{})
			if ref, err := eng.ImageRef(ctx, docker.ImageSpec{InitBinary: initBinary, AgentBinary: agentBin}); err == nil {
				Expect(eng.RemoveImage(ctx, ref)).To(Succeed())
			}
		})
	}, NodeTimeout(5*time.Minute))

	// run runs scen with the reflection loop on, reading the real
	// tickets.py's file all along.
	run := func(ctx SpecContext, scen *scenarios.Scenario) (*harness.Harness, *harness.Result, *ticketsSeen) {
		ext, err := reflect.New(reflect.Options{})
		Expect(err).NotTo(HaveOccurred())
		h := newHarnessWith(ctx, dockerCli, nil, harness.Options{Extension: ext})
		var mu sync.Mutex
		var id string
		seen, stop := watchTickets(h, func() string { mu.Lock(); defer mu.Unlock(); return id })
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, Started: func(runID string) { mu.Lock(); id = runID; mu.Unlock() }})
		stop()
		Expect(err).NotTo(HaveOccurred())
		return h, res, seen
	}
	long := "cert expired on every host of the web tier since Sunday"

	It("verifies the lesson on a fresh tickets.py restored by replaying the run's calls; the real server's file holds only the run's own tickets", func(ctx SpecContext) {
		h, res, seen := run(ctx, mcpReflectScenario(agentBin))
		logs, _ := h.Logs(res.RunID)
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v\n%+v", res.Reason, res.Invariants, logs)
		Expect(res.Reflections).To(HaveLen(1))
		r := res.Reflections[0]
		Expect(r.Decision).To(Equal(history.DecisionVerify), "%+v", r)
		Expect(r.Reproduced.Failed).To(Equal(r.Reproduced.Runs), "the refusal came back in every replay on a fresh instance")
		Expect(r.Verification.Verdict).To(Equal(harness.VerdictPass), "verified on a fresh instance")
		Expect(res.Gate.Released).To(BeNumerically(">=", 2), "the corrected calls passed the gate on the strength of the verification")

		// The verification's instance was restored — the real run's
		// create_ticket replayed into it, answered as recorded, the
		// refused call journaled as it was — then took the verification's
		// own calls.
		refls, err := h.History().Reflections(res.RunID)
		Expect(err).NotTo(HaveOccurred())
		verification, err := h.History().Load(ctx, refls[0].Verification.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(verification.Record.Isolated.Parent).To(Equal(res.RunID))
		var journaled []string
		for _, e := range verification.Ledger {
			journaled = append(journaled, e.Key+" "+string(e.Outcome.Status))
		}
		Expect(journaled).To(Equal([]string{"k/ticket-0 done", "k/ticket-1 failed", "k/ticket-1/short done", "k/ticket-2 done"}))
		Expect(filepath.Join(h.StateDir(), "mcp", "tickets-"+verification.Record.ID)).NotTo(BeADirectory(), "the fresh instance's data went with its isolated run")

		// The real server, read from its own file: each ticket the run
		// opened, once; every state it went through a step towards that;
		// and through the reflection — from its opening to its decision —
		// it held the one ticket opened before the refusal.
		final := keyed(tickets(h, res.RunID))
		Expect(final).To(Equal([]string{"disk full @ k/ticket-0", long[:40] + " @ k/ticket-1/short", "backup failed @ k/ticket-2"}))
		seen.mu.Lock()
		defer seen.mu.Unlock()
		Expect(seen.states).NotTo(BeEmpty())
		var during [][]string
		for i, st := range seen.states {
			Expect(final[:len(st)]).To(Equal(keyed(st)), "state %d of the real file is a step towards the run's own", i)
			if !seen.at[i].After(refls[0].DecidedAt) {
				during = append(during, keyed(st))
			}
		}
		Expect(during).To(Equal([][]string{{"disk full @ k/ticket-0"}}), "the real file as the reflection opened, and as it decided: untouched by its replays and its verification")
		run, err := h.History().Load(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		executed := 0
		for _, eff := range run.Effects {
			executed += eff.Executions
		}
		Expect(executed).To(Equal(4), "three tickets opened and the refused call: every call the real server received")
	}, SpecTimeout(5*time.Minute))

	It("says it cannot verify when the server is not replayable, and keeps the gate shut: the real server gets nothing more", func(ctx SpecContext) {
		h, res, seen := run(ctx, mcpReflectScenario(agentBin, "      replayable: true\n", ""))
		Expect(res.Verdict).To(Equal(harness.VerdictFail), res.Reason)
		Expect(res.Reflections).To(HaveLen(1))
		r := res.Reflections[0]
		Expect(r.Decision).To(Equal(history.DecisionGaveUp))
		Expect(r.Reason).To(And(ContainSubstring("MCP server tickets is not declared replayable: true"), ContainSubstring("reflection cannot verify")))
		Expect(keyed(tickets(h, res.RunID))).To(Equal([]string{"disk full @ k/ticket-0"}), "the refused call opened nothing, and no call passed the shut gate")
		seen.mu.Lock()
		defer seen.mu.Unlock()
		for _, st := range seen.states {
			Expect(len(st)).To(BeNumerically("<=", 1))
		}
		runs, err := h.History().Runs()
		Expect(err).NotTo(HaveOccurred())
		for _, rr := range runs {
			Expect(rr.Isolated).To(BeNil(), "no isolated run was started: there is nothing to run it on")
		}
	}, SpecTimeout(5*time.Minute))
})
