package cloud_test

import (
	"context"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
)

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// worldStore backs a world with a real Badger journal, as the harness does,
// so these tests exercise real durable commits (the key space is the
// prefix each test gives).
func worldStore(j *journal.Journal) world.Store {
	s, _ := history.NewWriter(j).WorldStore("")
	return s
}

// open opens the cloud world on a real journal in dir.
func open(dir string) (*journal.Journal, world.World) {
	j, err := journal.Open(dir, journal.Options{})
	Expect(err).NotTo(HaveOccurred())
	w, err := cloud.Instance(context.Background(), worldStore(j), []byte("world/r1/"), nil)
	Expect(err).NotTo(HaveOccurred())
	return j, w
}

func do(w world.World, key, kind string, args any) world.Outcome {
	b, err := json.Marshal(args)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	o, err := w.Execute(context.Background(), world.Request{Key: key, Kind: kind, Args: b, Now: now})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return o
}

func result(o world.Outcome) map[string]any {
	ExpectWithOffset(1, o.Status).To(Equal("done"), "%+v", o.Error)
	var m map[string]any
	ExpectWithOffset(1, json.Unmarshal(o.Result, &m)).To(Succeed())
	return m
}

const goal = `{"network":"prod-net","database":"prod-db","migration":3,"service":{"name":"api","image":"api:1"},"dns":"api.example.com"}`

// deployAll performs the five steps of a deployment.
func deployAll(w world.World, prefix string) {
	net := result(do(w, prefix+"1", cloud.KindCreateNetwork, map[string]any{"name": "prod-net"}))
	db := result(do(w, prefix+"2", cloud.KindCreateDatabase, map[string]any{"name": "prod-db", "network_id": net["id"]}))
	result(do(w, prefix+"3", cloud.KindRunMigration, map[string]any{"database_id": db["id"], "version": 3}))
	svc := result(do(w, prefix+"4", cloud.KindDeployService, map[string]any{"name": "api", "image": "api:1", "database_id": db["id"]}))
	result(do(w, prefix+"5", cloud.KindSetDNS, map[string]any{"host": "api.example.com", "target": svc["endpoint"]}))
}

