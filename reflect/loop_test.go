package reflect_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/reflect"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/cloud"
)

// realLedgerHoldsOnlyTheRun checks that the real world received exactly the
// requests of the real run's own effects: nothing of its shadows.
func realLedgerHoldsOnlyTheRun(ctx context.Context, h *harness.Harness, runID string) *history.Run {
	GinkgoHelper()
	run, err := h.History().Load(ctx, runID)
	Expect(err).NotTo(HaveOccurred())
	executed := 0
	for _, e := range run.Effects {
		executed += e.Executions
	}
	requests := 0
	mine := map[string]bool{}
	for _, e := range run.Effects {
		mine[e.ID] = true
	}
	for _, l := range run.Ledger {
		if l.IsEvent() {
			continue
		}
		requests++
		Expect(mine).To(HaveKey(l.Key), "the real world's ledger holds a request the real run never sent")
	}
	Expect(requests).To(Equal(executed), "every request the real world received is one of the real run's executions")
	return run
}

var _ = Describe("the reflection loop on deploy-v2", func() {
	It("replays the failure in isolation, diagnoses it, verifies a lesson, and the next attempt passes with it", func(ctx SpecContext) {
		h := open(ctx)
		seed := int64(3)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deployV2(), Seed: &seed})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Attempts).To(Equal(2))
		Expect(res.Reflections).To(HaveLen(1), "exactly one reflection")
		r := res.Reflections[0]
		Expect(r.Decision).To(Equal(history.DecisionVerify))
		Expect(r.Reproduced).To(Equal(history.Reproduced{Runs: 3, Failed: 3}), "deterministic")
		Expect(r.Diagnosis.Class).To(Equal(reflect.ClassAPIContract))
		Expect(string(r.Diagnosis.Evidence)).To(ContainSubstring(`"code":"unauthorized"`))
		Expect(r.Counterfactual.Reproduced).To(BeFalse(), "without the run's faults the failure does not happen")
		Expect(r.Lesson.Text).To(ContainSubstring("v2"), "the scripted model wrote it")
		Expect(r.Verification.Verdict).To(Equal(harness.VerdictPass))
		Expect(r.LLM.Calls).To(Equal(1), "the reflection's own model call, apart from the agent's")
		Expect(res.Gate.Released).To(BeNumerically(">", 0), "guarded effects passed on the strength of the verification")
		Expect(res.Gate.Denied).To(BeZero())

		run := realLedgerHoldsOnlyTheRun(ctx, h, res.RunID)
		Expect(run.Attempts[1].Lessons).To(ConsistOf(HaveField("ID", r.Lesson.ID)), "the next attempt was handed the lesson")
		Expect(run.Attempts[0].Lessons).To(BeEmpty())
		Expect(run.Events).To(ContainElement(HaveField("Type", "lesson.used")), "the agent said it used it")
		refls, err := h.History().Reflections(res.RunID)
		Expect(err).NotTo(HaveOccurred())
		for _, id := range append([]string{refls[0].Counterfactual.RunID, refls[0].Verification.RunID}, replayIDs(refls[0])...) {
			shadow, err := h.History().Load(ctx, id)
			Expect(err).NotTo(HaveOccurred())
			Expect(shadow.Record.Isolated.Parent).To(Equal(res.RunID))
		}
		lessons, err := h.History().Lessons("deploy-v2", "")
		Expect(err).NotTo(HaveOccurred())
		Expect(lessons).To(ConsistOf(HaveField("Lesson.ID", r.Lesson.ID)), "kept in memory for the scenario and agent")
	}, SpecTimeout(4*time.Minute))

	It("keeps the gate shut for an agent that ignores the lesson: nothing more of the guarded kinds reaches the world", func(ctx SpecContext) {
		h := open(ctx)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deployV2(), Agent: "unteachable"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictFail))
		Expect(res.Reason).To(HavePrefix("reflection r1 gave up: verification failed"))
		Expect(res.Reflections).To(HaveLen(1))
		Expect(res.Gate.Held).To(Equal(1), "its blind retry waited at the gate while the reflection decided")
		Expect(res.Gate.Denied).To(BeNumerically(">=", 1))
		run := realLedgerHoldsOnlyTheRun(ctx, h, res.RunID)
		deploys := 0
		for _, l := range run.Ledger {
			if l.Kind == cloud.KindDeployService {
				deploys++
			}
		}
		Expect(deploys).To(Equal(1), "only the first, refused deploy ever reached the world")
	}, SpecTimeout(4*time.Minute))

	It("fails a wrong lesson in verification, and passes the right one", func(ctx SpecContext) {
		h := open(ctx)
		// Without reflection the agent gives up at step 4, where the world
		// moved to v2: the state the next attempt would stand on.
		scen := deployV2("reflect: {replays: 3, max: 2}\n", "", "policy: verify}", "policy: allow}", "policy: verify}", "policy: allow}")
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Outcome).To(Equal(protocol.OutcomeFailure))
		wrong := history.Lesson{ID: "wrong", Class: reflect.ClassTransient, Text: "retry later", Evidence: json.RawMessage(`{}`)}
		v, err := reflect.Verify(ctx, h, res.RunID, wrong, "a wrong lesson")
		Expect(err).NotTo(HaveOccurred())
		Expect(v.Verdict).To(Equal(harness.VerdictFail), v.Reason)
		right := history.Lesson{ID: "right", Class: reflect.ClassAPIContract, Text: "correct from the refusals", Evidence: json.RawMessage(`{}`)}
		v, err = reflect.Verify(ctx, h, res.RunID, right, "the right lesson")
		Expect(err).NotTo(HaveOccurred())
		Expect(v.Verdict).To(Equal(harness.VerdictPass), v.Reason)
		realLedgerHoldsOnlyTheRun(ctx, h, res.RunID)
	}, SpecTimeout(4*time.Minute))

	It("names the first request a replay sent otherwise than the recording", func(ctx SpecContext) {
		h := open(ctx)
		scen := deployV2("args: [--give-up]\n", "args: [--give-up, --random-network-name]\n")
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, MaxAttempts: 2})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Reflections).NotTo(BeEmpty())
		Expect(res.Reflections[0].Divergence).To(MatchRegexp(`replay 1: effect 1 of attempt 1: recorded cloud.create_network \{"name":"prod-net-[0-9a-f]{8}"\} -> done, re-run cloud.create_network \{"name":"prod-net-[0-9a-f]{8}"\}`))
		Expect(res.Reflections[0].Reproduced.Failed).To(Equal(3), "it diverged, and the failure came back all the same")
	}, SpecTimeout(4*time.Minute))

	It("tells a flaky failure from a deterministic one", func(ctx SpecContext) {
		h := open(ctx)
		// Without the API change, the flaky agent fails only when its coin
		// makes it send a bad step 4. The real attempt must fail for a
		// reflection to open (a coin: 1 in 2), and 8 replays all alike is a
		// chance of 1 in 128: tried up to 16 times (6 tries all without a
		// reflection, 1 in 64, was seen in CI), stopping at the first.
		scen := deployV2("args: [--give-up]\n", "args: [--give-up, --flaky]\n", "replays: 3", "replays: 8")
		for try := 0; try < 16; try++ {
			res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, MaxAttempts: 1, Faults: []chaos.Spec{}})
			Expect(err).NotTo(HaveOccurred())
			if len(res.Reflections) == 0 {
				continue // this time the real attempt adapted
			}
			r := res.Reflections[0]
			if r.Reproduced.Failed == 0 || r.Reproduced.Failed == r.Reproduced.Runs {
				continue
			}
			Expect(r.Diagnosis.Detail).To(ContainSubstring("flaky"))
			rep, err := reflect.Load(ctx, h, res.RunID)
			Expect(err).NotTo(HaveOccurred())
			var md stringsBuilder
			Expect(rep.WriteMarkdown(&md)).To(Succeed())
			Expect(md.String()).To(ContainSubstring("(flaky)"))
			return
		}
		Fail("no try gave a flaky reflection in 16 runs")
	}, SpecTimeout(8*time.Minute))

	It("redoes a verification that went stale: the real world changed before the next attempt started", func(ctx SpecContext) {
		h := open(ctx)
		// Attempt 1 is stopped right after the refusal, down for 2h of
		// virtual time; during the down window the API moves back to v1 —
		// after the verification copied the v2 world, where it passed.
		faults := []chaos.Spec{spec("api-version:v2@step:3"), spec("stop:1s@effect:4:after/2h"), spec("api-version:v1@t:1h")}
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deployV2(), Faults: faults})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Reflections).To(HaveLen(1))
		r := res.Reflections[0]
		v := r.Verification
		Expect(v.Stale).To(BeTrue(), "the verification was bound to the v2 world it copied")
		Expect(v.Redone).To(Equal(1))
		// On the v1 world the lesson no longer holds: the world's recorded
		// refusal of step 4 stands, and v1 issues no API keys. The redone
		// verification says so before any real attempt acts on it.
		Expect(v.Verdict).To(Equal(harness.VerdictFail))
		Expect(r.Decision).To(Equal(history.DecisionGaveUp))
		Expect(r.Reason).To(HavePrefix("verification failed once redone on the changed world"))
		Expect(res.Verdict).To(Equal(harness.VerdictFail))
		refls, err := h.History().Reflections(res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(refls[0].Verification.WorldSeq).To(BeNumerically(">", 0))
	}, SpecTimeout(4*time.Minute))
})

