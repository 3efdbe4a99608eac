package harness

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("how many standbys a run keeps ahead", func() {
	DescribeTable("two when an attempt-ending fault recurs, else one",
		func(want int, faults ...string) {
			lr := startLiveRunFaults(faults...)
			Expect(lr.r.standbysAhead()).To(Equal(want))
		},
		Entry("a kill every 8h", 2, "kill@every:8h"),
		Entry("restarts at a rate", 2, "netdrop@step:1/1h", "restart@rate:3/1d"),
		Entry("two kills at steps", 1, "kill@step:2", "kill@step:4"),
		Entry("a recurring fault that ends no attempt", 1, "netdrop@every:8h/1h", "kill@t:1h"),
	)
})
