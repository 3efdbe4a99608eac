package viewer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/harness/suite"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// fixtureStart is when the fixture's first run started; run i started i
// seconds later.
var fixtureStart = time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)

// runID is the fixture's i-th run id (ids sort by start, as real ones do).
func runID(i int) string {
	return fixtureStart.Add(time.Duration(i)*time.Second).Format("20060102-150405") + fmt.Sprintf("-%06x", i)
}

// runEntries is run i of a fixture state dir as the harness would have
// written it: scenario deploy or week, agent default or naive, seed i%10,
// verdict pass, fail or unknown in turn, with a result (faults, effects,
// invariants) of a realistic size.
func runEntries(i int) []history.Entry {
	id := runID(i)
	start := fixtureStart.Add(time.Duration(i) * time.Second)
	verdict := []string{history.VerdictPass, history.VerdictFail, history.VerdictUnknown}[i%3]
	scenario := []string{"deploy", "week"}[i%2]
	agent := []string{"", "naive"}[(i/2)%2]
	applied := int64(90000)
	res := &history.Result{RunID: id, Scenario: scenario, Agent: agent, Seed: int64(i % 10), Verdict: verdict, Reason: "fixture run " + verdict,
		Outcome: "success", Attempts: 2, StepsCompleted: 5,
		Faults: []history.FaultResult{{Kind: "kill", Spec: "kill@step:3", At: "step:3", Applied: true, AppliedVirtualMS: &applied, Attempt: 1, Met: true,
			MetDetail: "the agent was killed after step 3 and a new attempt resumed from its checkpoint"}},
		Effects: history.EffectCounts{Executed: 5, Deduplicated: 1},
		Invariants: []history.InvariantResult{
			{Name: "no-duplicate-effects", Kind: "always", Verdict: verdict, Detail: "the world shows every resource of a non-idempotent kind created once"},
			{Name: "no-lost-progress", Kind: "always", Verdict: "pass", Detail: "every checkpointed step's effects are in the world"},
			{Name: "goal-reached", Kind: "eventually", Verdict: "pass", Detail: "the service answers on prod.example.com within the horizon"},
			{Name: "faults-met", Kind: "sometimes", Verdict: "pass", Detail: "every applied fault was met by the agent"},
		},
		WallMS: 1800, VirtualMS: 120000, HistoryDigest: "9f2c1e0d4b7a5c3e8f6d2a1b0c9e8d7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d"}
	rec := history.RunRecord{ID: id, Scenario: scenario, Source: "builtin:" + scenario, ScenarioBlob: "blob", Agent: agent, Seed: int64(i % 10),
		Faults: []string{"kill@step:3"}, Timeout: history.Duration(2 * time.Minute), MaxAttempts: 5, Status: history.StatusFinished,
		Verdict: verdict, Reason: res.Reason, StartedAt: start, EndedAt: start.Add(1800 * time.Millisecond), Attempts: 2,
		VirtualStart: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Result: res, Extras: map[string]string{"lessons": "memory"}}
	return []history.Entry{history.RunEntry(rec)}
}

// writeRuns writes runs from..to-1 of the fixture, in commits of up to 500.
func writeRuns(ctx context.Context, w *history.Writer, from, to int) {
	GinkgoHelper()
	Expect(putRuns(ctx, w, from, to)).To(Succeed())
}

func putRuns(ctx context.Context, w *history.Writer, from, to int) error {
	for i := from; i < to; {
		var batch []history.Entry
		for ; i < to && len(batch) < 500; i++ {
			batch = append(batch, runEntries(i)...)
		}
		if err := w.Put(ctx, batch...); err != nil {
			return err
		}
	}
	return nil
}

// fixtureAgentReport is what the detailed run's agent wrote to
// /workspace/report.md.
const fixtureAgentReport = "# Deployed\n\n<b>not markup</b>: api behind prod.example.com\n"