var _ = Describe("the cloud world", func() {
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

	It("performs a deployment and judges the goal from its own state", func() {
		chk, err := w.CheckGoal(ctx, json.RawMessage(goal))
		Expect(err).NotTo(HaveOccurred())
		Expect(chk.OK).To(BeFalse())
		Expect(chk.Detail).To(ContainSubstring("no DNS record"))

		deployAll(w, "k")
		chk, err = w.CheckGoal(ctx, json.RawMessage(goal))
		Expect(err).NotTo(HaveOccurred())
		Expect(chk.OK).To(BeTrue(), chk.Detail)
		Expect(chk.Detail).To(Equal("api.example.com -> svc-1 (api api:1) -> db-1 v3 on net-1"))
		dups, err := w.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(dups).To(BeEmpty())
	})

	It("is not idempotent for creates: a repeat makes a second resource, and Duplicates shows it", func() {
		a := result(do(w, "k1", cloud.KindCreateNetwork, map[string]any{"name": "prod-net"}))
		b := result(do(w, "k2", cloud.KindCreateNetwork, map[string]any{"name": "prod-net"}))
		Expect(a["id"]).To(Equal("net-1"))
		Expect(b["id"]).To(Equal("net-2"))
		dups, err := w.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(dups).To(Equal([]world.Duplicate{{Kind: "network", Name: "prod-net", IDs: []string{"net-1", "net-2"}, Keys: []string{"k1", "k2"}, Count: 2}}))
	})

	It("upserts DNS and brings migrations up to a version, without duplicates", func() {
		net := result(do(w, "k1", cloud.KindCreateNetwork, map[string]any{"name": "n"}))
		db := result(do(w, "k2", cloud.KindCreateDatabase, map[string]any{"name": "d", "network_id": net["id"]}))
		m := result(do(w, "k3", cloud.KindRunMigration, map[string]any{"database_id": db["id"], "version": 2}))
		Expect(m["applied"]).To(Equal([]any{1.0, 2.0}))
		m = result(do(w, "k4", cloud.KindRunMigration, map[string]any{"database_id": db["id"], "version": 2}))
		Expect(m["applied"]).To(BeEmpty())
		huge := do(w, "k4b", cloud.KindRunMigration, map[string]any{"database_id": db["id"], "version": int64(1) << 40})
		Expect(huge.Error).NotTo(BeNil(), "a version past 10000 is refused, not applied one by one (which never ended)")
		Expect(huge.Error.Message).To(Equal("version 1099511627776: want 1..10000"))
		result(do(w, "k5", cloud.KindSetDNS, map[string]any{"host": "a.example.com", "target": "x"}))
		result(do(w, "k6", cloud.KindSetDNS, map[string]any{"host": "a.example.com", "target": "y"}))
		list := result(do(w, "k7", cloud.KindList, map[string]any{"kind": "dns"}))
		Expect(list["items"]).To(HaveLen(1))
		Expect(list["items"].([]any)[0].(map[string]any)["fields"]).To(Equal(map[string]any{"target": "y"}))
		dups, err := w.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(dups).To(BeEmpty())
	})

	DescribeTable("refuses bad requests permanently (4xx), and ledgers them",
		func(kind string, args any, code string) {
			o := do(w, "bad", kind, args)
			Expect(o.Status).To(Equal("failed"))
			Expect(o.Error.Code).To(Equal(code))
			Expect(o.Error.Transient).To(BeFalse())
			Expect(o.Error.Status).To(BeNumerically(">=", 400))
			Expect(o.Error.Status).To(BeNumerically("<", 500))
			ledger, err := w.Ledger(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(ledger).To(HaveLen(1))
			Expect(ledger[0].Outcome.Status).To(Equal("failed"))
		},
		Entry("unknown kind", "cloud.delete_everything", map[string]any{}, "unknown_kind"),
		Entry("unknown argument", cloud.KindCreateNetwork, map[string]any{"name": "n", "cidr": "10/8"}, "invalid_argument"),
		Entry("bad name", cloud.KindCreateNetwork, map[string]any{"name": "Prod Net"}, "invalid_argument"),
		Entry("missing network", cloud.KindCreateDatabase, map[string]any{"name": "d", "network_id": "net-9"}, "not_found"),
		Entry("missing database", cloud.KindDeployService, map[string]any{"name": "s", "image": "i", "database_id": "db-9"}, "not_found"),
		Entry("bad version", cloud.KindRunMigration, map[string]any{"database_id": "db-1", "version": 0}, "invalid_argument"),
		Entry("bad host", cloud.KindSetDNS, map[string]any{"host": "not a host", "target": "x"}, "invalid_argument"),
		Entry("bad list kind", cloud.KindList, map[string]any{"kind": "users"}, "invalid_argument"),
	)

	It("looks up what it received under a key, for reconciliation", func() {
		_, found, err := w.Lookup(ctx, "k1")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeFalse())
		o := do(w, "k1", cloud.KindCreateNetwork, map[string]any{"name": "n"})
		got, found, err := w.Lookup(ctx, "k1")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(got.Result).To(MatchJSON(o.Result))
	})

	It("keeps its state, ledger and id counters across a reopen of the journal", func() {
		deployAll(w, "a")
		Expect(j.Close()).To(Succeed())
		j, w = open(dir)
		chk, err := w.CheckGoal(ctx, json.RawMessage(goal))
		Expect(err).NotTo(HaveOccurred())
		Expect(chk.OK).To(BeTrue(), chk.Detail)
		ledger, err := w.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(ledger).To(HaveLen(5))
		Expect(ledger[0].Seq).To(Equal(int64(1)))
		Expect(ledger[4].Resource).To(Equal("dns:api.example.com"))
		next := result(do(w, "b1", cloud.KindCreateNetwork, map[string]any{"name": "other"}))
		Expect(next["id"]).To(Equal("net-2"), "ids continue after a reopen")
	})

	It("refuses options it does not know", func() {
		_, err := cloud.Instance(ctx, worldStore(j), []byte("world/r2/"), map[string]any{"region": "mars"})
		Expect(err).To(MatchError(ContainSubstring(`unknown option "region"`)))
	})

	It("judges a goal that the world does not show, with the evidence", func() {
		net := result(do(w, "k1", cloud.KindCreateNetwork, map[string]any{"name": "prod-net"}))
		db := result(do(w, "k2", cloud.KindCreateDatabase, map[string]any{"name": "prod-db", "network_id": net["id"]}))
		svc := result(do(w, "k4", cloud.KindDeployService, map[string]any{"name": "api", "image": "api:1", "database_id": db["id"]}))
		result(do(w, "k5", cloud.KindSetDNS, map[string]any{"host": "api.example.com", "target": svc["endpoint"]}))
		chk, err := w.CheckGoal(ctx, json.RawMessage(goal))
		Expect(err).NotTo(HaveOccurred())
		Expect(chk.OK).To(BeFalse())
		Expect(chk.Detail).To(Equal("database db-1 is at schema version 0, want >= 3"))
	})
})
