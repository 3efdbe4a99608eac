package reflect

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/httpworld"
)

// (ginkgo is not dot-imported here: its Report would clash with this
// package's.) These specs pin the deterministic diagnosis's rules that do not need a
// sandbox: the journal a failure rests on is built by hand.
var _ = ginkgo.Describe("the deterministic diagnosis", func() {
	start := harness.VirtualEpoch
	notReproduced := []history.ReplayRecord{{Verdict: "pass"}, {Verdict: "pass"}, {Verdict: "pass"}}
	refusedV2 := history.EffectRecord{ID: "k/step-4/0", Key: "step-4/0", Order: 4, Attempt: 1, Kind: "cloud.deploy_service", Status: protocol.StatusFailed,
		Error: &protocol.EffectError{Code: "unauthorized", Message: "api_key is required", Status: http.StatusUnauthorized}}
	versionEvent := world.LedgerEntry{Seq: 4, Kind: world.EventAPIVersion, Args: json.RawMessage(`{"version":"v2"}`), At: start.Add(time.Hour)}

	ginkgo.It("never calls a failure that rests on the gate's denial transient, though no replay can reproduce it", func() {
		run := &history.Run{Record: history.RunRecord{VirtualStart: start}, Effects: []history.EffectRecord{
			{ID: "k/step-4/0", Order: 4, Attempt: 1, Kind: "cloud.deploy_service", Status: protocol.StatusDone},
			{ID: "k/step-5/0", Order: 5, Attempt: 1, Kind: "cloud.set_dns", Status: protocol.StatusDenied,
				Error: &protocol.EffectError{Code: "denied", Message: "the gate's policy denies cloud.set_dns", Status: http.StatusForbidden}},
		}}
		d := diagnose(history.Trigger{Kind: harness.FailureDone, Attempt: 1, Step: 4, Detail: "step 5: the gate denied cloud.set_dns"}, run, notReproduced, nil, "")
		Expect(d.Class).To(Equal(ClassGateDenied))
		Expect(d.Detail).To(ContainSubstring("the gate denied cloud.set_dns (the gate's policy denies cloud.set_dns)"))
		Expect(skipReplays(d, 1, false)).NotTo(BeEmpty(), "an isolated re-run has no gate")
	})

	ginkgo.It("goes on judging by the replays when the denial is not what the attempt ended on", func() {
		run := &history.Run{Record: history.RunRecord{VirtualStart: start}, Effects: []history.EffectRecord{
			{ID: "k/step-5/0", Order: 5, Attempt: 1, Kind: "cloud.set_dns", Status: protocol.StatusDenied, Error: &protocol.EffectError{Code: "denied"}},
			{ID: "k/step-5/1", Order: 6, Attempt: 1, Kind: "cloud.set_dns", Status: protocol.StatusDone},
		}}
		d := diagnose(history.Trigger{Kind: harness.FailureDone, Attempt: 1}, run, notReproduced, nil, "")
		Expect(d.Class).To(Equal(ClassTransient))
	})

	ginkgo.It("skips the replays for remembered lessons only where the journal alone shows an API change before the refusal", func() {
		withEvent := &history.Run{Record: history.RunRecord{VirtualStart: start}, Effects: []history.EffectRecord{refusedV2},
			Ledger: []world.LedgerEntry{versionEvent, {Seq: 5, Key: refusedV2.ID, Kind: refusedV2.Kind}}}
		t := history.Trigger{Kind: harness.FailureEffectRefused, Attempt: 1, Step: 3, Effect: &refusedV2}
		d := diagnose(t, withEvent, nil, nil, "")
		Expect(d.Class).To(Equal(ClassAPIContract))
		Expect(skipReplays(d, 1, true)).To(ContainSubstring("the journal alone shows the diagnosis"))
		Expect(skipReplays(d, 1, false)).To(BeEmpty(), "with nothing remembered to verify first, the replays run")

		without := &history.Run{Record: history.RunRecord{VirtualStart: start}, Effects: []history.EffectRecord{refusedV2},
			Ledger: []world.LedgerEntry{{Seq: 5, Key: refusedV2.ID, Kind: refusedV2.Kind}}}
		d = diagnose(t, without, nil, nil, "")
		Expect(d.Class).To(Equal(ClassAgentLogic), "from the journal alone: the agent's own request")
		Expect(skipReplays(d, 1, true)).To(BeEmpty(), "whether it is transient is the replays' to say")
		for _, class := range []string{ClassTransient, ClassAgentLogic, ClassCrashRecovery, ClassBudget} {
			Expect(skipReplays(history.Diagnosis{Class: class}, 1, true)).To(BeEmpty(), class)
		}
	})
})