// detailedRun writes a run with a whole history (attempts, checkpoints,
// effects, faults, an LLM exchange, events, logs), a reflection with an
// isolated replay, and a gate decision; and a suite whose result lists it.
func detailedRun(ctx context.Context, w *history.Writer, id string) {
	GinkgoHelper()
	start := fixtureStart.Add(-time.Hour)
	ms := func(n int) time.Time { return start.Add(time.Duration(n) * time.Millisecond) }
	exit0, exit137 := 0, 137
	out, err := w.PutBlob(ctx, []byte("starting after step 3 of 5\ndeployed <prod>\n"))
	Expect(err).NotTo(HaveOccurred())
	agentReport, err := w.PutBlob(ctx, []byte(fixtureAgentReport))
	Expect(err).NotTo(HaveOccurred())
	report := &history.ReportRecord{Path: "/workspace/report.md", Status: history.ReportKept, SHA256: agentReport, Bytes: int64(len(fixtureAgentReport))}
	rec := history.RunRecord{ID: id, Scenario: "deploy-v2", Source: "builtin:deploy-v2", Seed: 4, Faults: []string{"kill@step:3"},
		Status: history.StatusFinished, Verdict: "pass", Reason: "the agent reported done; all 5 invariants hold", StartedAt: start, EndedAt: ms(6000),
		Attempts: 2, VirtualStart: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Result: &history.Result{RunID: id, Scenario: "deploy-v2", Seed: 4, Verdict: "pass", Reason: "the agent reported done; all 5 invariants hold",
			Invariants: []history.InvariantResult{{Name: "no-duplicate-effects", Kind: "always", Verdict: "pass", Detail: "once each"}}, WallMS: 6000}}
	replay := "20261204-065959-00beef"
	replayRec := history.RunRecord{ID: replay, Scenario: "deploy-v2", Status: history.StatusFinished, Verdict: "fail", Reason: "refused again",
		StartedAt: ms(2500), EndedAt: ms(3500), Isolated: &history.Isolation{Parent: id, Purpose: "replay 1 of 1 of reflection r1"}}
	Expect(w.Put(ctx,
		history.RunEntry(rec), history.RunEntry(replayRec),
		history.AttemptEntry(id, history.AttemptRecord{N: 1, StartedAt: ms(100), EndedAt: ms(1500), End: "killed by fault", ExitCode: &exit137}),
		history.AttemptEntry(id, history.AttemptRecord{N: 2, StartedAt: ms(1700), EndedAt: ms(5900), End: "exited", ExitCode: &exit0, StdoutBlob: out}),
		history.DoneEntry(id, history.DoneRecord{Outcome: "success", Attempt: 2, Virtual: rec.VirtualStart.Add(49 * time.Hour), Report: report}),
		history.CheckpointEntry(id, history.CheckpointRecord{Seq: 1, Step: 3, Attempt: 1, Wall: ms(1200),
			Consistency: &history.Consistency{Verdict: history.Poisoned, Reason: `the world contradicts migrated {"database":"prod-db","version":3}`}}),
		history.CheckpointEntry(id, history.CheckpointRecord{Seq: 2, Step: 5, Attempt: 2, Wall: ms(5800)}),
		history.FaultEntry(id, history.FaultRecord{Index: 0, Spec: "kill@step:3", From: "kill@step:3", Kind: "kill", At: "step:3", Applied: true,
			AppliedAttempt: 1, AppliedWall: ms(1300), Met: true, MetDetail: "killed after step 3"}),
		history.LLMEntry(id, history.LLMRecord{Seq: 1, Attempt: 2, Call: 1, Status: 200, Provider: "scripted", Model: "scripted",
			Request:  json.RawMessage(`{"messages":[{"role":"user","content":"deploy <carefully>"}]}`),
			Response: json.RawMessage(`{"choices":[{"message":{"role":"assistant","content":"ok"}}]}`), Usage: &protocol.ChatUsage{PromptTokens: 12, CompletionTokens: 2}}),
		history.EventEntry(id, history.EventRecord{Seq: 1, Attempt: 2, Type: "progress", Message: "step 5 done", Wall: ms(5800),
			Virtual: rec.VirtualStart.Add(2*24*time.Hour + 3*time.Hour + 30*time.Second)}),
		history.ReflectionEntry(id, history.ReflectionRecord{ID: "r1", N: 1, Stage: history.StageDecided,
			Trigger:  history.Trigger{Kind: "effect_refused", Attempt: 1, Step: 3, Detail: "the world refused cloud.deploy_service"},
			Replays:  []history.ReplayRecord{{RunID: replay, Verdict: "fail", Reproduced: true}},
			Lesson:   &history.Lesson{ID: "lesson-x", Text: "Send the api_key.", By: "deterministic"},
			Decision: history.DecisionVerify, Reason: "lesson verified in isolation", DecidedAt: ms(4000)}),
		history.GateEntry(id, history.GateRecord{Seq: 1, EffectID: "k/step-4/1", Kind: "cloud.deploy_service", Policy: "verify", Decision: history.GateReleased, By: "gate", At: ms(4500)}),
	)).To(Succeed())
	// A fresh effect entry is stamped with the time of the write: give it
	// the run's.
	e := &history.EffectRecord{ID: "k/step-4/1", Key: "step-4/1", Kind: "cloud.deploy_service", Status: "done", Attempt: 2, Executions: 1}
	entry := history.EffectEntry(id, e)
	e.Wall = ms(4600)
	Expect(w.Put(ctx, entry)).To(Succeed())
	// A tools/call of an MCP server, answered again from the journal, and
	// held at the gate until a person approved it.
	call := &history.EffectRecord{ID: "k/ticket-1", Key: "ticket-1", Kind: "mcp.tickets.create_ticket", Status: "done", Attempt: 2, Executions: 1, Replays: 1}
	entry = history.EffectEntry(id, call)
	call.Wall = ms(4700)
	Expect(w.Put(ctx, entry, history.GateEntry(id, history.GateRecord{Seq: 2, EffectID: "k/ticket-1", Key: "ticket-1", Kind: "mcp.tickets.create_ticket",
		Policy: "approve", Decision: "approved", By: "person:ana", At: ms(4650)}))).To(Succeed())

	// A tools/call the gateway refused: its tool was gone.
	gone := history.MCPRefusal{Tool: "tickets__close_ticket", ArgsDigest: "77aa", Fault: "mcp-tool-gone:tickets__close_ticket@step:3", Attempt: 2,
		Reason: "tool tickets__close_ticket is gone: MCP server tickets no longer offers it (an mcp-tool-gone fault); list the tools again"}
	data, err := json.Marshal(gone)
	Expect(err).NotTo(HaveOccurred())
	Expect(w.Put(ctx, history.EventEntry(id, history.EventRecord{Seq: 2, Attempt: 2, Type: history.EventMCPRefused, Message: "refused " + gone.Tool + ": " + gone.Reason,
		Data: data, Wall: ms(4800), Virtual: rec.VirtualStart.Add(2*24*time.Hour + 4*time.Hour)}))).To(Succeed())

	res := &suite.Result{Suite: suite.Header{ID: "suite-fixture", StartedAt: start, WallMS: 9000, Parallel: 2},
		Runs: []suite.RunResult{
			{Scenario: "deploy-v2", Agent: "default", Seed: 4, RunID: id, Verdict: "pass", Counted: true, Reproduce: "overnight run deploy-v2 --seed 4"},
			{Scenario: "deploy-v2", Agent: "default", Seed: 5, RunID: runID(1), Verdict: "fail", Reason: "fixture run fail", Counted: true, Reproduce: "overnight run deploy-v2 --seed 5"},
		}}
	res.Tally()
	js, err := json.Marshal(res)
	Expect(err).NotTo(HaveOccurred())
	Expect(w.Put(ctx, history.SuiteEntry(history.SuiteRecord{ID: "suite-fixture", StartedAt: start, EndedAt: start.Add(9 * time.Second), Result: js}))).To(Succeed())
}

// stateDir makes a state dir holding runs 0..n-1 of the fixture and the
// detailed run, owned by nobody when it returns.
func stateDir(n int, detailed string) string {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	j, err := journal.Open(dir, journal.Options{})
	Expect(err).NotTo(HaveOccurred())
	w := history.NewWriter(j)
	writeRuns(context.Background(), w, 0, n)
	if detailed != "" {
		detailedRun(context.Background(), w, detailed)
	}
	Expect(j.Close()).To(Succeed())
	return dir
}
