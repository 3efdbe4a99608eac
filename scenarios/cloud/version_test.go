package cloud_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
)

func versioned(w world.World) world.Versioned {
	v, ok := w.(world.Versioned)
	ExpectWithOffset(1, ok).To(BeTrue(), "the cloud world must implement world.Versioned")
	return v
}

// refused asserts a permanent refusal with the given status, code and details.
func refused(o world.Outcome, status int, code, details string) {
	ExpectWithOffset(1, o.Status).To(Equal("failed"), "result %s", o.Result)
	ExpectWithOffset(1, o.Error.Code).To(Equal(code), o.Error.Message)
	ExpectWithOffset(1, o.Error.Status).To(Equal(status))
	ExpectWithOffset(1, o.Error.Transient).To(BeFalse())
	if details == "" {
		ExpectWithOffset(1, o.Error.Details).To(BeEmpty())
	} else {
		ExpectWithOffset(1, string(o.Error.Details)).To(MatchJSON(details))
	}
}

// byTheBook is what a well-behaved agent does with a refusal: it reads only
// the error's code and details (never this package's constants) and returns
// the corrected request, or false when the details do not say how.
func byTheBook(w world.World, kind string, args map[string]any, e *world.Outcome, n *int) (string, map[string]any, bool) {
	var d struct {
		Renamed     map[string]string `json:"renamed"`
		Required    []string          `json:"required"`
		Example     map[string]any    `json:"example"`
		Obtain      string            `json:"obtain"`
		Field       string            `json:"field"`
		Replacement string            `json:"replacement"`
	}
	if e.Error == nil || len(e.Error.Details) == 0 || json.Unmarshal(e.Error.Details, &d) != nil {
		return "", nil, false
	}
	next := maps.Clone(args)
	switch {
	case d.Replacement != "":
		return d.Replacement, next, true
	case d.Obtain != "" && d.Field != "":
		*n++
		got := result(do(w, fmt.Sprintf("obtain-%d", *n), d.Obtain, map[string]any{}))
		next[d.Field] = got[d.Field]
		return kind, next, true
	case len(d.Renamed) > 0:
		for from, to := range d.Renamed {
			if v, ok := next[from]; ok {
				delete(next, from)
				next[to] = v
			}
		}
		return kind, next, true
	case len(d.Required) > 0:
		for _, f := range d.Required {
			next[f] = d.Example[f]
		}
		return kind, next, true
	}
	return "", nil, false
}

