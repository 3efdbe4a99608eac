package harness

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/world"
)

var _ = Describe("The records of a call a recording answers", func() {
	var (
		j *journal.Journal
		w *history.Writer
	)
	BeforeEach(func() {
		var err error
		// A BufferedDelay no spec waits for: what writes the buffer here
		// is a read or another commit.
		j, err = journal.Open(GinkgoT().TempDir(), journal.Options{BufferedDelay: time.Hour})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(j.Close)
		w = history.NewWriter(j)
	})

	It("wait in memory, and the next synced commit writes them before its own, with no sync of their own", func(ctx SpecContext) {
		before := j.Stats()
		rec := &history.EffectRecord{ID: history.KeyedID("add-1"), Key: "add-1", Kind: "mcp.counters.add", Status: protocol.StatusDone}
		Expect(w.PutRecorded(ctx, history.EffectEntry("run-1", rec))).To(Succeed())
		Expect(j.Stats().Commits).To(Equal(before.Commits), "held in memory: not written to Badger yet")

		// A synced commit (a checkpoint, a live effect) writes them first,
		// and its sync covers them.
		Expect(w.Put(ctx, history.EffectEntry("run-1", &history.EffectRecord{ID: history.KeyedID("live"), Key: "live", Kind: "cloud.deploy", Status: protocol.StatusDone}))).To(Succeed())
		after := j.Stats()
		Expect(after.Commits - before.Commits).To(BeEquivalentTo(2))
		Expect(after.Syncs - before.Syncs).To(BeEquivalentTo(1))
		effects, err := history.NewReader(j, nil).Effects("run-1")
		Expect(err).NotTo(HaveOccurred())
		Expect(effects).To(HaveLen(2))
	})

	It("are seen by a read made before anything else writes them", func(ctx SpecContext) {
		rec := &history.EffectRecord{ID: history.KeyedID("add-1"), Key: "add-1", Kind: "mcp.counters.add", Status: protocol.StatusDone}
		Expect(w.PutRecorded(ctx, history.EffectEntry("run-1", rec))).To(Succeed())
		effects, err := history.NewReader(j, nil).Effects("run-1")
		Expect(err).NotTo(HaveOccurred())
		Expect(effects).To(HaveLen(1))
		Expect(effects[0].Status).To(Equal(protocol.StatusDone))
	})

	It("include the replayed world's journal of answers, and only its", func(ctx SpecContext) {
		_, prefix := w.WorldStore("run-1")
		recorded := append(append([]byte{}, prefix...), "~mcp/counters/"...)
		store, _ := w.AnswersStore("run-1", recorded)
		before := j.Stats()
		Expect(store.Commit(ctx, world.Entry{Key: append(append([]byte{}, recorded...), "ledger/1"...), Value: []byte(`{}`)})).To(Succeed())
		Expect(j.Stats().Commits).To(Equal(before.Commits), "a replayed server's answer is held in memory")

		// A live API's answer in the same run is written at once (with
		// what waited before it), unsynced: the effect's result syncs it.
		live := append(append([]byte{}, prefix...), "~http/etcd/ledger/1"...)
		Expect(store.Commit(ctx, world.Entry{Key: live, Value: []byte(`{}`)})).To(Succeed())
		after := j.Stats()
		Expect(after.Commits - before.Commits).To(BeEquivalentTo(2))
		Expect(after.Syncs).To(Equal(before.Syncs))
	})

	It("include a live effect's answer, made while the world executes it: the result's synced commit writes both", func(ctx SpecContext) {
		_, prefix := w.WorldStore("run-1")
		store, _ := w.AnswersStore("run-1")
		before := j.Stats()
		answer := append(append([]byte{}, prefix...), "~http/etcd/ledger/1"...)
		Expect(store.Commit(history.ResultFollows(ctx), world.Entry{Key: answer, Value: []byte(`{"seq":1}`)})).To(Succeed())
		Expect(j.Stats().Commits).To(Equal(before.Commits), "held in memory until the effect's result")

		rec := &history.EffectRecord{ID: history.KeyedID("put-1"), Key: "put-1", Kind: "http.etcd.put", Status: protocol.StatusDone}
		Expect(w.Put(ctx, history.EffectEntry("run-1", rec))).To(Succeed())
		after := j.Stats()
		Expect(after.Commits - before.Commits).To(BeEquivalentTo(2))
		Expect(after.Syncs-before.Syncs).To(BeEquivalentTo(1), "one sync covers the answer and the result")
		v, err := j.Get(answer)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(v)).To(Equal(`{"seq":1}`))
	})
})
