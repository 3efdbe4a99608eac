package cloud_test

import (
	"context"
	"encoding/json"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
)

const maintenance = `{"network": "ops-net", "database": "ops-db", "days": 7, "snapshot_prefix": "daily-"}`

// openWith opens the cloud world with options on a fresh real journal.
func openWith(options map[string]any) world.World {
	j, err := journal.Open(GinkgoT().TempDir(), journal.Options{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = j.Close() })
	w, err := cloud.Instance(context.Background(), worldStore(j), []byte("world/m/"), options)
	Expect(err).NotTo(HaveOccurred())
	return w
}

// opsDB creates a network and a database on it, returning the database id.
func opsDB(w world.World, prefix, network, database string) string {
	net := result(do(w, prefix+"-net", cloud.KindCreateNetwork, map[string]any{"name": network}))
	return result(do(w, prefix+"-db", cloud.KindCreateDatabase, map[string]any{"name": database, "network_id": net["id"]}))["id"].(string)
}

func snapshotDays(w world.World, db string, days ...int) {
	for _, d := range days {
		result(do(w, fmt.Sprintf("snap-%s-%d", db, d), cloud.KindCreateSnapshot, map[string]any{"database_id": db, "name": fmt.Sprintf("daily-%d", d)}))
	}
}

var _ = Describe("snapshots", func() {
	var (
		w   world.World
		ctx = context.Background()
	)
	BeforeEach(func() { w = openWith(nil) })

	It("are not idempotent: a repeat is a second snapshot, and Duplicates shows it per database", func() {
		db1 := opsDB(w, "a", "ops-net", "ops-db")
		db2 := result(do(w, "b-db", cloud.KindCreateDatabase, map[string]any{"name": "other-db", "network_id": "net-1"}))["id"].(string)
		s1 := result(do(w, "k1", cloud.KindCreateSnapshot, map[string]any{"database_id": db1, "name": "daily-1"}))
		s2 := result(do(w, "k2", cloud.KindCreateSnapshot, map[string]any{"database_id": db1, "name": "daily-1"}))
		Expect(s1).To(Equal(map[string]any{"id": "snap-1", "name": "daily-1", "database_id": db1}))
		Expect(s2["id"]).To(Equal("snap-2"))
		result(do(w, "k3", cloud.KindCreateSnapshot, map[string]any{"database_id": db2, "name": "daily-1"}))
		result(do(w, "k4", cloud.KindCreateSnapshot, map[string]any{"database_id": db1, "name": "daily-2"}))

		dups, err := w.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(dups).To(Equal([]world.Duplicate{{Kind: "snapshot", Name: "daily-1", Scope: db1,
			IDs: []string{"snap-1", "snap-2"}, Keys: []string{"k1", "k2"}, Count: 2}}))

		list := result(do(w, "l", cloud.KindList, map[string]any{"kind": "snapshot"}))
		Expect(list["items"]).To(HaveLen(4))
		first := list["items"].([]any)[0].(map[string]any)
		Expect(first).To(HaveKeyWithValue("kind", "snapshot"))
		Expect(first).To(HaveKeyWithValue("key", "k1"))
		Expect(first["fields"]).To(Equal(map[string]any{"database_id": db1}))
	})

	It("count as duplicates across an API version change", func() {
		db := opsDB(w, "a", "ops-net", "ops-db")
		result(do(w, "k1", cloud.KindCreateSnapshot, map[string]any{"database_id": db, "name": "daily-3"}))
		_, err := versioned(w).SetAPIVersion(ctx, "v2", now)
		Expect(err).NotTo(HaveOccurred())
		key := result(do(w, "k", cloud.KindIssueAPIKey, map[string]any{}))["api_key"]
		result(do(w, "k2", cloud.KindCreateSnapshot, map[string]any{"db_id": db, "name": "daily-3", "retention_days": 7, "api_key": key}))
		dups, err := w.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(dups).To(HaveLen(1))
		Expect(dups[0].Scope).To(Equal(db))
		Expect(dups[0].Keys).To(Equal([]string{"k1", "k2"}))
	})

	It("refuses a snapshot of a database that does not exist, or with a bad name", func() {
		refused(do(w, "a", cloud.KindCreateSnapshot, map[string]any{"database_id": "db-9", "name": "s"}), 404, "not_found", "")
		db := opsDB(w, "b", "n", "d")
		refused(do(w, "c", cloud.KindCreateSnapshot, map[string]any{"database_id": db, "name": "Daily 1"}), 400, "invalid_argument", "")
		refused(do(w, "d", cloud.KindCreateSnapshot, map[string]any{"database_id": "net-1", "name": "s"}), 404, "not_found", "")
		dups, err := w.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(dups).To(BeEmpty())
	})
})

