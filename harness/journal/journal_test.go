package journal_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/journal"
)

// openJournal opens a journal in a fresh state dir and closes it after the spec.
func openJournal(opts journal.Options) (*journal.Journal, string) {
	GinkgoHelper()
	dir := filepath.Join(GinkgoT().TempDir(), "state")
	return openAt(dir, opts), dir
}

func openAt(dir string, opts journal.Options) *journal.Journal {
	GinkgoHelper()
	j, err := journal.Open(dir, opts)
	DeferCleanup(func() {
		if j != nil {
			_ = j.Close()
		}
	})
	Expect(err).NotTo(HaveOccurred())
	return j
}

// withBadger opens the journal's Badger files directly, for tampering and for
// checking what is on disk behind the package's back.
func withBadger(dir string, fn func(db *badger.DB)) {
	GinkgoHelper()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "journal")).WithLogger(nil))
	Expect(err).NotTo(HaveOccurred())
	defer func() { Expect(db.Close()).To(Succeed()) }()
	fn(db)
}

func kv(k, v string) journal.Entry { return journal.Entry{Key: []byte(k), Value: []byte(v)} }

func scanAll(j *journal.Journal, prefix string) []string {
	GinkgoHelper()
	var got []string
	Expect(j.Scan([]byte(prefix), func(k, v []byte) error {
		got = append(got, string(k)+"="+string(v))
		return nil
	})).To(Succeed())
	return got
}

