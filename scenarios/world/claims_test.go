package world_test

import (
	"encoding/json"
	"sort"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// reflectClaims reads claims the slow way — through maps — as ParseClaims
// did before its scanner: the reference it must agree with.
func reflectClaims(raw string) []world.Claim {
	var objs []map[string]json.RawMessage
	if raw[0] == '{' {
		var o map[string]json.RawMessage
		Expect(json.Unmarshal([]byte(raw), &o)).To(Succeed())
		objs = append(objs, o)
	} else {
		Expect(json.Unmarshal([]byte(raw), &objs)).To(Succeed())
	}
	var out []world.Claim
	for _, o := range objs {
		names := make([]string, 0, len(o))
		for n := range o {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			out = append(out, world.Claim{Name: n, Value: o[n]})
		}
	}
	return out
}

var _ = Describe("ParseClaims", func() {
	DescribeTable("splits claims as decoding them into maps would",
		func(raw string) {
			got, err := world.ParseClaims(json.RawMessage(raw))
			Expect(err).NotTo(HaveOccurred())
			want := reflectClaims(raw)
			Expect(got).To(HaveLen(len(want)))
			for i := range want {
				Expect(got[i].Name).To(Equal(want[i].Name))
				Expect(string(got[i].Value)).To(Equal(string(want[i].Value)), "claim %d", i)
			}
		},
		Entry("one object, members sorted", `{"migrated":{"database":"db","version":3},"exists":{"kind":"network","name":"n"}}`),
		Entry("a list of objects", `[{"exists":{"kind":"network","name":"a"}},{"exists":{"kind":"network","id":"net-1"}}]`),
		Entry("spaces everywhere", " [ { \"exists\" : { \"kind\" : \"dns\" , \"name\" : \"a}b\" } } , {\"n\" : 12 } ] "),
		Entry("scalars, nested lists, strings with escapes", `{"b":[1,[2,{"x":"\"]}"}]],"a":"q\"}","c":true,"d":null,"e":-1.5e3}`),
		Entry("an escaped name", `{"ex\u0069sts":{"kind":"db","name":"x"}}`),
		Entry("a name written twice keeps its last value", `{"a":1,"b":2,"a":3}`),
		Entry("empty objects and lists", `[{},{"a":{}},{"b":[]}]`),
	)

	It("reads null, nothing and an empty list as no claims", func() {
		for _, raw := range []string{"", " null ", "[]", "{}"} {
			Expect(world.ParseClaims(json.RawMessage(raw))).To(BeEmpty(), raw)
		}
	})

	DescribeTable("refuses what is not claims, saying why",
		func(raw, msg string) {
			_, err := world.ParseClaims(json.RawMessage(raw))
			Expect(err).To(MatchError(ContainSubstring(msg)))
		},
		Entry("not JSON", `{"a":`, "claims: unexpected end of JSON input"),
		Entry("a scalar", `3`, "want an object ({NAME: VALUE, ...}) or a list of them, not 3"),
		Entry("a list of scalars", `[{"a":1},5]`, "want a list of objects"),
		Entry("null in the list", `[{"a":1},null]`, "claims[1]: want an object {NAME: VALUE}, not null"),
		Entry("an empty name", `[{"a":1},{"":2}]`, "claims[1]: a claim needs a name"),
	)
})
