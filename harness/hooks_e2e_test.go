package harness_test

import (
	"context"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/cloud"
)

// recorder is an Extension whose hooks record what the run tells them, and
// whose gate and attempt policy answer as the spec says.
type recorder struct {
	mu       sync.Mutex
	failures []harness.Failure
	gated    []harness.GateRequest
	asked    []harness.AttemptEnd
	gate     func(harness.GateRequest) harness.GateDecision
	next     func(harness.AttemptEnd) harness.AttemptDecision
	lessons  []protocol.Lesson
}

func (rc *recorder) Hooks(context.Context, *harness.Harness, history.RunRecord, *scenarios.Scenario) (harness.Hooks, error) {
	hooks := harness.Hooks{Failures: rc, Lessons: rc}
	if rc.gate != nil {
		hooks.Gate = rc
	}
	if rc.next != nil {
		hooks.Next = rc
	}
	return hooks, nil
}

func (rc *recorder) Failed(_ context.Context, f harness.Failure) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.failures = append(rc.failures, f)
}

func (rc *recorder) Admit(_ context.Context, req harness.GateRequest) (harness.GateDecision, error) {
	rc.mu.Lock()
	rc.gated = append(rc.gated, req)
	rc.mu.Unlock()
	return rc.gate(req), nil
}

func (rc *recorder) Next(_ context.Context, end harness.AttemptEnd) (harness.AttemptDecision, error) {
	rc.mu.Lock()
	rc.asked = append(rc.asked, end)
	rc.mu.Unlock()
	return rc.next(end), nil
}

func (rc *recorder) Lessons(context.Context, string, int) ([]protocol.Lesson, error) {
	return rc.lessons, nil
}

func (rc *recorder) kinds() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []string
	for _, f := range rc.failures {
		out = append(out, f.Kind)
	}
	return out
}

// hooked opens a harness whose runs get rc's hooks.
func hooked(ctx context.Context, rc *recorder) *harness.Harness {
	state := GinkgoT().TempDir()
	h, err := harness.Open(ctx, harness.Options{StateDir: state, InitBinary: initBinary, Sandbox: docker.Using(dockerCli), Extension: rc})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(h.Close()).To(Succeed())
		Expect(harnesstest.Leftovers(ctx, dockerCli, state)).To(BeEmpty(), "containers left behind by the run")
	})
	return h
}

var _ = Describe("the run's extension points", func() {
	It("gates every effect that reaches the world: a denial is the agent's answer, and the world never sees it", func(ctx SpecContext) {
		rc := &recorder{gate: func(req harness.GateRequest) harness.GateDecision {
			if req.Kind == cloud.KindSetDNS {
				return harness.GateDecision{Policy: "deny", Reason: "DNS changes need a person"}
			}
			return harness.GateDecision{Allow: true, Policy: "allow"}
		}}
		h := hooked(ctx, rc)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), MaxAttempts: 2})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictFail), res.Reason)
		Expect(invariant(res, harness.InvGoalReached).Detail).To(ContainSubstring("no DNS record"))
		run, err := h.History().Load(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		var dns []history.EffectRecord
		for _, e := range run.Effects {
			if e.Kind == cloud.KindSetDNS {
				dns = append(dns, e)
			}
		}
		Expect(dns).NotTo(BeEmpty())
		Expect(dns[0].Status).To(Equal(protocol.StatusDenied))
		Expect(dns[0].Error.Message).To(Equal("DNS changes need a person"))
		Expect(dns[0].Executions).To(BeZero())
		for _, l := range run.Ledger {
			Expect(l.Kind).NotTo(Equal(cloud.KindSetDNS), "a denied effect never reaches the world")
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		Expect(len(rc.gated)).To(BeNumerically(">=", 5), "every effect that reaches the world passed the gate")
	}, SpecTimeout(2*time.Minute))

	It("hands out lessons, hears of failures, and lets a policy reopen a run the agent gave up on", func(ctx SpecContext) {
		rc := &recorder{lessons: []protocol.Lesson{{ID: "L1", Text: "check the API version first"}}}
		rc.next = func(end harness.AttemptEnd) harness.AttemptDecision {
			if end.Done != nil && end.Done.Outcome == protocol.OutcomeFailure && end.Attempt == 1 {
				return harness.AttemptDecision{Reopen: true}
			}
			return harness.AttemptDecision{}
		}
		h := hooked(ctx, rc)
		// The deployer gives up (done failure) when the world refuses an
		// effect it cannot correct: no model to correct it, here.
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deployWith("  stubborn: {builtin: deployer, args: [--give-up]}\n"), Agent: "stubborn",
			Faults: faults("api-version:v2@step:3"), MaxAttempts: 3})
		Expect(err).NotTo(HaveOccurred())
		Expect(rc.kinds()).To(ContainElements(harness.FailureEffectRefused, harness.FailureDone))
		rc.mu.Lock()
		Expect(rc.asked).NotTo(BeEmpty())
		rc.mu.Unlock()
		atts, err := h.Attempts(res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(atts)).To(BeNumerically(">=", 2), "the policy reopened the run after attempt 1 gave up")
		for _, a := range atts {
			Expect(a.Lessons).To(Equal(rc.lessons), "every attempt was handed the lessons")
		}
		events, err := h.History().Events(res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(events).To(ContainElement(HaveField("Type", "harness.reopen")))
	}, SpecTimeout(2*time.Minute))

	It("asks the attempt policy before each new attempt, and stops the run when it says so", func(ctx SpecContext) {
		rc := &recorder{next: func(end harness.AttemptEnd) harness.AttemptDecision {
			return harness.AttemptDecision{Stop: true, Reason: "the policy stopped it after attempt " + strconv.Itoa(end.Attempt), Verdict: harness.VerdictUnknown}
		}}
		h := hooked(ctx, rc)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults("kill@step:2")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictUnknown))
		Expect(res.Reason).To(Equal("the policy stopped it after attempt 1"))
		Expect(res.Attempts).To(Equal(1))
	}, SpecTimeout(2*time.Minute))
})