var _ = Describe("Journal", func() {
	var ctx context.Context
	BeforeEach(func() { ctx = context.Background() })

	Describe("Open", func() {
		It("creates the state dir 0700 with Badger in journal/ and the owner lock", func() {
			j, dir := openJournal(journal.Options{})
			Expect(j.Dir()).To(Equal(dir))
			info, err := os.Stat(dir)
			Expect(err).NotTo(HaveOccurred())
			Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o700)))
			Expect(filepath.Join(dir, "journal", "MANIFEST")).To(BeAnExistingFile())

			raw, err := os.ReadFile(filepath.Join(dir, "overnight.lock"))
			Expect(err).NotTo(HaveOccurred())
			var rec struct {
				PID     int       `json:"pid"`
				Command string    `json:"command"`
				Since   time.Time `json:"since"`
			}
			Expect(json.Unmarshal(raw, &rec)).To(Succeed())
			Expect(rec.PID).To(Equal(os.Getpid()))
			Expect(rec.Command).To(Equal(strings.Join(os.Args, " ")))
			Expect(rec.Since).To(BeTemporally("~", time.Now(), time.Minute))
		})

		It("stamps a new journal with the format version", func() {
			j, _ := openJournal(journal.Options{})
			Expect(j.Get([]byte("meta/format"))).To(Equal([]byte(journal.FormatVersion)))
		})

		It("keeps committed data across Close and reopen", func() {
			j, dir := openJournal(journal.Options{})
			Expect(j.Commit(ctx, kv("run/1", "one"), kv("run/2", "two"))).To(Succeed())
			hash, err := j.PutBlob(ctx, []byte("payload"))
			Expect(err).NotTo(HaveOccurred())
			Expect(j.Close()).To(Succeed())

			j2 := openAt(dir, journal.Options{})
			Expect(scanAll(j2, "run/")).To(Equal([]string{"run/1=one", "run/2=two"}))
			Expect(j2.Blob(hash)).To(Equal([]byte("payload")))
		})

		It("refuses a journal of another format with a FormatError and rewrites nothing", func() {
			j, dir := openJournal(journal.Options{})
			Expect(j.Commit(ctx, kv("run/1", "one"))).To(Succeed())
			Expect(j.Close()).To(Succeed())
			withBadger(dir, func(db *badger.DB) {
				Expect(db.Update(func(txn *badger.Txn) error {
					return txn.Set([]byte("meta/format"), []byte("99"))
				})).To(Succeed())
			})

			for range 2 { // the second attempt proves the lock was released
				_, err := journal.Open(dir, journal.Options{})
				Expect(err).To(MatchError(journal.ErrFormat))
				var fe *journal.FormatError
				Expect(errors.As(err, &fe)).To(BeTrue())
				Expect(*fe).To(Equal(journal.FormatError{Dir: dir, Found: "99", Want: journal.FormatVersion}))
				Expect(err.Error()).To(Equal(fmt.Sprintf(
					"state dir %s holds journal format 99; this build reads format %s: use a matching overnight build or another --state dir",
					dir, journal.FormatVersion)))
			}
			withBadger(dir, func(db *badger.DB) {
				Expect(db.View(func(txn *badger.Txn) error {
					item, err := txn.Get([]byte("meta/format"))
					Expect(err).NotTo(HaveOccurred())
					Expect(item.ValueCopy(nil)).To(Equal([]byte("99")))
					item, err = txn.Get([]byte("run/1"))
					Expect(err).NotTo(HaveOccurred())
					Expect(item.ValueCopy(nil)).To(Equal([]byte("one")))
					return nil
				})).To(Succeed())
			})
		})

		It("refuses a Badger database that holds data but no format key", func() {
			dir := filepath.Join(GinkgoT().TempDir(), "state")
			Expect(os.MkdirAll(filepath.Join(dir, "journal"), 0o700)).To(Succeed())
			withBadger(dir, func(db *badger.DB) {
				Expect(db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("x"), []byte("y")) })).To(Succeed())
			})
			_, err := journal.Open(dir, journal.Options{})
			var fe *journal.FormatError
			Expect(errors.As(err, &fe)).To(BeTrue())
			Expect(fe.Found).To(BeEmpty())
			Expect(err.Error()).To(ContainSubstring("holds journal format (none)"))
		})

		It("wraps a damaged database with advice, deletes nothing and releases the lock", func() {
			j, dir := openJournal(journal.Options{})
			Expect(j.Close()).To(Succeed())
			manifest := filepath.Join(dir, "journal", "MANIFEST")
			Expect(os.WriteFile(manifest, []byte("this is not a badger manifest"), 0o600)).To(Succeed())
			before, err := os.ReadDir(filepath.Join(dir, "journal"))
			Expect(err).NotTo(HaveOccurred())

			for range 2 { // a LockedError the second time would mean a leaked lock
				_, err := journal.Open(dir, journal.Options{})
				Expect(err).To(HaveOccurred())
				Expect(err).NotTo(MatchError(journal.ErrLocked))
				Expect(err.Error()).To(ContainSubstring(dir))
				Expect(err.Error()).To(ContainSubstring("the state dir may be damaged; move it aside or use another --state"))
			}
			after, err := os.ReadDir(filepath.Join(dir, "journal"))
			Expect(err).NotTo(HaveOccurred())
			Expect(names(after)).To(ConsistOf(names(before)))
			Expect(os.ReadFile(manifest)).To(Equal([]byte("this is not a badger manifest")))
		})

		for _, name := range []string{"000099.vlog", "000099.mem"} {
			It("opens past a zero-length "+name+" left by a kill during file creation, setting it aside", func() {
				j, dir := openJournal(journal.Options{})
				Expect(j.Commit(ctx, kv("run/1", "kept"))).To(Succeed())
				Expect(j.Close()).To(Succeed())
				// What a SIGKILL between Badger's open(O_CREAT) and its
				// ftruncate leaves behind; plain badger.Open fails on it.
				empty := filepath.Join(dir, "journal", name)
				Expect(os.WriteFile(empty, nil, 0o600)).To(Succeed())

				var logs bytes.Buffer
				j2 := openAt(dir, journal.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
				Expect(j2.Get([]byte("run/1"))).To(Equal([]byte("kept")))
				Expect(j2.Commit(ctx, kv("run/2", "new"))).To(Succeed())
				Expect(empty + ".empty-after-crash").To(BeAnExistingFile())
				Expect(logs.String()).To(ContainSubstring("set aside an empty Badger log file"))
			})
		}

		It("refuses a second Open in the same process with a LockedError", func() {
			_, dir := openJournal(journal.Options{})
			_, err := journal.Open(dir, journal.Options{})
			Expect(err).To(MatchError(journal.ErrLocked))
			var le *journal.LockedError
			Expect(errors.As(err, &le)).To(BeTrue())
			Expect(le.PID).To(Equal(os.Getpid()))
		})

		It("names the pid of another process that owns the state dir, and opens once it is SIGKILLed", func() {
			dir := filepath.Join(GinkgoT().TempDir(), "state")
			holder := startHelper("hold", dir)
			Expect(holder.waitLine(30 * time.Second)).To(Equal(fmt.Sprintf("ready %d", holder.cmd.Process.Pid)))

			_, err := journal.Open(dir, journal.Options{})
			Expect(err).To(MatchError(journal.ErrLocked))
			var le *journal.LockedError
			Expect(errors.As(err, &le)).To(BeTrue())
			Expect(le.Dir).To(Equal(dir))
			Expect(le.PID).To(Equal(holder.cmd.Process.Pid))
			Expect(le.Command).To(HavePrefix(holder.cmd.Path))
			Expect(le.Since).To(BeTemporally("~", time.Now(), time.Minute))
			Expect(err.Error()).To(HavePrefix(fmt.Sprintf("state dir %s is in use by pid %d (command ", dir, le.PID)))
			Expect(err.Error()).To(HaveSuffix("; wait for it or use another --state"))

			holder.kill() // SIGKILL: no cleanup ran, the lock file still names the dead pid
			Expect(filepath.Join(dir, "overnight.lock")).To(BeAnExistingFile())
			j := openAt(dir, journal.Options{})
			Expect(j.Commit(ctx, kv("run/after", "kill"))).To(Succeed())
		})
	})

	Describe("Commit and reads", func() {
		var j *journal.Journal
		BeforeEach(func() { j, _ = openJournal(journal.Options{}) })

		It("gets what was committed, and ErrNotFound for anything else", func() {
			Expect(j.Commit(ctx, kv("run/1", "a"), kv("ev/1/0001", "b"))).To(Succeed())
			Expect(j.Get([]byte("run/1"))).To(Equal([]byte("a")))
			Expect(j.Get([]byte("ev/1/0001"))).To(Equal([]byte("b")))
			_, err := j.Get([]byte("run/2"))
			Expect(err).To(MatchError(journal.ErrNotFound))
		})

		It("returns copies, and copies the caller's entries", func() {
			key, value := []byte("run/1"), []byte("abc")
			Expect(j.Commit(ctx, journal.Entry{Key: key, Value: value})).To(Succeed())
			key[0], value[0] = 'X', 'X'
			got, err := j.Get([]byte("run/1"))
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(Equal([]byte("abc")))
			got[0] = 'Y'
			Expect(j.Get([]byte("run/1"))).To(Equal([]byte("abc")))
		})

		It("overwrites with the latest commit and treats an empty commit as a no-op", func() {
			Expect(j.Commit(ctx, kv("run/1", "a"))).To(Succeed())
			Expect(j.Commit(ctx, kv("run/1", "b"))).To(Succeed())
			Expect(j.Commit(ctx)).To(Succeed())
			Expect(j.Get([]byte("run/1"))).To(Equal([]byte("b")))
		})

		It("scans one prefix in ascending byte order and nothing outside it", func() {
			Expect(j.Commit(ctx,
				kv("run/2", "2"), kv("run/10", "10"), kv("run/1", "1"),
				kv("ru", "x"), kv("run", "x"), kv("ruo", "x"), kv("ev/run/1", "x"),
			)).To(Succeed())
			Expect(j.Commit(ctx, journal.Entry{Key: []byte("run/\xff"), Value: []byte("ff")})).To(Succeed())
			Expect(scanAll(j, "run/")).To(Equal([]string{"run/1=1", "run/10=10", "run/2=2", "run/\xff=ff"}))
			Expect(scanAll(j, "nothing/")).To(BeEmpty())
			Expect(scanAll(j, "")).To(ContainElements("meta/format="+journal.FormatVersion, "ev/run/1=x", "ru=x"))
		})

		It("stops a scan at the callback's error and returns it", func() {
			for i := range 5 {
				Expect(j.Commit(ctx, kv(fmt.Sprintf("ev/r/%d", i), "v"))).To(Succeed())
			}
			stop := errors.New("stop here")
			calls := 0
			err := j.Scan([]byte("ev/r/"), func(k, v []byte) error {
				calls++
				if calls == 2 {
					return stop
				}
				return nil
			})
			Expect(err).To(BeIdenticalTo(stop))
			Expect(calls).To(Equal(2))
		})

		It("finds the greatest key under a prefix with Last", func() {
			Expect(j.Commit(ctx,
				kv("ev/a/0001", "1"), kv("ev/a/0002", "2"), kv("ev/a/0010", "10"),
				kv("ev/b/0001", "b"), kv("ev/a", "bare"), kv("ev/a0", "next"),
			)).To(Succeed())
			k, v, err := j.Last([]byte("ev/a/"))
			Expect(err).NotTo(HaveOccurred())
			Expect(string(k)).To(Equal("ev/a/0010"))
			Expect(string(v)).To(Equal("10"))

			// "ev/a0" is prefixEnd("ev/a/") itself: it must be skipped.
			k, _, err = j.Last([]byte("ev/a/"))
			Expect(err).NotTo(HaveOccurred())
			Expect(string(k)).To(Equal("ev/a/0010"))

			_, _, err = j.Last([]byte("ev/c/"))
			Expect(err).To(MatchError(journal.ErrNotFound))
			_, _, err = j.Last([]byte("zzz"))
			Expect(err).To(MatchError(journal.ErrNotFound))

			Expect(j.Commit(ctx, journal.Entry{Key: []byte("ev/a/\xff\xff\x01"), Value: []byte("top")})).To(Succeed())
			k, _, err = j.Last([]byte("ev/a/"))
			Expect(err).NotTo(HaveOccurred())
			Expect(k).To(Equal([]byte("ev/a/\xff\xff\x01")))
			k, _, err = j.Last([]byte("ev/a/\xff"))
			Expect(err).NotTo(HaveOccurred())
			Expect(k).To(Equal([]byte("ev/a/\xff\xff\x01")))

			Expect(j.Commit(ctx, journal.Entry{Key: []byte("\xff\xff"), Value: []byte("last")})).To(Succeed())
			k, _, err = j.Last([]byte("\xff"))
			Expect(err).NotTo(HaveOccurred())
			Expect(k).To(Equal([]byte("\xff\xff")))
			k, _, err = j.Last(nil)
			Expect(err).NotTo(HaveOccurred())
			Expect(k).To(Equal([]byte("\xff\xff")))
		})

		It("refuses invalid keys and oversized values before writing anything", func() {
			before := j.Stats()
			for _, bad := range []journal.Entry{
				{Key: nil, Value: []byte("v")},
				{Key: []byte("meta/format"), Value: []byte("2")},
				{Key: []byte("blob/abc"), Value: []byte("v")},
				{Key: []byte("!badger!head"), Value: []byte("v")},
				{Key: bytes.Repeat([]byte("k"), journal.MaxKeySize+1), Value: []byte("v")},
			} {
				err := j.Commit(ctx, kv("run/ok", "ok"), bad)
				Expect(err).To(MatchError(journal.ErrInvalidKey), "key %.30q", bad.Key)
			}
			err := j.Commit(ctx, kv("run/ok", "ok"), journal.Entry{Key: []byte("run/big"), Value: make([]byte, journal.MaxValueSize+1)})
			Expect(err).To(MatchError(journal.ErrTooLarge))
			Expect(err.Error()).To(ContainSubstring("PutBlob"))

			// Each value is allowed, together they exceed one atomic write.
			var many []journal.Entry
			for i := range 8 {
				many = append(many, journal.Entry{Key: fmt.Appendf(nil, "run/many/%d", i), Value: make([]byte, journal.MaxValueSize)})
			}
			err = j.Commit(ctx, many...)
			Expect(err).To(MatchError(journal.ErrTooLarge))
			Expect(err.Error()).To(ContainSubstring("split it into smaller commits"))

			Expect(j.Stats()).To(Equal(before))
			Expect(scanAll(j, "run/")).To(BeEmpty())
			Expect(j.Get([]byte("meta/format"))).To(Equal([]byte(journal.FormatVersion)))
		})

		It("returns ctx.Err() for a cancelled context without writing", func() {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			Expect(j.Commit(cctx, kv("run/1", "a"))).To(MatchError(context.Canceled))
			_, err := j.Get([]byte("run/1"))
			Expect(err).To(MatchError(journal.ErrNotFound))
		})

		It("commits large requests that share a group in several transactions, none split", func() {
			// Block the first sync so that the next requests queue up and land
			// in one group, too big for one Badger transaction.
			gate := make(chan struct{})
			var gated sync.Once
			var armed atomic.Bool
			j2, _ := openJournal(journal.Options{NewSyncer: func(db *badger.DB) journal.Syncer {
				return syncFunc(func() error {
					if armed.Load() {
						gated.Do(func() { <-gate })
					}
					return db.Sync()
				})
			}})
			armed.Store(true)
			before := j2.Stats()

			const requests, parts = 8, 3
			value := func(r, p int) []byte { return bytes.Repeat([]byte{byte('a' + r), byte('0' + p)}, 150<<10) } // 300 KiB
			errs := make(chan error, requests)
			for r := range requests {
				go func() {
					var entries []journal.Entry
					for p := range parts {
						entries = append(entries, journal.Entry{Key: fmt.Appendf(nil, "big/%d/%d", r, p), Value: value(r, p)})
					}
					errs <- j2.Commit(ctx, entries...)
				}()
			}
			time.Sleep(300 * time.Millisecond) // let them queue behind the gate
			close(gate)
			for range requests {
				Eventually(errs).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
			}
			for r := range requests {
				for p := range parts {
					Expect(j2.Get(fmt.Appendf(nil, "big/%d/%d", r, p))).To(Equal(value(r, p)))
				}
			}
			after := j2.Stats()
			Expect(after.Commits - before.Commits).To(BeEquivalentTo(requests))
			// 8 x 900 KiB cannot go in fewer than 3 transactions of ~2.4 MiB.
			Expect(after.Syncs - before.Syncs).To(BeNumerically(">=", 3))
		})
	})

	Describe("blobs", func() {
		var j *journal.Journal
		var dir string
		BeforeEach(func() { j, dir = openJournal(journal.Options{}) })

		sha := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

		It("stores content under its sha256 and reads it back", func() {
			for _, size := range []int{0, 1, 1000, 512 << 10, 512<<10 + 1, 5<<20 + 17} {
				data := make([]byte, size)
				_, _ = rand.Read(data)
				hash, err := j.PutBlob(ctx, data)
				Expect(err).NotTo(HaveOccurred())
				Expect(hash).To(Equal(sha(data)))
				Expect(j.Blob(hash)).To(Equal(data), "size %d", size)
			}
		})

		It("is idempotent: the same content again writes nothing", func() {
			data := []byte("the same bytes")
			h1, err := j.PutBlob(ctx, data)
			Expect(err).NotTo(HaveOccurred())
			before := j.Stats()
			h2, err := j.PutBlob(ctx, bytes.Clone(data))
			Expect(err).NotTo(HaveOccurred())
			Expect(h2).To(Equal(h1))
			Expect(j.Stats()).To(Equal(before))
		})

		It("accepts a blob of exactly 64 MiB and refuses one byte more", func() {
			data := make([]byte, journal.MaxBlobSize)
			_, _ = rand.Read(data)
			start := time.Now()
			hash, err := j.PutBlob(ctx, data)
			Expect(err).NotTo(HaveOccurred())
			GinkgoWriter.Printf("PutBlob of 64 MiB took %s\n", time.Since(start))
			Expect(hash).To(Equal(sha(data)))
			got, err := j.Blob(hash)
			Expect(err).NotTo(HaveOccurred())
			Expect(bytes.Equal(got, data)).To(BeTrue())

			_, err = j.PutBlob(ctx, make([]byte, journal.MaxBlobSize+1))
			Expect(err).To(MatchError(journal.ErrTooLarge))
			Expect(err.Error()).To(ContainSubstring("limit is 67108864"))
		})

		It("returns ErrNotFound for unknown or malformed hashes", func() {
			_, err := j.Blob(sha([]byte("never stored")))
			Expect(err).To(MatchError(journal.ErrNotFound))
			_, err = j.Blob("not-a-hash")
			Expect(err).To(MatchError(journal.ErrNotFound))
			_, err = j.Blob(strings.ToUpper(sha([]byte("x"))))
			Expect(err).To(MatchError(journal.ErrNotFound))
		})

		It("verifies the hash on read", func() {
			data := bytes.Repeat([]byte("0123456789abcdef"), 70_000) // > 1 MiB: 3 chunks
			hash, err := j.PutBlob(ctx, data)
			Expect(err).NotTo(HaveOccurred())
			Expect(j.Close()).To(Succeed())

			var chunkKeys [][]byte
			withBadger(dir, func(db *badger.DB) {
				Expect(db.Update(func(txn *badger.Txn) error {
					it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("blob/" + hash + "/")})
					for it.Rewind(); it.Valid(); it.Next() {
						chunkKeys = append(chunkKeys, it.Item().KeyCopy(nil))
					}
					it.Close()
					Expect(chunkKeys).To(HaveLen(3))
					item, err := txn.Get(chunkKeys[1])
					Expect(err).NotTo(HaveOccurred())
					chunk, err := item.ValueCopy(nil)
					Expect(err).NotTo(HaveOccurred())
					chunk[100] ^= 0x01 // one flipped bit
					return txn.Set(chunkKeys[1], chunk)
				})).To(Succeed())
			})
			j2 := openAt(dir, journal.Options{})
			_, err = j2.Blob(hash)
			Expect(err).To(MatchError(journal.ErrBlobCorrupt))
			Expect(err.Error()).To(ContainSubstring(hash))
		})
	})

	Describe("Close", func() {
		It("refuses every call afterwards with ErrClosed; a second Close is a no-op", func() {
			j, _ := openJournal(journal.Options{})
			hash, err := j.PutBlob(ctx, []byte("x"))
			Expect(err).NotTo(HaveOccurred())
			Expect(j.Close()).To(Succeed())
			Expect(j.Close()).To(Succeed())

			Expect(j.Commit(ctx, kv("run/1", "a"))).To(MatchError(journal.ErrClosed))
			_, err = j.Get([]byte("meta/format"))
			Expect(err).To(MatchError(journal.ErrClosed))
			Expect(j.Scan(nil, func(k, v []byte) error { return nil })).To(MatchError(journal.ErrClosed))
			_, _, err = j.Last(nil)
			Expect(err).To(MatchError(journal.ErrClosed))
			_, err = j.PutBlob(ctx, []byte("y"))
			Expect(err).To(MatchError(journal.ErrClosed))
			_, err = j.Blob(hash)
			Expect(err).To(MatchError(journal.ErrClosed))
		})

		It("drains commits in flight: each one is durable or fails with ErrClosed", func() {
			j, dir := openJournal(journal.Options{})
			const writers = 16
			var wg sync.WaitGroup
			var mu sync.Mutex
			acked := map[string]bool{}
			stopErrs := make(chan error, writers)
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 10_000; i++ {
						key := fmt.Sprintf("run/%02d/%05d", w, i)
						err := j.Commit(ctx, kv(key, key))
						if err != nil {
							stopErrs <- err
							return
						}
						mu.Lock()
						acked[key] = true
						mu.Unlock()
					}
				}()
			}
			time.Sleep(100 * time.Millisecond)
			Expect(j.Close()).To(Succeed())
			wg.Wait()
			close(stopErrs)
			Expect(stopErrs).To(HaveLen(writers), "every writer should have been stopped by Close")
			for err := range stopErrs {
				Expect(err).To(MatchError(journal.ErrClosed))
			}

			Expect(acked).NotTo(BeEmpty())
			j2 := openAt(dir, journal.Options{})
			for key := range acked {
				Expect(j2.Get([]byte(key))).To(Equal([]byte(key)))
			}
		})
	})
})

func names(entries []os.DirEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