func spec(text string) chaos.Spec {
	s, err := chaos.ParseSpec(text)
	Expect(err).NotTo(HaveOccurred())
	return s
}

func replayIDs(r history.ReflectionRecord) []string {
	var ids []string
	for _, rp := range r.Replays {
		ids = append(ids, rp.RunID)
	}
	return ids
}

// stringsBuilder is an io.Writer collecting a report.
type stringsBuilder struct{ b []byte }

func (s *stringsBuilder) Write(p []byte) (int, error) { s.b = append(s.b, p...); return len(p), nil }
func (s *stringsBuilder) String() string              { return string(s.b) }

var _ = Describe("the reflection loop on a crash loop", func() {
	fragile := func() *scenarios.Scenario {
		s, err := scenarios.Load(filepath.Join("testdata", "deploy-fragile.yaml"))
		Expect(err).NotTo(HaveOccurred())
		return s
	}

	It("reflects instead of ending the run, verifies a crash-recovery lesson, and renews the attempts", func(ctx SpecContext) {
		h := open(ctx)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: fragile()})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Attempts).To(Equal(4), "three attempts (the killed one and two dying resumes), then the renewed one")
		Expect(res.Reflections).To(HaveLen(1))
		r := res.Reflections[0]
		Expect(r.Trigger).To(HavePrefix(harness.FailureCrashLoop))
		Expect(r.Reproduced).To(Equal(history.Reproduced{Runs: 2, Failed: 2}))
		Expect(r.Counterfactual.Reproduced).To(BeTrue(), "it dies without the run's faults too")
		Expect(r.Diagnosis.Class).To(Equal(reflect.ClassCrashRecovery))
		Expect(r.Diagnosis.Detail).To(ContainSubstring("2 attempts in a row resumed from the checkpoint at step 2"))
		Expect(string(r.Diagnosis.Evidence)).To(ContainSubstring(`unknown field`), "what the agent said as it died")
		Expect(r.Verification.Verdict).To(Equal(harness.VerdictPass), r.Verification.Reason)
		Expect(r.Decision).To(Equal(history.DecisionVerify))

		refls, err := h.History().Reflections(res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(refls[0].Trigger.Attempt).To(Equal(3), "the last attempt of the loop is replayed")
		run := realLedgerHoldsOnlyTheRun(ctx, h, res.RunID)
		Expect(run.Attempts[3].Renewed).To(BeTrue(), "the fourth attempt counts max_attempts afresh")
		Expect(run.Attempts[3].Lessons).To(ConsistOf(HaveField("ID", r.Lesson.ID)))
		for _, a := range run.Attempts[:3] {
			Expect(a.Renewed).To(BeFalse())
		}
		Expect(run.Events).To(ContainElement(HaveField("Type", "lesson.used")))
	}, SpecTimeout(4*time.Minute))

	It("ends the run in the crash loop when the lesson fails verification", func(ctx SpecContext) {
		h := open(ctx)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: fragile(), Agent: "unteachable"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictFail))
		Expect(res.Attempts).To(Equal(3), "no attempt after the crash loop")
		Expect(res.Reason).To(HavePrefix("crash loop: 3 attempts ended without the agent reporting done"))
		Expect(res.Reason).To(ContainSubstring("reflection r1 gave up: verification failed"))
		Expect(res.Reflections).To(HaveLen(1))
		Expect(res.Reflections[0].Decision).To(Equal(history.DecisionGaveUp))
		realLedgerHoldsOnlyTheRun(ctx, h, res.RunID)
	}, SpecTimeout(4*time.Minute))
})