var _ = Describe("the goal option", func() {
	ctx := context.Background()

	It("judges a maintenance goal: every daily snapshot of the database, on the network", func() {
		w := openWith(map[string]any{"goal": "maintenance"})
		chk, err := w.CheckGoal(ctx, json.RawMessage(maintenance))
		Expect(err).NotTo(HaveOccurred())
		Expect(chk).To(Equal(world.Check{Detail: "no database named ops-db"}))

		db := opsDB(w, "a", "ops-net", "ops-db")
		snapshotDays(w, db, 1, 2, 3, 4, 7)
		other := result(do(w, "o", cloud.KindCreateDatabase, map[string]any{"name": "scratch", "network_id": "net-1"}))["id"].(string)
		snapshotDays(w, other, 5, 6)
		chk, err = w.CheckGoal(ctx, json.RawMessage(maintenance))
		Expect(err).NotTo(HaveOccurred())
		Expect(chk.OK).To(BeFalse())
		Expect(chk.Detail).To(Equal("missing snapshots daily-5, daily-6 of ops-db (db-1 on ops-net (net-1); 5 of 7 present)"))

		snapshotDays(w, db, 5, 6)
		chk, err = w.CheckGoal(ctx, json.RawMessage(maintenance))
		Expect(err).NotTo(HaveOccurred())
		Expect(chk).To(Equal(world.Check{OK: true, Detail: "ops-db (db-1 on ops-net (net-1)) has all 7 snapshots daily-1..daily-7"}))
	})

	It("fails a maintenance goal whose database is on another network", func() {
		w := openWith(map[string]any{"goal": "maintenance"})
		db := opsDB(w, "a", "dev-net", "ops-db")
		snapshotDays(w, db, 1, 2, 3, 4, 5, 6, 7)
		chk, err := w.CheckGoal(ctx, json.RawMessage(maintenance))
		Expect(err).NotTo(HaveOccurred())
		Expect(chk).To(Equal(world.Check{Detail: "database ops-db (db-1) is on network net-1 (dev-net), want one named ops-net"}))
	})

	It("judges the duplicate database with the most snapshots", func() {
		w := openWith(map[string]any{"goal": "maintenance"})
		db1 := opsDB(w, "a", "ops-net", "ops-db")
		db2 := result(do(w, "b", cloud.KindCreateDatabase, map[string]any{"name": "ops-db", "network_id": "net-1"}))["id"].(string)
		snapshotDays(w, db1, 1)
		snapshotDays(w, db2, 1, 2, 3, 4, 5, 6)
		chk, err := w.CheckGoal(ctx, json.RawMessage(maintenance))
		Expect(err).NotTo(HaveOccurred())
		Expect(chk.Detail).To(Equal("missing snapshots daily-7 of ops-db (db-2 on ops-net (net-1); 6 of 7 present)"))
	})

	It("refuses a maintenance task it cannot judge", func() {
		w := openWith(map[string]any{"goal": "maintenance"})
		for _, task := range []string{`{"database":"d","days":0,"snapshot_prefix":"daily-"}`, `{"days":7,"snapshot_prefix":"daily-"}`, `{"database":"d","days":7}`, `[]`} {
			_, err := w.CheckGoal(ctx, json.RawMessage(task))
			Expect(err).To(HaveOccurred(), task)
		}
	})

	It("judges deployments by default and when asked to", func() {
		for _, opts := range []map[string]any{nil, {}, {"goal": "deployment"}} {
			w := openWith(opts)
			_, err := w.CheckGoal(ctx, json.RawMessage(maintenance))
			Expect(err).To(MatchError(ContainSubstring("lacks dns")), "a maintenance task is no deployment goal")
			deployAll(w, "k")
			chk, err := w.CheckGoal(ctx, json.RawMessage(goal))
			Expect(err).NotTo(HaveOccurred())
			Expect(chk.OK).To(BeTrue(), chk.Detail)
		}
	})

	DescribeTable("refuses options and values it does not know, saying what it takes",
		func(options map[string]any, want string) {
			j, err := journal.Open(GinkgoT().TempDir(), journal.Options{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { _ = j.Close() })
			_, err = cloud.Instance(ctx, worldStore(j), []byte("world/x/"), options)
			Expect(err).To(MatchError(And(ContainSubstring(want), ContainSubstring("deployment or maintenance"))))
		},
		Entry("unknown option", map[string]any{"goal": "maintenance", "region": "mars"}, `unknown option "region"`),
		Entry("unknown value", map[string]any{"goal": "weekly"}, "option goal: unknown value weekly"),
		Entry("not a string", map[string]any{"goal": 3}, "option goal: unknown value 3 (int)"),
	)
})