var _ = Describe("an isolated re-run against a shadow world", func() {
	It("starts the agent from a checkpoint of the parent, on the parent world's state then, and never touches the real world", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		parent, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults("kill@step:3")})
		Expect(err).NotTo(HaveOccurred())
		Expect(parent.Verdict).To(Equal(harness.VerdictPass))
		before, err := h.History().Load(ctx, parent.RunID)
		Expect(err).NotTo(HaveOccurred())
		var at3 history.CheckpointRecord
		for _, c := range before.Checkpoints {
			if c.Step == 3 && at3.Seq == 0 {
				at3 = c
			}
		}
		Expect(at3.WorldSeq).To(BeNumerically(">", 0))

		res, err := h.Isolated(ctx, harness.IsolatedRequest{Parent: parent.RunID, FromCheckpoint: at3.Seq, Purpose: "test",
			Lessons: []protocol.Lesson{{ID: "L9", Text: "a lesson"}}})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Attempts).To(Equal(1))
		Expect(res.Effects.Executed).To(Equal(5), "3 effects before the fork (restored), 2 after it, in the shadow")
		Expect(res.Effects.Duplicates).To(BeZero())

		after, err := h.History().Load(ctx, parent.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(after.Ledger).To(Equal(before.Ledger), "the real world's ledger is untouched by the shadow")
		shadow, err := h.History().Load(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(shadow.Record.Isolated).NotTo(BeNil())
		Expect(shadow.Record.Isolated.Parent).To(Equal(parent.RunID))
		Expect(shadow.Checkpoints[0].Seq).To(Equal(int64(1)))
		Expect(shadow.LastCheckpoint().Step).To(Equal(5))
		Expect(shadow.Attempts[0].Lessons).To(ConsistOf(HaveField("ID", "L9")))
		Expect(len(shadow.Ledger)).To(BeNumerically(">", int(at3.WorldSeq)), "the shadow world's ledger: the restored history, then the shadow's own effects")

		_, err = h.Isolated(ctx, harness.IsolatedRequest{Parent: res.RunID})
		Expect(err).To(MatchError(harness.ErrIsolated))
	}, SpecTimeout(3*time.Minute))
})

var _ = Describe("the fault sources of a run request", func() {
	It("do not combine", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		_, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults("kill@step:1"), RandomFaults: 2})
		Expect(err).To(MatchError(harness.ErrFaultSources))
		_, err = h.Run(ctx, harness.RunRequest{Scenario: deploy(), RandomFaults: 2, ReplayFaults: "x"})
		Expect(err).To(MatchError(harness.ErrFaultSources))
		runs, err := h.Runs()
		Expect(err).NotTo(HaveOccurred())
		Expect(runs).To(BeEmpty(), "nothing was recorded")
	})
})

var _ = Describe("a process fault at an effect's before phase", func() {
	It("ends the attempt before the world sees the effect; the next attempt's retry is its only execution", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), Faults: faults("kill@effect:3:before")})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Attempts).To(Equal(2))
		run, err := h.History().Load(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		third := run.Effects[2]
		Expect(third.Reconciled).To(BeTrue(), "its intent had no result when the next attempt retried it")
		Expect(third.Executions).To(Equal(1))
		Expect(third.Attempt).To(Equal(2), "the world executed it in the second attempt")
		n := 0
		for _, l := range run.Ledger {
			if l.Key == third.ID {
				n++
			}
		}
		Expect(n).To(Equal(1), "the world received it once")
	}, SpecTimeout(2*time.Minute))
})