// isolatedOf counts the isolated re-runs (replays, counterfactuals,
// verifications) of run parent in the state dir.
func isolatedOf(h *harness.Harness, parent string) int {
	GinkgoHelper()
	runs, err := h.History().Runs()
	Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, r := range runs {
		if r.Isolated != nil && r.Isolated.Parent == parent {
			n++
		}
	}
	return n
}

var _ = Describe("remembered lessons", func() {
	It("are verified first when a reflection opens, and release the held call in the attempt that holds them", func(ctx SpecContext) {
		h := open(ctx)
		seed := int64(3)
		first, err := h.Run(ctx, harness.RunRequest{Scenario: deployV2(), Seed: &seed})
		Expect(err).NotTo(HaveOccurred())
		Expect(first.Verdict).To(Equal(harness.VerdictPass), first.Reason)
		Expect(first.Attempts).To(Equal(2), "nothing remembered yet: the lesson is drawn and handed to attempt 2")
		learned := first.Reflections[0].Lesson.ID

		res, err := h.Run(ctx, harness.RunRequest{Scenario: deployV2(), Seed: &seed})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Attempts).To(Equal(1), "the attempt handed the remembered lesson finishes the deployment itself")
		Expect(res.Gate.Denied).To(BeZero(), "the attempt holds the lesson: nothing of it is denied")
		Expect(res.Gate.Released).To(BeNumerically(">", 0))
		Expect(res.Reflections).To(HaveLen(1))
		r := res.Reflections[0]
		Expect(r.Decision).To(Equal(history.DecisionVerify), r.Reason)
		Expect(r.Lesson.ID).To(Equal(learned), "the remembered lesson, by its memory id — no new one drawn")
		Expect(r.Lesson.FromMemory).To(BeTrue())
		Expect(r.Remembered).To(Equal([]history.LessonTry{{ID: learned, Verdict: harness.VerdictPass}}))
		Expect(r.Diagnosis.Class).To(Equal(reflect.ClassAPIContract))
		Expect(r.ReplaysSkipped).To(ContainSubstring("the journal alone shows the diagnosis"), "an API change in the ledger before the refusal")
		Expect(r.Reproduced.Runs).To(BeZero())
		Expect(isolatedOf(h, res.RunID)).To(Equal(1), "one isolated run: the remembered lesson's verification")

		run := realLedgerHoldsOnlyTheRun(ctx, h, res.RunID)
		Expect(run.Attempts[0].Lessons).To(ContainElement(HaveField("ID", learned)))
		lessons, err := h.History().Lessons("deploy-v2", "")
		Expect(err).NotTo(HaveOccurred())
		Expect(lessons).To(HaveLen(1), "nothing new to remember")
		Expect(lessons[0].Verifications).To(HaveLen(2))
		Expect(lessons[0].Verifications[1]).To(Equal(history.LessonOutcome{Run: res.RunID, Reflection: "r1", Verdict: harness.VerdictPass}))
	}, SpecTimeout(4*time.Minute))

	It("do not skip the replays when the journal alone does not show the diagnosis", func(ctx SpecContext) {
		h := open(ctx)
		seed := int64(3)
		first, err := h.Run(ctx, harness.RunRequest{Scenario: deployV2(), Seed: &seed})
		Expect(err).NotTo(HaveOccurred())
		Expect(first.Verdict).To(Equal(harness.VerdictPass), first.Reason)
		// No API change this time: the world refuses the service's name,
		// the agent's own mistake, which only the replays can tell from a
		// transient failure.
		scen := deployV2("faults: [api-version:v2@step:3]", "faults: []", "    name: api\n", "    name: Bad_Name\n")
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, Seed: &seed, MaxAttempts: 1})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictFail))
		run, err := h.History().Load(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(run.Attempts[0].Lessons).To(ContainElement(HaveField("ID", first.Reflections[0].Lesson.ID)), "the attempt held the remembered lesson")
		Expect(res.Reflections).NotTo(BeEmpty())
		r := res.Reflections[0]
		Expect(r.ReplaysSkipped).To(BeEmpty())
		Expect(r.Reproduced.Runs).To(Equal(3), "the replays ran")
		Expect(r.Diagnosis.Class).To(Equal(reflect.ClassAgentLogic))
		Expect(r.Remembered).To(BeEmpty(), "the remembered lesson is about an API change, not this failure")
		Expect(r.Lesson.FromMemory).To(BeFalse())
	}, SpecTimeout(4*time.Minute))
})

