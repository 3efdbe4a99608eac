package suite_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/suite"
)

var _ = DescribeTable("the warm network namespaces a suite keeps",
	func(inflight, runs, want int) {
		Expect(suite.WarmHolders(inflight, runs)).To(Equal(want))
	},
	Entry("a serial suite: one, reused by every run", 1, 40, 1),
	Entry("32 runs after the first wave: one per run in flight", 8, 40, 8),
	Entry("24 after it: twelve, each used twice", 16, 40, 12),
	Entry("8 after it: four", 32, 40, 4),
	Entry("one wave: none, it would never be used", 40, 40, 0),
	Entry("one run after the first wave cannot repay one", 4, 5, 0),
	Entry("no runs", 0, 0, 0),
)
