package cloud_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// described is the cloud world's definition with its error examples
// answered.
func described() world.Definition {
	GinkgoHelper()
	d, err := cloud.Definition().Describe(context.Background())
	Expect(err).NotTo(HaveOccurred())
	return d
}

// errorOf returns the description of code in version v.
func errorOf(d world.Definition, version, code string) world.ErrorInfo {
	GinkgoHelper()
	for _, v := range d.Versions {
		if v.Name != version {
			continue
		}
		for _, e := range v.Errors {
			if e.Code == code {
				return e
			}
		}
	}
	Fail(fmt.Sprintf("API %s describes no error %s", version, code))
	return world.ErrorInfo{}
}

var _ = Describe("the cloud world's description of its errors", func() {
	It("gives, per API version, each error code with its details' shape and an example the world answered", func() {
		d := described()
		var codes [2][]string
		for i, v := range d.Versions {
			for _, e := range v.Errors {
				codes[i] = append(codes[i], e.Code)
				Expect(e.Example.Error).NotTo(BeNil(), "%s %s", v.Name, e.Code)
				Expect(e.Example.Error.Code).To(Equal(e.Code))
				Expect(e.Example.Error.Status).To(Equal(e.Status))
			}
		}
		Expect(codes[0]).To(Equal([]string{"unknown_kind", "invalid_argument", "not_found"}))
		Expect(codes[1]).To(Equal([]string{"gone", "unknown_kind", "unauthorized", "field_renamed", "missing_field", "invalid_argument", "not_found"}))

		for code, details := range map[string]string{
			"gone":          `{"replacement": "cloud.list_resources"}`,
			"unauthorized":  `{"obtain": "cloud.issue_api_key", "field": "api_key"}`,
			"field_renamed": `{"renamed": {"database_id": "db_id"}}`,
			"missing_field": `{"required": ["retention_days"], "example": {"retention_days": 7}}`,
		} {
			Expect(string(errorOf(d, "v2", code).Example.Error.Details)).To(MatchJSON(details), code)
		}
		Expect(errorOf(d, "v2", "unauthorized").DetailsShape()).To(Equal(`{"obtain": string, "field": string}`))
		Expect(errorOf(d, "v2", "missing_field").DetailsShape()).To(Equal(`{"required": array, "example": object}`))
		Expect(errorOf(d, "v1", "not_found").Example.Error.Details).To(BeEmpty())
		Expect(cloud.Definition().Versions[1].Errors[0].Example.Error).To(BeNil(), "Describe answers a copy; the definition stays as written")
	})

	It("gives as each example's error exactly what the world answers that request in a run, on a durable store", func() {
		for vi, v := range described().Versions {
			for i, e := range v.Errors {
				j, w := open(GinkgoT().TempDir())
				if vi > 0 {
					_, err := versioned(w).SetAPIVersion(context.Background(), v.Name, now)
					Expect(err).NotTo(HaveOccurred())
				}
				for s, c := range e.Example.Setup {
					result(do(w, fmt.Sprintf("setup-%d", s), c.Kind, c.Args))
				}
				got := do(w, fmt.Sprintf("step-%d/0", i), e.Example.Request.Kind, e.Example.Request.Args)
				Expect(got.Status).To(Equal("failed"), "%s %s", v.Name, e.Code)
				Expect(got.Error).To(Equal(e.Example.Error), "%s %s: the description shows what the world answers", v.Name, e.Code)
				Expect(j.Close()).To(Succeed())
			}
		}
	})

	It("lists as an error's kinds exactly the v2 kinds that answer it", func() {
		d := described()
		j, w := open(GinkgoT().TempDir())
		DeferCleanup(func() { _ = j.Close() })
		_, err := versioned(w).SetAPIVersion(context.Background(), "v2", now)
		Expect(err).NotTo(HaveOccurred())
		key := result(do(w, "key", cloud.KindIssueAPIKey, map[string]any{}))["api_key"]
		var kinds []string
		for _, v := range d.Versions {
			for _, k := range v.Kinds {
				if !slices.Contains(kinds, k.Name) {
					kinds = append(kinds, k.Name)
				}
			}
		}
		// Each error, with arguments that draw it from any kind it applies to.
		for code, args := range map[string]map[string]any{
			"gone":          {"kind": "network"},
			"unauthorized":  {},
			"field_renamed": {"database_id": "db-1", "api_key": key},
			"missing_field": {"db_id": "db-1", "name": "daily-1", "api_key": key},
		} {
			listed := errorOf(d, "v2", code).Kinds
			Expect(listed).NotTo(BeEmpty())
			for n, kind := range kinds {
				got := do(w, fmt.Sprintf("%s-%d", code, n), kind, args)
				answers := got.Error != nil && got.Error.Code == code
				Expect(answers).To(Equal(slices.Contains(listed, kind)), "%s %v: %+v (listed: %v)", kind, args, got.Error, listed)
			}
		}
	})

	It("gives examples that succeed in order on a fresh world, one of each kind v1 offers, and refuses one that fails", func() {
		d := cloud.Definition()
		var kinds []string
		for _, c := range d.Examples {
			kinds = append(kinds, c.Kind)
		}
		var v1 []string
		for _, k := range d.Versions[0].Kinds {
			v1 = append(v1, k.Name)
		}
		Expect(kinds).To(ConsistOf(v1))
		_, err := d.Describe(context.Background())
		Expect(err).NotTo(HaveOccurred())

		d.Examples = slices.Clone(d.Examples)
		d.Examples[0], d.Examples[1] = d.Examples[1], d.Examples[0] // the database before its network
		_, err = d.Describe(context.Background())
		Expect(err).To(MatchError(world.ErrDescription))
		Expect(err.Error()).To(ContainSubstring(`example 1, cloud.create_database {"name":"prod-db","network_id":"net-1"}, answered failed (not_found: network "net-1" does not exist)`))
	})

	DescribeTable("refuses a description that differs from what the world answers, naming what differs",
		func(change func(e *world.ErrorInfo), want string) {
			d := cloud.Definition()
			errs := slices.Clone(d.Versions[1].Errors)
			i := slices.IndexFunc(errs, func(e world.ErrorInfo) bool { return e.Code == "unauthorized" })
			change(&errs[i])
			d.Versions = slices.Clone(d.Versions)
			d.Versions[1].Errors = errs
			_, err := d.Describe(context.Background())
			Expect(err).To(MatchError(world.ErrDescription))
			Expect(err.Error()).To(HavePrefix("world cloud, API v2, error "))
			Expect(err.Error()).To(ContainSubstring(want))
		},
		Entry("another status", func(e *world.ErrorInfo) { e.Status = 403 },
			"the example cloud.create_network {\"name\":\"prod-net\"} drew unauthorized 401"),
		Entry("a details field the world does not answer", func(e *world.ErrorInfo) {
			e.Details = append(slices.Clone(e.Details), world.Field{Name: "hint", Type: "string", Required: true})
		}, "details.hint is described as required, and missing from the world's details"),
		Entry("a details field left out", func(e *world.ErrorInfo) { e.Details = e.Details[:1] },
			"which the description does not"),
		Entry("a details field of another type", func(e *world.ErrorInfo) {
			e.Details = slices.Clone(e.Details)
			e.Details[0].Type = "array"
		}, "details.obtain is described as array"),
		Entry("an example of a kind the error does not list", func(e *world.ErrorInfo) { e.Kinds = []string{cloud.KindSetDNS} },
			"the example's kind cloud.create_network is not among the kinds the error lists"),
		Entry("an example that draws another error", func(e *world.ErrorInfo) {
			e.Example.Request = world.Call{Kind: cloud.KindList, Args: json.RawMessage(`{}`)}
		}, "drew gone 410"),
		Entry("an example that succeeds", func(e *world.ErrorInfo) {
			e.Example.Request = world.Call{Kind: cloud.KindIssueAPIKey, Args: json.RawMessage(`{}`)}
		}, "succeeded"),
	)
})