var _ = Describe("the gate's denials", func() {
	It("do not open a second reflection when an agent not handed the verified lesson reports failure on its denial", func(ctx SpecContext) {
		h := open(ctx)
		// The deployer without --give-up corrects its requests by itself:
		// its corrected call reaches the gate while the reflection decides,
		// and is denied — attempt 1 was not handed the lesson the
		// reflection verified. It reports failure on that denial; the next
		// attempt starts with the lesson.
		scen := deployV2("args: [--give-up]\n", "args: []\n")
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, Extras: map[string]string{reflect.ExtraLessons: reflect.LessonsNone}})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Gate.Denied).To(Equal(1), "attempt 1's corrected call")
		Expect(res.Reflections).To(HaveLen(1), "its giving up on the denial is no new failure to learn from")
		Expect(res.Attempts).To(Equal(2))
		run, err := h.History().Load(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(run.Events).To(ContainElement(SatisfyAll(HaveField("Type", "harness.reopen"), HaveField("Message", ContainSubstring("failure in attempt 1")))),
			"attempt 1 reported failure; the claim was taken back for the attempt with the lesson")
		logs, err := h.History().Logs(res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(logs[0].Stdout).To(ContainSubstring("denied by the gate; reporting failure"))
		Expect(run.Attempts[1].Lessons).To(ContainElement(HaveField("ID", res.Reflections[0].Lesson.ID)))
	}, SpecTimeout(4*time.Minute))

	It("are never diagnosed as the infrastructure's failure", func(ctx SpecContext) {
		h := open(ctx)
		scen := deployV2(`{kinds: "cloud.set_dns", policy: verify}`, `{kinds: "cloud.set_dns", policy: deny}`)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, Faults: []chaos.Spec{}, Extras: map[string]string{reflect.ExtraLessons: reflect.LessonsNone}})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictFail))
		Expect(res.Outcome).To(Equal(protocol.OutcomeFailure), "the agent reported failure on the denial")
		Expect(res.Reflections).To(HaveLen(1))
		r := res.Reflections[0]
		Expect(r.Diagnosis.Class).To(Equal(reflect.ClassGateDenied))
		Expect(r.Diagnosis.Detail).To(ContainSubstring("the gate denied cloud.set_dns"))
		Expect(r.ReplaysSkipped).To(ContainSubstring("gate"), "an isolated re-run has no gate: replaying would only fail to reproduce it")
		Expect(r.Decision).To(Equal(history.DecisionGaveUp))
		Expect(res.Reason).To(ContainSubstring("the gate"))
		Expect(isolatedOf(h, res.RunID)).To(BeZero())
	}, SpecTimeout(4*time.Minute))
})
