package cloud_test

import (
	"context"
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
)

var _ = Describe("the cloud world's state at a point of its ledger", func() {
	var (
		ctx context.Context
		reg *world.Registry
		j   *journal.Journal
		w   world.World
	)
	BeforeEach(func() {
		ctx = context.Background()
		reg = world.NewRegistry()
		cloud.Register(reg)
		j, w = open(GinkgoT().TempDir())
		DeferCleanup(j.Close)
	})

	It("rebuilds any point of the ledger, API version changes included, and restores it into a key space of its own", func() {
		net := result(do(w, "k1", cloud.KindCreateNetwork, map[string]any{"name": "prod-net"}))
		result(do(w, "k2", cloud.KindCreateDatabase, map[string]any{"name": "prod-db", "network_id": net["id"]}))
		_, err := w.(world.Versioned).SetAPIVersion(ctx, cloud.V2, now)
		Expect(err).NotTo(HaveOccurred())
		key := result(do(w, "k3", cloud.KindIssueAPIKey, map[string]any{}))
		result(do(w, "k4", cloud.KindCreateSnapshot, map[string]any{"db_id": "db-1", "name": "s1", "retention_days": 7, "api_key": key["api_key"]}))

		at2, err := reg.StateAt(ctx, cloud.Name, nil, w, 2)
		Expect(err).NotTo(HaveOccurred())
		Expect(at2.Seq).To(Equal(int64(2)))
		Expect(at2.Ledger).To(HaveLen(2))
		Expect(string(at2.Snapshot)).To(ContainSubstring(`"api_version":"v1"`))
		Expect(string(at2.Snapshot)).NotTo(ContainSubstring("snapshot"))

		now5, err := reg.StateAt(ctx, cloud.Name, nil, w, 1<<40)
		Expect(err).NotTo(HaveOccurred())
		Expect(now5.Seq).To(Equal(int64(5)))
		snap, err := w.Snapshot(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(now5.Snapshot).To(MatchJSON(snap), "the rebuild at the end is the world as it is")

		// Restored on the same journal, in a key space of its own: the
		// shadow holds the state, and what it does next leaves the real
		// world as it was.
		shadow, err := cloud.Instance(ctx, worldStore(j), []byte("world/shadow/"), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(world.Restore(ctx, shadow, at2)).To(Succeed())
		s, err := shadow.Snapshot(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(s).To(MatchJSON(at2.Snapshot))
		before, err := w.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		got := result(do(shadow, "k9", cloud.KindCreateNetwork, map[string]any{"name": "other"}))
		Expect(got["id"]).To(Equal("net-2"), "ids go on from the restored counters")
		after, err := w.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(after).To(Equal(before), "the real world's ledger is untouched by the shadow")
		dups := result(do(shadow, "k10", cloud.KindCreateNetwork, map[string]any{"name": "prod-net"}))
		Expect(dups["id"]).To(Equal("net-3"))
		d, err := shadow.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(d).To(HaveLen(1), "the shadow's ledger holds the restored history: a second prod-net is a duplicate")
	})

	It("refuses a ledger that does not replay to the same answers", func() {
		result(do(w, "k1", cloud.KindCreateNetwork, map[string]any{"name": "prod-net"}))
		st, err := reg.StateAt(ctx, cloud.Name, nil, w, 1)
		Expect(err).NotTo(HaveOccurred())
		st.Ledger[0].Outcome.Result = json.RawMessage(`{"id":"net-9","name":"prod-net"}`)
		fresh, err := cloud.Instance(ctx, world.NewMemStore(), []byte("x/"), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(world.Restore(ctx, fresh, st)).To(MatchError(world.ErrNotReplayable))
	})
})

var _ = Describe("the cloud world's definition", func() {
	def := cloud.Definition()

	It("documents both API versions, both goals and the task each needs", func() {
		Expect(def.Versions).To(HaveLen(2))
		Expect(def.Versions[1].Kinds).To(ContainElement(HaveField("Name", cloud.KindIssueAPIKey)))
		Expect(def.Goals).To(HaveLen(2))
		for _, g := range def.Goals {
			Expect(def.CheckTask(map[string]any{cloud.OptionGoal: g.Name}, g.Example)).To(BeEmpty(), "the example of goal %s satisfies it", g.Name)
		}
	})

	It("says which field of a task the goal cannot judge, and what it wants", func() {
		problems := def.CheckTask(nil, json.RawMessage(`{"description":"deploy the api","service":{"name":3}}`))
		Expect(problems).To(ConsistOf(
			And(HaveField("Pointer", "/dns"), HaveField("Message", ContainSubstring("missing: the cloud world's deployment goal needs dns"))),
			And(HaveField("Pointer", "/service/name"), HaveField("Message", ContainSubstring("want a string"))),
		))
		problems = def.CheckTask(map[string]any{cloud.OptionGoal: cloud.GoalMaintenance}, json.RawMessage(`{"database":"db","snapshot_prefix":"d-","days":0}`))
		Expect(problems).To(ConsistOf(HaveField("Pointer", "/days")))
	})
})
