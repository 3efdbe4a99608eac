//go:build linux

package journal

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

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

// recordSyncs collects the paths walSyncer syncs, in order, until the spec
// ends.
func recordSyncs() *[]string {
	var synced []string
	syncHook = func(p string) { synced = append(synced, p) }
	ginkgo.DeferCleanup(func() { syncHook = nil })
	return &synced
}

var _ = ginkgo.Describe("walSyncer", func() {
	var dir string
	ginkgo.BeforeEach(func() { dir = ginkgo.GinkgoT().TempDir() })

	ginkgo.It("is the default and follows the newest memtable log across rotations", func() {
		j, err := Open(dir, Options{})
		Expect(err).NotTo(HaveOccurred())
		defer j.Close()
		ws, ok := j.syncer.(*walSyncer)
		Expect(ok).To(BeTrue(), "the default syncer is %T", j.syncer)

		// 128 x 512 KiB = 64 MiB: 16 MiB memtables fill and rotate several times.
		ctx := context.Background()
		value := bytes.Repeat([]byte("w"), MaxValueSize)
		followed := map[int]bool{}
		for i := range 128 {
			Expect(j.Commit(ctx, Entry{Key: fmt.Appendf(nil, "wal/%03d", i), Value: value})).To(Succeed())
			Expect(ws.cur).To(Equal(slices.Max(memLogs(filepath.Join(dir, badgerDirName)))), "after commit %d", i)
			followed[ws.cur] = true
		}
		Expect(len(followed)).To(BeNumerically(">=", 3), "memtables rotated at least twice")
		for i := range 128 {
			got, err := j.Get(fmt.Appendf(nil, "wal/%03d", i))
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(Equal(value))
		}
	})

	ginkgo.It("syncs, inside every commit, the log that holds it, and the directory when that log is new", func() {
		synced := recordSyncs()
		j, err := Open(dir, Options{})
		Expect(err).NotTo(HaveOccurred())
		defer j.Close()
		bdir := filepath.Join(dir, badgerDirName)
		ctx := context.Background()
		value := bytes.Repeat([]byte("s"), MaxValueSize)
		last, rotations := slices.Max(memLogs(bdir)), 0 // followed since Open's own commit
		Expect(*synced).To(ContainElement(filepath.Join(bdir, fmt.Sprintf("%05d%s", last, memFileExt))))
		Expect(*synced).To(ContainElement(bdir))
		for i := range 96 {
			*synced = (*synced)[:0]
			Expect(j.Commit(ctx, Entry{Key: fmt.Appendf(nil, "sync/%03d", i), Value: value})).To(Succeed())
			newest := slices.Max(memLogs(bdir))
			log := filepath.Join(bdir, fmt.Sprintf("%05d%s", newest, memFileExt))
			Expect(*synced).To(ContainElement(log), "commit %d: the log holding it was not synced", i)
			if newest != last {
				at := slices.Index(*synced, log)
				Expect((*synced)[at+1:]).To(ContainElement(bdir), "commit %d: the directory naming the new log %d was not synced after it", i, newest)
				rotations++
				last = newest
			}
		}
		Expect(rotations).To(BeNumerically(">=", 2))
	})

	ginkgo.It("lists the logs again after a write that failed, as memtables may have rotated twice since", func() {
		synced := recordSyncs()
		j, err := Open(dir, Options{})
		Expect(err).NotTo(HaveOccurred())
		defer j.Close()
		ws := j.syncer.(*walSyncer)
		bdir := filepath.Join(dir, badgerDirName)
		ctx := context.Background()
		*synced = (*synced)[:0]
		Expect(j.Commit(ctx, Entry{Key: []byte("a"), Value: []byte("1")})).To(Succeed())
		Expect(*synced).To(HaveLen(1), "the usual case: the followed log alone")
		ws.failedWrite()
		*synced = (*synced)[:0]
		Expect(j.Commit(ctx, Entry{Key: []byte("b"), Value: []byte("2")})).To(Succeed())
		Expect(*synced).To(ContainElement(bdir), "the directory was listed and synced")
		Expect(ws.rescan).To(BeFalse())
	})

	ginkgo.It("lists the logs again after unsynced writes, which may rotate memtables more than once", func() {
		synced := recordSyncs()
		j, err := Open(dir, Options{})
		Expect(err).NotTo(HaveOccurred())
		defer j.Close()
		bdir := filepath.Join(dir, badgerDirName)
		ctx := context.Background()
		start := slices.Max(memLogs(bdir))
		// 96 x 512 KiB = 48 MiB unsynced, buffered or not: 16 MiB memtables
		// rotate at least twice, and Badger may flush and delete the logs in
		// between.
		value := bytes.Repeat([]byte("u"), MaxValueSize)
		for i := range 96 {
			e := Entry{Key: fmt.Appendf(nil, "u/%03d", i), Value: value}
			if i%2 == 0 {
				Expect(j.CommitUnsynced(ctx, e)).To(Succeed())
			} else {
				Expect(j.CommitBuffered(ctx, e)).To(Succeed())
			}
		}
		*synced = (*synced)[:0]
		Expect(j.Commit(ctx, Entry{Key: []byte("after"), Value: []byte("1")})).To(Succeed())
		newest := slices.Max(memLogs(bdir))
		Expect(newest - start).To(BeNumerically(">=", 2))
		log := filepath.Join(bdir, fmt.Sprintf("%05d%s", newest, memFileExt))
		Expect(*synced).To(ContainElement(log), "the log holding the synced commit was synced")
		Expect((*synced)[slices.Index(*synced, log)+1:]).To(ContainElement(bdir), "and then the directory naming it")
		Expect(j.syncer.(*walSyncer).cur).To(Equal(newest))
	})

	ginkgo.It("syncs the followed log alone after unsynced writes that rotated nothing", func() {
		synced := recordSyncs()
		j, err := Open(dir, Options{})
		Expect(err).NotTo(HaveOccurred())
		defer j.Close()
		ws := j.syncer.(*walSyncer)
		ctx := context.Background()
		Expect(j.CommitUnsynced(ctx, Entry{Key: []byte("a"), Value: []byte("1")})).To(Succeed())
		Expect(j.CommitBuffered(ctx, Entry{Key: []byte("b"), Value: []byte("2")})).To(Succeed())
		*synced = (*synced)[:0]
		Expect(j.Commit(ctx, Entry{Key: []byte("c"), Value: []byte("3")})).To(Succeed())
		Expect(*synced).To(Equal([]string{ws.f.Name()}))
		Expect(ws.unsynced).To(BeFalse())
	})

	ginkgo.It("leaves the value log untouched, so skipping its sync loses nothing", func() {
		j, err := Open(dir, Options{})
		Expect(err).NotTo(HaveOccurred())
		ctx := context.Background()
		Expect(j.Commit(ctx, Entry{Key: []byte("big"), Value: bytes.Repeat([]byte("v"), MaxValueSize)})).To(Succeed())
		_, err = j.PutBlob(ctx, bytes.Repeat([]byte("b"), 3*blobChunkSize+1))
		Expect(err).NotTo(HaveOccurred())
		Expect(j.Close()).To(Succeed())

		vlogs, err := filepath.Glob(filepath.Join(dir, badgerDirName, "*.vlog"))
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

	ginkgo.It("falls back to Badger's own Sync where values could reach the value log", func() {
		db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithValueThreshold(1 << 10))
		Expect(err).NotTo(HaveOccurred())
		defer db.Close()
		Expect(newWALSyncer(dir, db)).To(BeIdenticalTo(Syncer(db)))
	})

	ginkgo.It("syncs again after a reopen, starting from the logs it finds", func() {
		for round := range 3 {
			j, err := Open(dir, Options{})
			Expect(err).NotTo(HaveOccurred())
			Expect(j.Commit(context.Background(), Entry{Key: fmt.Appendf(nil, "r/%d", round), Value: []byte("x")})).To(Succeed())
			Expect(j.syncer.(*walSyncer).cur).To(Equal(slices.Max(memLogs(filepath.Join(dir, badgerDirName)))))
			Expect(j.Close()).To(Succeed())
		}
	})
})
