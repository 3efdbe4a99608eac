package reflect

import (
	"encoding/json"
	"time"

	"github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/world"
)

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
