//go:build linux

package walsync

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// Small memtables, so that a few MiB of writes rotate them several times;
// every value stays in the LSM tree (the threshold is above testMaxValue).
const (
	testMemTable = 1 << 20
	testMaxValue = 64 << 10
)

func openDB(dir string) *badger.DB {
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil).
		WithSyncWrites(false).WithMemTableSize(testMemTable).WithNumMemtables(1).
		WithValueThreshold(2 * testMaxValue).WithValueLogFileSize(1 << 20))
	Expect(err).NotTo(HaveOccurred())
	return db
}

// open opens a database in a fresh directory and its Syncer, closed when the
// spec ends.
func open() (string, *badger.DB, *Syncer) {
	dir := GinkgoT().TempDir()
	db := openDB(dir)
	s := New(dir, db, testMaxValue)
	Expect(s).NotTo(BeNil())
	DeferCleanup(func() {
		Expect(s.Close()).To(Succeed())
		Expect(db.Close()).To(Succeed())
	})
	return dir, db, s
}

func write(db *badger.DB, key string, value []byte) {
	Expect(db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(key), value) })).To(Succeed())
}

// memLogs lists the fids of the memtable logs in a Badger dir.
func memLogs(dir string) []int {
	ents, err := os.ReadDir(dir)
	Expect(err).NotTo(HaveOccurred())
	var fids []int
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), memFileExt); ok {
			fid, err := strconv.Atoi(n)
			Expect(err).NotTo(HaveOccurred())
			fids = append(fids, fid)
		}
	}
	return fids
}

func logPath(dir string, fid int) string {
	return filepath.Join(dir, fmt.Sprintf("%05d%s", fid, memFileExt))
}

// recordSyncs collects the paths a Syncer syncs, in order, until the spec
// ends.
func recordSyncs() *[]string {
	var synced []string
	syncHook = func(p string) { synced = append(synced, p) }
	DeferCleanup(func() { syncHook = nil })
	return &synced
}

