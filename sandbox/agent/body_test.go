package agent_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox/agent"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

var _ = Describe("a checkpoint's body", func() {
	seven := int64(7)
	var nilMap map[string]any
	DescribeTable("is what json.Marshal of protocol.PutCheckpoint gives",
		func(step int, state, claims any, expect *int64) {
			got, err := agent.CheckpointBody(step, state, claims, expect)
			Expect(err).NotTo(HaveOccurred())
			raw, err := json.Marshal(state)
			Expect(err).NotTo(HaveOccurred())
			req := protocol.PutCheckpoint{Step: step, State: raw, ExpectSeq: expect}
			if claims != nil {
				req.Claims, err = json.Marshal(claims)
				Expect(err).NotTo(HaveOccurred())
			}
			want, err := json.Marshal(req)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(got)).To(Equal(string(want)))
		},
		Entry("no state, no claims, no seq", 0, nil, nil, nil),
		Entry("state and expect_seq", 3, map[string]any{"b": 1, "a": "<x & y>"}, nil, &seven),
		Entry("claims, a list", 12, "s", []map[string]any{{"exists": map[string]string{"kind": "network", "name": "n"}}}, &seven),
		Entry("claims that encode as null", 1, []int{1, 2}, nilMap, nil),
	)

	It("says which part of which step could not be encoded", func() {
		_, err := agent.CheckpointBody(4, func() {}, nil, nil)
		Expect(err).To(MatchError(ContainSubstring("encode checkpoint state of step 4")))
		_, err = agent.CheckpointBody(4, 1, map[string]any{"c": make(chan int)}, nil)
		Expect(err).To(MatchError(ContainSubstring("encode checkpoint claims of step 4")))
	})
})
