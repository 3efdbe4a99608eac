package journal_test

import (
	"bytes"
	"context"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/journal"
)

// inBadger says whether key is in Badger itself, behind the buffer's back.
func inBadger(db *badger.DB, key string) bool {
	found := false
	_ = db.View(func(txn *badger.Txn) error {
		_, err := txn.Get([]byte(key))
		found = err == nil
		return nil
	})
	return found
}

var _ = Describe("CommitBuffered", func() {
	var ctx context.Context
	BeforeEach(func() { ctx = context.Background() })

	// A delay no spec waits for: only reads, commits and Close write the buffer.
	const never = time.Hour

	It("is seen by every read as soon as it returns, though not yet written", func() {
		j, _ := openJournal(journal.Options{BufferedDelay: never})
		before := j.Stats().Commits
		Expect(j.CommitBuffered(ctx, kv("ev/r/1", "a"), kv("ev/r/2", "b"))).To(Succeed())
		Expect(j.CommitBuffered(ctx, kv("ev/r/3", "c"))).To(Succeed())
		Expect(j.Stats().Commits).To(Equal(before), "nothing written yet")

		Expect(j.Get([]byte("ev/r/2"))).To(Equal([]byte("b")))
		Expect(j.Stats().Commits).To(Equal(before+2), "the read wrote both commits")
		Expect(j.CommitBuffered(ctx, kv("ev/r/4", "d"))).To(Succeed())
		Expect(scanAll(j, "ev/r/")).To(Equal([]string{"ev/r/1=a", "ev/r/2=b", "ev/r/3=c", "ev/r/4=d"}))
		Expect(j.CommitBuffered(ctx, kv("ev/r/5", "e"))).To(Succeed())
		k, v, err := j.Last([]byte("ev/r/"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(k) + "=" + string(v)).To(Equal("ev/r/5=e"))
	})

	It("is written BufferedDelay after the first buffered commit, with no read", func() {
		j, _ := openJournal(journal.Options{BufferedDelay: 5 * time.Millisecond})
		before := j.Stats().Commits
		Expect(j.CommitBuffered(ctx, kv("ev/r/1", "a"))).To(Succeed())
		Expect(j.CommitBuffered(ctx, kv("ev/r/2", "b"))).To(Succeed())
		Eventually(func() uint64 { return j.Stats().Commits }).WithTimeout(time.Second).Should(Equal(before + 2))
	})

	It("keeps the order of commits, whichever way each is made", func() {
		j, dir := openJournal(journal.Options{BufferedDelay: never})
		steps := []struct {
			how   string
			value string
		}{{"buffered", "1"}, {"synced", "2"}, {"buffered", "3"}, {"unsynced", "4"}, {"buffered", "5"}, {"buffered", "6"}, {"synced", "7"}, {"unsynced", "8"}, {"buffered", "9"}}
		for _, s := range steps {
			e := kv("cp/r/k", s.value)
			switch s.how {
			case "buffered":
				Expect(j.CommitBuffered(ctx, e)).To(Succeed())
			case "unsynced":
				Expect(j.CommitUnsynced(ctx, e)).To(Succeed())
			case "synced":
				Expect(j.Commit(ctx, e)).To(Succeed())
			}
			Expect(j.Get([]byte("cp/r/k"))).To(Equal([]byte(s.value)), "after the %s commit of %s", s.how, s.value)
		}
		// Without a read in between: the last commit wins on disk too.
		Expect(j.CommitBuffered(ctx, kv("cp/r/k", "10"))).To(Succeed())
		Expect(j.Commit(ctx, kv("cp/r/k", "11"))).To(Succeed())
		Expect(j.CommitUnsynced(ctx, kv("cp/r/j", "x"))).To(Succeed())
		Expect(j.CommitBuffered(ctx, kv("cp/r/k", "12"))).To(Succeed())
		Expect(j.Close()).To(Succeed())
		withBadger(dir, func(db *badger.DB) {
			Expect(db.View(func(txn *badger.Txn) error {
				item, err := txn.Get([]byte("cp/r/k"))
				Expect(err).NotTo(HaveOccurred())
				Expect(item.ValueCopy(nil)).To(Equal([]byte("12")))
				return nil
			})).To(Succeed())
		})
	})

	It("is written before a synced commit's write, so that commit's sync covers it", func() {
		var db *badger.DB
		var seen []bool
		j, _ := openJournal(journal.Options{BufferedDelay: never, NewSyncer: func(d *badger.DB) journal.Syncer {
			db = d
			return syncFunc(func() error {
				seen = append(seen, inBadger(db, "ev/r/1"))
				return d.Sync()
			})
		}})
		seen = nil
		Expect(j.CommitBuffered(ctx, kv("ev/r/1", "a"))).To(Succeed())
		Expect(inBadger(db, "ev/r/1")).To(BeFalse())
		Expect(j.Commit(ctx, kv("run/r", "x"))).To(Succeed())
		Expect(seen).To(Equal([]bool{true}), "the buffered commit was in Badger when the sync began")
	})

	It("is written in the same transaction as the next synced commit, when it fits one", func() {
		j, _ := openJournal(journal.Options{BufferedDelay: never})
		versions := func() map[string]uint64 {
			out := map[string]uint64{}
			Expect(j.Versions(nil, func(k []byte, v uint64, _ func() ([]byte, error)) error {
				out[string(k)] = v
				return nil
			})).To(Succeed())
			return out
		}
		before := j.Stats()
		Expect(j.CommitBuffered(ctx, kv("ev/r/1", "a"))).To(Succeed())
		Expect(j.CommitBuffered(ctx, kv("ev/r/2", "b"), kv("ev/r/3", "c"))).To(Succeed())
		Expect(j.Commit(ctx, kv("fx/r/1", "done"))).To(Succeed())
		after := j.Stats()
		Expect(after.Syncs - before.Syncs).To(Equal(uint64(1)))
		Expect(after.Commits-before.Commits).To(Equal(uint64(3)), "the two buffered commits and the synced one")
		Expect(after.Entries - before.Entries).To(Equal(uint64(4)))
		v := versions()
		Expect(v["ev/r/1"]).To(And(Equal(v["ev/r/2"]), Equal(v["ev/r/3"]), Equal(v["fx/r/1"])), "one Badger transaction: %v", v)

		// A buffer too large to share a transaction with the commit is
		// written first in its own, as before; both are durable.
		value := bytes.Repeat([]byte("v"), 1024)
		for i := range 200 {
			Expect(j.CommitBuffered(ctx, journal.Entry{Key: fmt.Appendf(nil, "llm/r/%04d", i), Value: value})).To(Succeed())
		}
		// 2.3 MiB: one transaction holds it (Badger's bound is 15% of the
		// 16 MiB memtable), not with the buffer's 200 KiB besides.
		big := bytes.Repeat([]byte("w"), journal.MaxValueSize)
		var entries []journal.Entry
		for i := range 4 {
			entries = append(entries, journal.Entry{Key: fmt.Appendf(nil, "big/r/%02d", i), Value: big})
		}
		entries = append(entries, journal.Entry{Key: []byte("big/r/04"), Value: big[:300<<10]})
		Expect(j.Commit(ctx, entries...)).To(Succeed())
		v = versions()
		Expect(v["llm/r/0000"]).To(Equal(v["llm/r/0199"]))
		Expect(v["big/r/00"]).To(BeNumerically(">", v["llm/r/0199"]), "two transactions, the buffer's first")
		Expect(scanAll(j, "ev/r/")).To(Equal([]string{"ev/r/1=a", "ev/r/2=b", "ev/r/3=c"}))
	})

	It("writes a full buffer at once, in as few writes as it takes", func() {
		j, _ := openJournal(journal.Options{BufferedDelay: never})
		before := j.Stats().Commits
		value := bytes.Repeat([]byte("v"), 1024)
		for i := range 1000 { // about 1 MiB: the buffer holds 256 KiB
			Expect(j.CommitBuffered(ctx, journal.Entry{Key: fmt.Appendf(nil, "llm/r/%04d", i), Value: value})).To(Succeed())
		}
		written := j.Stats().Commits - before
		Expect(written).To(BeNumerically(">=", 700), "full buffers were written without a read")
		Expect(written).To(BeNumerically("<", 1000), "the last buffer waits")
		n := 0
		Expect(j.Scan([]byte("llm/r/"), func(k, v []byte) error {
			Expect(v).To(Equal(value))
			n++
			return nil
		})).To(Succeed())
		Expect(n).To(Equal(1000))
	})

	It("is written by Close, and refused with ErrClosed afterwards", func() {
		j, dir := openJournal(journal.Options{BufferedDelay: never})
		Expect(j.CommitBuffered(ctx, kv("fx/r/a", "1"), kv("fx/r/b", "2"))).To(Succeed())
		Expect(j.Close()).To(Succeed())
		Expect(j.CommitBuffered(ctx, kv("fx/r/c", "3"))).To(MatchError(journal.ErrClosed))
		j2 := openAt(dir, journal.Options{})
		Expect(scanAll(j2, "fx/r/")).To(Equal([]string{"fx/r/a=1", "fx/r/b=2"}))
	})

	It("refuses what Commit refuses, before buffering anything", func() {
		j, _ := openJournal(journal.Options{BufferedDelay: never})
		Expect(j.CommitBuffered(ctx, kv("meta/x", "1"))).To(MatchError(journal.ErrInvalidKey))
		Expect(j.CommitBuffered(ctx, journal.Entry{Key: []byte("ev/big"), Value: make([]byte, journal.MaxValueSize+1)})).To(MatchError(journal.ErrTooLarge))
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		Expect(j.CommitBuffered(cancelled, kv("ev/r/1", "a"))).To(MatchError(context.Canceled))
		Expect(j.CommitBuffered(ctx)).To(Succeed())
		_, err := j.Get([]byte("ev/r/1"))
		Expect(err).To(MatchError(journal.ErrNotFound))
	})

	It("lets a scan's callback commit, buffered or not", func() {
		j, _ := openJournal(journal.Options{BufferedDelay: never})
		Expect(j.CommitBuffered(ctx, kv("ev/r/1", "a"))).To(Succeed())
		Expect(j.Scan([]byte("ev/r/"), func(k, v []byte) error {
			Expect(j.CommitBuffered(ctx, kv("ev/s/1", "b"))).To(Succeed())
			Expect(j.Get([]byte("ev/s/1"))).To(Equal([]byte("b")))
			return j.Commit(ctx, kv("ev/s/2", "c"))
		})).To(Succeed())
		Expect(scanAll(j, "ev/s/")).To(Equal([]string{"ev/s/1=b", "ev/s/2=c"}))
	})
})
