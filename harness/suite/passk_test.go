package suite_test

import (
	"encoding/json"
	"math/big"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/suite"
)

var _ = Describe("pass^k and pass@k", func() {
	DescribeTable("are tau-bench's unbiased estimators, exactly",
		func(n, c, k int, passHat, passAt string) {
			Expect(suite.PassHatK(n, c, k).RatString()).To(Equal(passHat))
			Expect(suite.PassAtK(n, c, k).RatString()).To(Equal(passAt))
		},
		// C(c,k)/C(n,k) and 1 - C(n-c,k)/C(n,k)
		Entry("all pass", 5, 5, 3, "1", "1"),
		Entry("none pass", 5, 0, 1, "0", "0"),
		Entry("9 of 10, k=1: the pass rate", 10, 9, 1, "9/10", "9/10"),
		Entry("9 of 10, k=3: C(9,3)/C(10,3) = 84/120", 10, 9, 3, "7/10", "1"),
		Entry("3 of 5, k=2: C(3,2)/C(5,2) = 3/10; 1 - C(2,2)/C(5,2) = 9/10", 5, 3, 2, "3/10", "9/10"),
		Entry("3 of 5, k=4: fewer passes than k", 5, 3, 4, "0", "1"),
		Entry("k = n", 4, 3, 4, "0", "1"),
	)

	It("falls as k grows when any trial fails, and pass@k rises", func() {
		for k := 2; k <= 8; k++ {
			Expect(suite.PassHatK(8, 6, k).Cmp(suite.PassHatK(8, 6, k-1))).To(BeNumerically("<=", 0))
			Expect(suite.PassAtK(8, 6, k).Cmp(suite.PassAtK(8, 6, k-1))).To(BeNumerically(">=", 0))
		}
		Expect(suite.PassHatK(8, 6, 1).Cmp(big.NewRat(6, 8))).To(Equal(0))
	})

	It("writes k values as an object keyed by k in numeric order, and reads them back", func() {
		v := suite.KValues{1, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05}
		js, err := json.Marshal(v)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(js)).To(Equal(`{"1":1,"2":0.9,"3":0.8,"4":0.7,"5":0.6,"6":0.5,"7":0.4,"8":0.3,"9":0.2,"10":0.1,"11":0.05}`))
		var back suite.KValues
		Expect(json.Unmarshal(js, &back)).To(Succeed())
		Expect(back).To(Equal(v))
		Expect(json.Unmarshal([]byte(`{"1":1,"3":0.5}`), &back)).To(MatchError(ContainSubstring("skip 2")))
		Expect(json.Unmarshal([]byte(`{"x":1}`), &back)).To(HaveOccurred())
	})
})
