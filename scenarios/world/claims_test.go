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

var _ = Describe("Claim.DecodeValue", func() {
	type args struct {
		Kind    string `json:"kind"`
		Name    string `json:"name"`
		Version int    `json:"version"`
	}
	decode := func(c world.Claim) (args, error) {
		var a args
		err := c.DecodeValue(world.StringField("kind", &a.Kind), world.StringField("name", &a.Name), world.IntField("version", &a.Version))
		return a, err
	}
	DescribeTable("reads a value as json.Unmarshal into a struct would, parsed or not",
		func(value string, ok bool) {
			var want args
			werr := json.Unmarshal([]byte(value), &want)
			claims, err := world.ParseClaims(json.RawMessage(`{"c":` + value + `}`))
			Expect(err).NotTo(HaveOccurred())
			for _, c := range []world.Claim{claims[0], {Name: "c", Value: json.RawMessage(value)}} {
				got, err := decode(c)
				if !ok {
					Expect(err).To(HaveOccurred(), value)
					continue
				}
				Expect(werr).NotTo(HaveOccurred())
				Expect(err).NotTo(HaveOccurred(), value)
				Expect(got).To(Equal(want), value)
			}
		},
		Entry("plain", `{"kind":"network","name":"n","version":3}`, true),
		Entry("spaces, other members, nested values", ` { "x" : [1,{"a":"}"}] , "kind" : "db" , "name" : "a,b" , "y": {"version": 9} } `, true),
		Entry("names in other cases", `{"KIND":"db","Name":"n"}`, true),
		Entry("escapes and non-ASCII", `{"kind":"d\"b\u00e9","name":"caf\u00e9 ü"}`, true),
		Entry("an escaped name", `{"n\u0061me":"x"}`, true),
		Entry("null members", `{"kind":null,"name":"x","version":null}`, true),
		Entry("a member written twice", `{"name":"a","name":"b"}`, true),
		Entry("an empty object", `{}`, true),
		Entry("a number for a string", `{"kind":3}`, false),
		Entry("a string for a number", `{"version":"3"}`, false),
		Entry("a fraction for an integer", `{"version":3.5}`, false),
		Entry("a list", `[{"kind":"db"}]`, false),
		Entry("a string", `"db"`, false),
	)

	It("refuses a value that is not JSON", func() {
		_, err := decode(world.Claim{Name: "c", Value: json.RawMessage(`{"kind":"db"`)})
		Expect(err).To(HaveOccurred())
	})
})