var _ = Describe("Syncer", func() {
	It("follows the newest memtable log across rotations", func() {
		dir, db, s := open()
		value := bytes.Repeat([]byte("w"), testMaxValue)
		followed := map[int]bool{}
		for i := range 128 {
			write(db, fmt.Sprintf("wal/%03d", i), value)
			Expect(s.Sync()).To(Succeed())
			Expect(s.cur).To(Equal(slices.Max(memLogs(dir))), "after write %d", i)
			Expect(s.Log()).To(Equal(logPath(dir, s.cur)))
			followed[s.cur] = true
		}
		Expect(len(followed)).To(BeNumerically(">=", 3), "memtables rotated at least twice")
		Expect(db.View(func(txn *badger.Txn) error {
			for i := range 128 {
				item, err := txn.Get(fmt.Appendf(nil, "wal/%03d", i))
				Expect(err).NotTo(HaveOccurred())
				Expect(item.ValueCopy(nil)).To(Equal(value))
			}
			return nil
		})).To(Succeed())
	})

	It("syncs, after every write, the log that holds it, and the directory when that log is new", func() {
		synced := recordSyncs()
		dir, db, s := open()
		write(db, "first", []byte("1"))
		Expect(s.Sync()).To(Succeed())
		last, rotations := slices.Max(memLogs(dir)), 0
		Expect(*synced).To(Equal([]string{logPath(dir, last), dir}), "the first call: every log there is, then the directory")
		value := bytes.Repeat([]byte("s"), testMaxValue)
		for i := range 96 {
			*synced = (*synced)[:0]
			write(db, fmt.Sprintf("sync/%03d", i), value)
			Expect(s.Sync()).To(Succeed())
			newest := slices.Max(memLogs(dir))
			log := logPath(dir, newest)
			Expect(*synced).To(ContainElement(log), "write %d: the log holding it was not synced", i)
			if newest == last {
				Expect(*synced).To(Equal([]string{log}), "write %d: no rotation, one sync", i)
				continue
			}
			at := slices.Index(*synced, log)
			Expect((*synced)[at+1:]).To(ContainElement(dir), "write %d: the directory naming the new log %d was not synced after it", i, newest)
			rotations++
			last = newest
		}
		Expect(rotations).To(BeNumerically(">=", 2))
	})

	It("lists the logs again after a write that failed, as memtables may have rotated twice since", func() {
		synced := recordSyncs()
		dir, db, s := open()
		write(db, "a", []byte("1"))
		Expect(s.Sync()).To(Succeed())
		*synced = (*synced)[:0]
		write(db, "b", []byte("2"))
		Expect(s.Sync()).To(Succeed())
		Expect(*synced).To(HaveLen(1), "the usual case: the followed log alone")
		s.FailedWrite()
		*synced = (*synced)[:0]
		write(db, "c", []byte("3"))
		Expect(s.Sync()).To(Succeed())
		Expect(*synced).To(ContainElement(dir), "the directory was listed and synced")
		Expect(s.rescan).To(BeFalse())
	})

	It("lists the logs again after unsynced writes, which may rotate memtables more than once", func() {
		synced := recordSyncs()
		dir, db, s := open()
		write(db, "start", []byte("1"))
		Expect(s.Sync()).To(Succeed())
		start := s.cur
		// 96 x 64 KiB = 6 MiB unsynced: 1 MiB memtables rotate several
		// times, and Badger may flush and delete the logs in between.
		value := bytes.Repeat([]byte("u"), testMaxValue)
		for i := range 96 {
			write(db, fmt.Sprintf("u/%03d", i), value)
			s.UnsyncedWrite()
		}
		*synced = (*synced)[:0]
		write(db, "after", []byte("1"))
		Expect(s.Sync()).To(Succeed())
		newest := slices.Max(memLogs(dir))
		Expect(newest - start).To(BeNumerically(">=", 2))
		log := logPath(dir, newest)
		Expect(*synced).To(ContainElement(log), "the log holding the synced write was synced")
		Expect((*synced)[slices.Index(*synced, log)+1:]).To(ContainElement(dir), "and then the directory naming it")
		Expect(s.cur).To(Equal(newest))
	})

	It("syncs the followed log alone after unsynced writes that rotated nothing", func() {
		synced := recordSyncs()
		_, db, s := open()
		write(db, "a", []byte("1"))
		Expect(s.Sync()).To(Succeed())
		write(db, "b", []byte("2"))
		s.UnsyncedWrite()
		*synced = (*synced)[:0]
		write(db, "c", []byte("3"))
		Expect(s.Sync()).To(Succeed())
		Expect(*synced).To(Equal([]string{s.f.Name()}))
		Expect(s.unsynced).To(BeFalse())
	})

	It("leaves the value log untouched when every value is at most the bound", func() {
		dir, db, s := open()
		for i := range 64 {
			write(db, fmt.Sprintf("v/%02d", i), bytes.Repeat([]byte("v"), testMaxValue))
			Expect(s.Sync()).To(Succeed())
		}
		vlogs, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
		Expect(err).NotTo(HaveOccurred())
		Expect(vlogs).NotTo(BeEmpty())
		const header = 20 // Badger's vlogHeaderSize
		for _, p := range vlogs {
			b, err := os.ReadFile(p)
			Expect(err).NotTo(HaveOccurred())
			if len(b) > header {
				Expect(bytes.Count(b[header:], []byte{0})).To(Equal(len(b)-header), "%s holds data past its header", p)
			}
		}
	})

	It("is refused where values could reach the value log, or Badger syncs every write itself", func() {
		dir := GinkgoT().TempDir()
		db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithValueThreshold(1 << 10))
		Expect(err).NotTo(HaveOccurred())
		Expect(New(dir, db, 4<<10)).To(BeNil(), "a value of the bound would go to the value log")
		Expect(db.Close()).To(Succeed())

		db, err = badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithVLogPercentile(0.9))
		Expect(err).NotTo(HaveOccurred())
		Expect(New(dir, db, 1<<10)).To(BeNil(), "Badger picks the threshold itself")
		Expect(db.Close()).To(Succeed())

		db, err = badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithSyncWrites(true))
		Expect(err).NotTo(HaveOccurred())
		Expect(New(dir, db, 1<<10)).To(BeNil())
		Expect(db.Close()).To(Succeed())
	})

	It("syncs again after a reopen, starting from the logs it finds", func() {
		dir := GinkgoT().TempDir()
		for round := range 3 {
			db := openDB(dir)
			s := New(dir, db, testMaxValue)
			Expect(s).NotTo(BeNil())
			write(db, fmt.Sprintf("r/%d", round), []byte("x"))
			Expect(s.Sync()).To(Succeed())
			Expect(s.cur).To(Equal(slices.Max(memLogs(dir))))
			Expect(s.Close()).To(Succeed())
			Expect(db.Close()).To(Succeed())
		}
	})
})
