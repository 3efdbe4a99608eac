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

// The log syncer itself is tested in scenarios/world/walsync; these specs
// check the journal's use of it.

// newestLog is the path of the newest memtable log in a Badger dir.
func newestLog(dir string) string {
	ents, err := os.ReadDir(dir)
	Expect(err).NotTo(HaveOccurred())
	var fids []int
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".mem"); ok {
			fid, err := strconv.Atoi(n)
			Expect(err).NotTo(HaveOccurred())
			fids = append(fids, fid)
		}
	}
	Expect(fids).NotTo(BeEmpty())
	return filepath.Join(dir, fmt.Sprintf("%05d.mem", slices.Max(fids)))
}

var _ = ginkgo.Describe("the WAL syncer", func() {
	var dir string
	ginkgo.BeforeEach(func() { dir = ginkgo.GinkgoT().TempDir() })

	ginkgo.It("is the default and follows the newest memtable log across rotations", func() {
		j, err := Open(dir, Options{})
		Expect(err).NotTo(HaveOccurred())
		defer j.Close()
		ws := j.walSyncer()
		Expect(ws).NotTo(BeNil(), "the default syncer is %T", j.syncer)

		// 128 x 512 KiB = 64 MiB: 16 MiB memtables fill and rotate several times.
		ctx := context.Background()
		value := bytes.Repeat([]byte("w"), MaxValueSize)
		followed := map[string]bool{}
		for i := range 128 {
			Expect(j.Commit(ctx, Entry{Key: fmt.Appendf(nil, "wal/%03d", i), Value: value})).To(Succeed())
			Expect(ws.Log()).To(Equal(newestLog(filepath.Join(dir, badgerDirName))), "after commit %d", i)
			followed[ws.Log()] = true
		}
		Expect(len(followed)).To(BeNumerically(">=", 3), "memtables rotated at least twice")
		for i := range 128 {
			got, err := j.Get(fmt.Appendf(nil, "wal/%03d", i))
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(Equal(value))
		}
	})

	ginkgo.It("is told of unsynced writes, which may rotate memtables more than once", func() {
		j, err := Open(dir, Options{})
		Expect(err).NotTo(HaveOccurred())
		defer j.Close()
		bdir := filepath.Join(dir, badgerDirName)
		ctx := context.Background()
		start := j.walSyncer().Log()
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
		Expect(j.Commit(ctx, Entry{Key: []byte("after"), Value: []byte("1")})).To(Succeed())
		Expect(j.walSyncer().Log()).NotTo(Equal(start))
		Expect(j.walSyncer().Log()).To(Equal(newestLog(bdir)), "the log holding the synced commit is followed")
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
			Expect(j.walSyncer().Log()).To(Equal(newestLog(filepath.Join(dir, badgerDirName))))
			Expect(j.Close()).To(Succeed())
		}
	})
})
