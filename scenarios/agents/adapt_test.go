package agents

import (
	"context"
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/cloud"
)

// The agents run against the real gateway, engine and world in the
// harness's end-to-end specs; these are unit tests of their logic.
var _ = Describe("what an agent learns of the world's API", func() {
	refusal := func(code, details string) *protocol.EffectError {
		return &protocol.EffectError{Code: code, Status: 400, Details: json.RawMessage(details)}
	}

	DescribeTable("reads a correction from the world's error details",
		func(code, details string, want correction) {
			got, err := fromDetails(context.Background(), cloud.KindCreateSnapshot, nil, refusal(code, details))
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(Equal(want))
		},
		Entry("renamed", cloud.CodeFieldRenamed, `{"renamed":{"database_id":"db_id"}}`, correction{Rename: map[string]string{"database_id": "db_id"}}),
		Entry("missing", cloud.CodeMissingField, `{"required":["retention_days"],"example":{"retention_days":7}}`, correction{Add: map[string]any{"retention_days": 7.0}}),
		Entry("gone", cloud.CodeGone, `{"replacement":"cloud.list_resources"}`, correction{UseKind: "cloud.list_resources"}),
		Entry("unauthorized", cloud.CodeUnauthorized, `{"obtain":"cloud.issue_api_key","field":"api_key"}`, correction{Obtain: "cloud.issue_api_key", Field: "api_key"}),
		Entry("nothing to learn", "invalid_argument", `{}`, correction{}),
	)

	It("rewrites a request by all it learned, and nothing when it learned nothing", func() {
		var k apiKnowledge
		kind, args := k.apply(cloud.KindCreateSnapshot, map[string]any{"database_id": "db-1", "name": "daily-1"})
		Expect(kind).To(Equal(cloud.KindCreateSnapshot))
		Expect(args).To(Equal(map[string]any{"database_id": "db-1", "name": "daily-1"}))
		Expect(k.empty()).To(BeTrue())

		k = apiKnowledge{
			Renamed:  map[string]string{"database_id": "db_id"},
			Extra:    map[string]map[string]any{cloud.KindCreateSnapshot: {"retention_days": 7}},
			Replaced: map[string]string{cloud.KindList: cloud.KindListResources},
			Key:      "key-1", KeyField: "api_key",
		}
		kind, args = k.apply(cloud.KindCreateSnapshot, map[string]any{"database_id": "db-1", "name": "daily-1"})
		Expect(kind).To(Equal(cloud.KindCreateSnapshot))
		Expect(args).To(Equal(map[string]any{"db_id": "db-1", "name": "daily-1", "retention_days": 7, "api_key": "key-1"}))
		kind, _ = k.apply(cloud.KindList, map[string]any{"kind": "snapshot"})
		Expect(kind).To(Equal(cloud.KindListResources))
		Expect(k.empty()).To(BeFalse())
	})

	It("plans the five steps of a deployment, in order, without a model", func() {
		var task DeployTask
		Expect(json.Unmarshal([]byte(`{"network":"n","database":"d","migration":3,"service":{"name":"s","image":"i"},"dns":"s.example.com"}`), &task)).To(Succeed())
		plan := builtinPlan(task)
		var names []string
		for _, s := range plan {
			names = append(names, s.Tool)
		}
		Expect(names).To(Equal(deploySteps5))
		Expect(plan[2].Args["version"]).To(Equal(3))
	})
})