var _ = ginkgo.Describe("the diagnosis of an API change", func() {
	ginkgo.It("says when the API changed as every report writes a virtual instant (+3d11h43m), not as a Go duration", func() {
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		refused := history.EffectRecord{ID: "k/step-4/0", Kind: "cloud.deploy_service", Attempt: 1, Status: protocol.StatusFailed, Executions: 1,
			Error: &protocol.EffectError{Code: "unauthorized", Message: "api_key is required", Status: 401}}
		run := &history.Run{Record: history.RunRecord{ID: "r", VirtualStart: start},
			Effects: []history.EffectRecord{refused},
			Ledger: []world.LedgerEntry{
				{Seq: 1, Kind: world.EventAPIVersion, Args: json.RawMessage(`{"version":"v2"}`), At: start.Add(83*time.Hour + 43*time.Minute)},
				{Seq: 2, Key: refused.ID, Kind: refused.Kind, At: start.Add(84 * time.Hour)},
			}}
		d := diagnose(history.Trigger{Kind: "effect_refused", Attempt: 1, Step: 3, Effect: &refused}, run, nil, nil, "")
		Expect(d.Class).To(Equal(ClassAPIContract))
		Expect(d.Detail).To(Equal("the world's API changed to v2 (at +3d11h43m virtual) before cloud.deploy_service, which it refused: api_key is required (unauthorized)"))
	})
})

var _ = ginkgo.Describe("the diagnosis of a world event other than an API change", func() {
	ginkgo.It("names a dependency update before the refusal, its kind and arguments, with a class and a lesson of its own", func() {
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		refused := history.EffectRecord{ID: "k/step-2/2", Kind: "fleet.apply_candidate", Attempt: 1, Status: protocol.StatusFailed, Executions: 1,
			Error: &protocol.EffectError{Code: "stale_candidate", Message: "candidate api-warn is stale: api's configuration changed since it was proposed", Status: 409}}
		update := world.LedgerEntry{Seq: 3, Kind: "world.dep_update", Args: json.RawMessage(`{"library":"logkit","from":"1.8.2","to":"2.0.0"}`), At: start.Add(26 * time.Hour)}
		run := &history.Run{Record: history.RunRecord{ID: "r", VirtualStart: start},
			Effects: []history.EffectRecord{refused},
			Ledger:  []world.LedgerEntry{update, {Seq: 4, Key: refused.ID, Kind: refused.Kind, At: start.Add(27 * time.Hour)}}}
		t := history.Trigger{Kind: harness.FailureEffectRefused, Attempt: 1, Step: 2, Effect: &refused}
		d := diagnose(t, run, nil, nil, "")
		Expect(d.Class).To(Equal(ClassWorldChange))
		Expect(d.Detail).To(Equal(`the world changed under the agent: dep_update {"library":"logkit","from":"1.8.2","to":"2.0.0"} (at +1d2h virtual) before fleet.apply_candidate, which it refused: candidate api-warn is stale: api's configuration changed since it was proposed (stale_candidate)`))
		Expect(string(d.Evidence)).To(ContainSubstring(`"world_event":{"args":{"library":"logkit","from":"1.8.2","to":"2.0.0"},"kind":"world.dep_update"}`))
		Expect(deterministicLesson(d)).To(HavePrefix(`The world changed under you (dep_update {"library":"logkit","from":"1.8.2","to":"2.0.0"}): fleet.apply_candidate is refused with stale_candidate.`))
		Expect(skipReplays(d, 1, true)).To(ContainSubstring("the journal alone shows the diagnosis"))

		// After the refusal, the update is no cause of it: the agent's own
		// request; nor is a goal's probe, which only reads the world.
		probe := world.LedgerEntry{Seq: 2, Kind: httpworld.EventProbe, Args: json.RawMessage(`{"route":"GET /v1/orders"}`), At: start.Add(time.Hour)}
		run.Ledger = []world.LedgerEntry{probe, run.Ledger[1], update}
		Expect(diagnose(t, run, nil, nil, "").Class).To(Equal(ClassAgentLogic))
		// The latest event before the refusal is the one named: here an API change.
		version := world.LedgerEntry{Seq: 2, Kind: world.EventAPIVersion, Args: json.RawMessage(`{"version":"v2"}`), At: start.Add(time.Hour)}
		run.Ledger = []world.LedgerEntry{update, version, run.Ledger[1]}
		Expect(diagnose(t, run, nil, nil, "").Class).To(Equal(ClassAPIContract))
	})
})

var _ = ginkgo.Describe("the diagnosis of poisoned state", func() {
	ginkgo.It("has its own class, from the poisoned checkpoint or from state-consistent", func() {
		d := diagnose(history.Trigger{Kind: harness.FailurePoisoned, Attempt: 1, Step: 3,
			Detail: `checkpoint 3 (step 3) is poisoned: the world contradicts migrated {"database":"prod-db","version":3}`}, nil, nil, nil, "")
		Expect(d.Class).To(Equal(ClassPoisonedState))
		Expect(d.Detail).To(ContainSubstring("the agent recorded as done what the world does not show: checkpoint 3"))
		d = diagnose(history.Trigger{Kind: harness.FailureInvariant, Invariant: "state-consistent", Attempt: 2, Detail: "attempt 2 resumed from state built on poisoned checkpoint 3"}, nil, nil, nil, "")
		Expect(d.Class).To(Equal(ClassPoisonedState))
	})
})