var _ = Describe("the cloud world's API versions", func() {
	var (
		dir string
		j   *journal.Journal
		w   world.World
		ctx = context.Background()
	)
	BeforeEach(func() {
		dir = GinkgoT().TempDir()
		j, w = open(dir)
		DeferCleanup(func() { _ = j.Close() })
	})

	It("starts in v1 and refuses v2-only kinds and arguments there, as before", func() {
		Expect(versioned(w).APIVersion()).To(Equal("v1"))
		refused(do(w, "a", cloud.KindListResources, map[string]any{"kind": "network"}), 400, "unknown_kind", "")
		refused(do(w, "b", cloud.KindIssueAPIKey, map[string]any{}), 400, "unknown_kind", "")
		refused(do(w, "c", cloud.KindCreateNetwork, map[string]any{"name": "n", "api_key": "key-1"}), 400, "invalid_argument", "")
		net := result(do(w, "d", cloud.KindCreateNetwork, map[string]any{"name": "n"}))
		db := result(do(w, "e", cloud.KindCreateDatabase, map[string]any{"name": "d", "network_id": net["id"]}))
		refused(do(w, "f", cloud.KindCreateSnapshot, map[string]any{"database_id": db["id"], "name": "s", "retention_days": 7}), 400, "invalid_argument", "")
		refused(do(w, "g", cloud.KindCreateSnapshot, map[string]any{"db_id": db["id"], "name": "s"}), 400, "invalid_argument", "")
		Expect(w.Kinds()).To(ContainElement(HaveField("Name", cloud.KindList)))
		Expect(w.Kinds()).NotTo(ContainElement(HaveField("Name", cloud.KindListResources)))
	})

	Context("after a switch to v2", func() {
		var db string
		BeforeEach(func() {
			net := result(do(w, "s1", cloud.KindCreateNetwork, map[string]any{"name": "ops-net"}))
			db = result(do(w, "s2", cloud.KindCreateDatabase, map[string]any{"name": "ops-db", "network_id": net["id"]}))["id"].(string)
			prev, err := versioned(w).SetAPIVersion(ctx, "v2", now)
			Expect(err).NotTo(HaveOccurred())
			Expect(prev).To(Equal("v1"))
			Expect(versioned(w).APIVersion()).To(Equal("v2"))
		})

		It("records the switch as a world event that is no effect", func() {
			ledger, err := w.Ledger(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(ledger).To(HaveLen(3))
			ev := ledger[2]
			Expect(ev.Seq).To(Equal(int64(3)))
			Expect(ev.Kind).To(Equal(world.EventAPIVersion))
			Expect(ev.Key).To(BeEmpty())
			Expect(ev.IsEvent()).To(BeTrue())
			Expect(ledger[0].IsEvent()).To(BeFalse())
			Expect(string(ev.Args)).To(MatchJSON(`{"version":"v2"}`))
			Expect(string(ev.Outcome.Result)).To(MatchJSON(`{"previous":"v1","version":"v2"}`))
			Expect(ev.At).To(Equal(now))
			_, found, err := w.Lookup(ctx, "")
			Expect(err).NotTo(HaveOccurred())
			Expect(found).To(BeFalse())
			dups, err := w.Duplicates(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(dups).To(BeEmpty())

			prev, err := versioned(w).SetAPIVersion(ctx, "v2", now)
			Expect(err).NotTo(HaveOccurred())
			Expect(prev).To(Equal("v2"))
			ledger, err = w.Ledger(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(ledger).To(HaveLen(3), "a switch to the current version records nothing")
		})

		It("offers the v2 kinds", func() {
			var names []string
			for _, k := range w.Kinds() {
				names = append(names, k.Name)
			}
			Expect(names).To(ContainElements(cloud.KindListResources, cloud.KindIssueAPIKey, cloud.KindCreateSnapshot))
			Expect(names).NotTo(ContainElement(cloud.KindList))
		})

		It("answers each v2 change with its status, code and machine-readable details", func() {
			key := result(do(w, "k", cloud.KindIssueAPIKey, map[string]any{}))["api_key"]
			Expect(key).To(Equal("key-1"))

			By("removed endpoint")
			refused(do(w, "a", cloud.KindList, map[string]any{"kind": "network"}), 410, "gone", `{"replacement":"cloud.list_resources"}`)
			By("changed auth: missing, unknown and ill-typed keys")
			const unauthorized = `{"obtain":"cloud.issue_api_key","field":"api_key"}`
			refused(do(w, "b", cloud.KindCreateNetwork, map[string]any{"name": "n"}), 401, "unauthorized", unauthorized)
			refused(do(w, "c", cloud.KindCreateNetwork, map[string]any{"name": "n", "api_key": "key-99"}), 401, "unauthorized", unauthorized)
			refused(do(w, "d", cloud.KindSetDNS, map[string]any{"host": "a.example.com", "target": "x", "api_key": 1}), 401, "unauthorized", unauthorized)
			refused(do(w, "e", cloud.KindRunMigration, map[string]any{"db_id": db, "version": 1, "api_key": nil}), 401, "unauthorized", unauthorized)
			By("renamed field, on each kind that takes a database")
			const renamed = `{"renamed":{"database_id":"db_id"}}`
			refused(do(w, "f", cloud.KindRunMigration, map[string]any{"database_id": db, "version": 1, "api_key": key}), 400, "field_renamed", renamed)
			refused(do(w, "g", cloud.KindDeployService, map[string]any{"name": "api", "image": "i", "database_id": db, "api_key": key}), 400, "field_renamed", renamed)
			refused(do(w, "h", cloud.KindCreateSnapshot, map[string]any{"name": "s", "database_id": db, "retention_days": 7, "api_key": key}), 400, "field_renamed", renamed)
			By("new required field, absent or null")
			const missing = `{"required":["retention_days"],"example":{"retention_days":7}}`
			refused(do(w, "i", cloud.KindCreateSnapshot, map[string]any{"name": "s", "db_id": db, "api_key": key}), 400, "missing_field", missing)
			refused(do(w, "j", cloud.KindCreateSnapshot, map[string]any{"name": "s", "db_id": db, "retention_days": nil, "api_key": key}), 400, "missing_field", missing)

			o := do(w, "m", cloud.KindRunMigration, map[string]any{"database_id": db, "version": 1, "api_key": key})
			Expect(o.Error.Message).To(ContainSubstring("database_id was renamed to db_id"))
			o = do(w, "n", cloud.KindCreateNetwork, map[string]any{"name": "n"})
			Expect(o.Error.Message).To(ContainSubstring("cloud.issue_api_key"))

			ledger, err := w.Ledger(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(ledger).To(HaveLen(3+1+12), "every refusal is ledgered")
			res := world.ModelOf(w).(*cloud.World).Resources()
			Expect(res).To(HaveLen(3), "no refusal changed the world: a network, a database and the key")
		})

		It("checks gone, then auth, then renamed, then missing", func() {
			refused(do(w, "a", cloud.KindList, map[string]any{"kind": "network", "api_key": "nope"}), 410, "gone", `{"replacement":"cloud.list_resources"}`)
			args := map[string]any{"name": "s", "database_id": db}
			refused(do(w, "b", cloud.KindCreateSnapshot, args), 401, "unauthorized", `{"obtain":"cloud.issue_api_key","field":"api_key"}`)
			args["api_key"] = result(do(w, "k", cloud.KindIssueAPIKey, map[string]any{}))["api_key"]
			refused(do(w, "c", cloud.KindCreateSnapshot, args), 400, "field_renamed", `{"renamed":{"database_id":"db_id"}}`)
			args["db_id"] = args["database_id"]
			delete(args, "database_id")
			refused(do(w, "d", cloud.KindCreateSnapshot, args), 400, "missing_field", `{"required":["retention_days"],"example":{"retention_days":7}}`)
			args["retention_days"] = 30
			snap := result(do(w, "e", cloud.KindCreateSnapshot, args))
			Expect(snap).To(Equal(map[string]any{"id": "snap-1", "name": "s", "db_id": db}))
		})

		It("lets an agent that reads only the errors' details correct every v1 request", func() {
			n := 0
			send := func(kind string, args map[string]any) map[string]any {
				for try := range 6 {
					o := do(w, fmt.Sprintf("%s-%d", kind, try), kind, args)
					if o.Status == "done" {
						return result(o)
					}
					var ok bool
					kind, args, ok = byTheBook(w, kind, args, &o, &n)
					Expect(ok).To(BeTrue(), "no actionable details in %+v", o.Error)
				}
				Fail("still refused after 6 corrections")
				return nil
			}
			snap := send(cloud.KindCreateSnapshot, map[string]any{"database_id": db, "name": "daily-1"})
			Expect(snap).To(Equal(map[string]any{"id": "snap-1", "name": "daily-1", "db_id": db}))
			mig := send(cloud.KindRunMigration, map[string]any{"database_id": db, "version": 2})
			Expect(mig).To(Equal(map[string]any{"db_id": db, "version": 2.0, "applied": []any{1.0, 2.0}}))
			svc := send(cloud.KindDeployService, map[string]any{"name": "api", "image": "api:1", "database_id": db})
			Expect(svc["id"]).To(Equal("svc-1"))
			list := send(cloud.KindList, map[string]any{"kind": "snapshot"})
			Expect(list["items"]).To(HaveLen(1))
			item := list["items"].([]any)[0].(map[string]any)
			Expect(item["fields"]).To(Equal(map[string]any{"db_id": db, "retention_days": "7"}), "v2 results say db_id")
			services := send(cloud.KindListResources, map[string]any{"kind": "service"})
			Expect(services["items"].([]any)[0].(map[string]any)["fields"]).To(HaveKeyWithValue("db_id", db))
			Expect(n).To(Equal(3), "one key per corrected mutating request; then the next request needs its own")
		})

		It("keeps old keys valid, needs no key to read or to get a key, and still refuses bad arguments", func() {
			k1 := result(do(w, "k1", cloud.KindIssueAPIKey, map[string]any{}))["api_key"]
			k2 := result(do(w, "k2", cloud.KindIssueAPIKey, map[string]any{"api_key": "ignored"}))["api_key"]
			Expect([]any{k1, k2}).To(Equal([]any{"key-1", "key-2"}))
			result(do(w, "a", cloud.KindCreateNetwork, map[string]any{"name": "n1", "api_key": k1}))
			result(do(w, "b", cloud.KindCreateNetwork, map[string]any{"name": "n2", "api_key": k2}))
			result(do(w, "c", cloud.KindListResources, map[string]any{"kind": "network"}))
			result(do(w, "d", cloud.KindListResources, map[string]any{"kind": "network", "api_key": "whatever"}))
			refused(do(w, "e", cloud.KindIssueAPIKey, map[string]any{"scope": "all"}), 400, "invalid_argument", "")
			refused(do(w, "f", cloud.KindCreateNetwork, map[string]any{"name": "n", "cidr": "10/8", "api_key": k1}), 400, "invalid_argument", "")
			refused(do(w, "g", cloud.KindRunMigration, map[string]any{"db_id": db, "version": 0, "api_key": k1}), 400, "invalid_argument", "")
			refused(do(w, "h", cloud.KindRunMigration, map[string]any{"db_id": "db-9", "version": 1, "api_key": k1}), 404, "not_found", "")
			refused(do(w, "i", "cloud.delete_everything", map[string]any{"api_key": k1}), 400, "unknown_kind", "")
			refused(do(w, "j", cloud.KindCreateNetwork, json.RawMessage(`[1]`)), 400, "invalid_argument", "")
			for _, days := range []any{0, 3651, "7", 7.5} {
				refused(do(w, "r", cloud.KindCreateSnapshot, map[string]any{"name": "s", "db_id": db, "retention_days": days, "api_key": k1}), 400, "invalid_argument", "")
			}
			for _, days := range []int{1, 3650} {
				result(do(w, "r", cloud.KindCreateSnapshot, map[string]any{"name": "s", "db_id": db, "retention_days": days, "api_key": k1}))
			}
		})

		It("keeps the version, keys and counters across a reopen, and can switch back to v1", func() {
			key := result(do(w, "k", cloud.KindIssueAPIKey, map[string]any{}))["api_key"]
			Expect(j.Close()).To(Succeed())
			j, w = open(dir)
			Expect(versioned(w).APIVersion()).To(Equal("v2"))
			refused(do(w, "a", cloud.KindList, map[string]any{"kind": "network"}), 410, "gone", `{"replacement":"cloud.list_resources"}`)
			result(do(w, "b", cloud.KindCreateSnapshot, map[string]any{"name": "s", "db_id": db, "retention_days": 7, "api_key": key}))
			Expect(result(do(w, "c", cloud.KindIssueAPIKey, map[string]any{}))["api_key"]).To(Equal("key-2"))

			prev, err := versioned(w).SetAPIVersion(ctx, "v1", now)
			Expect(err).NotTo(HaveOccurred())
			Expect(prev).To(Equal("v2"))
			list := result(do(w, "d", cloud.KindList, map[string]any{"kind": "snapshot"}))
			Expect(list["items"].([]any)[0].(map[string]any)["fields"]).To(HaveKeyWithValue("database_id", db))
			Expect(j.Close()).To(Succeed())
			j, w = open(dir)
			Expect(versioned(w).APIVersion()).To(Equal("v1"))
		})
	})

	It("refuses an unknown version, naming the known ones, and keeps its version", func() {
		prev, err := versioned(w).SetAPIVersion(ctx, "v3", now)
		Expect(err).To(MatchError(world.ErrUnknownAPIVersion))
		Expect(err.Error()).To(ContainSubstring(`"v3"`))
		Expect(err.Error()).To(ContainSubstring("v1, v2"))
		Expect(prev).To(BeEmpty())
		Expect(versioned(w).APIVersion()).To(Equal("v1"))
		ledger, err := w.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(ledger).To(BeEmpty())
	})
})
