package journal_test

// A SIGKILL cannot reveal a missing fsync (the page cache survives it), so
// these specs check the order of events instead: a commit may be acknowledged
// only after a Sync that started after its write has returned nil.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/journal"
)

type syncFunc func() error

func (f syncFunc) Sync() error { return f() }

// recordingSyncer wraps the real syncer. At the start of each Sync it snapshots
// which keys under prefix are already in Badger (written, not necessarily
// durable); when the real Sync returns nil it marks them covered. A commit
// acknowledged while one of its keys is not covered was acknowledged early.
type recordingSyncer struct {
	db     *badger.DB
	inner  journal.Syncer
	prefix []byte
	delay  time.Duration // before the real sync: makes groups form
	// If failAfter > 0, the first sync after failAfter calls whose group (keys
	// written but not yet covered) holds at least two requests fails with
	// inject instead of syncing.
	failAfter int64
	inject    error

	calls atomic.Int64

	mu             sync.Mutex
	covered        map[string]bool
	failedSnapshot []string
}

func newRecordingSyncer(prefix string, delay time.Duration) (*recordingSyncer, journal.Options) {
	s := &recordingSyncer{prefix: []byte(prefix), delay: delay, covered: map[string]bool{},
		inject: errors.New("injected: disk on fire")}
	return s, journal.Options{NewSyncer: func(db *badger.DB) journal.Syncer {
		s.db, s.inner = db, db
		return s
	}}
}

func (s *recordingSyncer) Sync() error {
	var snapshot []string
	if err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: s.prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			snapshot = append(snapshot, string(it.Item().Key()))
		}
		return nil
	}); err != nil {
		return err
	}
	n := s.calls.Add(1)
	time.Sleep(s.delay)
	s.mu.Lock()
	if s.failAfter > 0 && n > s.failAfter && s.failedSnapshot == nil && s.uncoveredRequests(snapshot) >= 2 {
		s.failedSnapshot = snapshot
		s.mu.Unlock()
		return s.inject
	}
	s.mu.Unlock()
	if err := s.inner.Sync(); err != nil {
		return err
	}
	s.mu.Lock()
	for _, k := range snapshot {
		s.covered[k] = true
	}
	s.mu.Unlock()
	return nil
}

// uncoveredRequests counts the requests (by their "a" key) in snapshot that no
// completed sync covered: the group this sync is for. Called with mu held.
func (s *recordingSyncer) uncoveredRequests(snapshot []string) int {
	n := 0
	for _, k := range snapshot {
		if !s.covered[k] && strings.HasSuffix(k, "/a") {
			n++
		}
	}
	return n
}

func (s *recordingSyncer) isCovered(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.covered[key]
}

// hammer runs writers goroutines committing perWriter two-entry requests under
// prefix (each writer stops at its first error) and returns every outcome by
// request key ("<prefix><w>/<i>/a"), plus the acknowledged keys that were not
// covered by a completed sync at the moment Commit returned.
func hammer(j *journal.Journal, s *recordingSyncer, prefix string, writers, perWriter int) (outcomes map[string]error, early []string) {
	outcomes = map[string]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ctx := context.Background()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			for i := range perWriter {
				a := fmt.Sprintf("%s%02d/%04d/a", prefix, w, i)
				b := fmt.Sprintf("%s%02d/%04d/b", prefix, w, i)
				err := j.Commit(ctx, kv(a, "1"), kv(b, "2"))
				// Check before anything else can run a sync.
				wasEarly := err == nil && !(s.isCovered(a) && s.isCovered(b))
				mu.Lock()
				outcomes[a] = err
				if wasEarly {
					early = append(early, a)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return outcomes, early
}

var _ = Describe("durability ordering (instrumented syncer)", func() {
	It("acknowledges every commit only after a sync that started after its write", func() {
		s, opts := newRecordingSyncer("ord/", 0)
		j, _ := openJournal(opts)
		outcomes, early := hammer(j, s, "ord/", 32, 60)
		Expect(outcomes).To(HaveLen(32 * 60))
		for key, err := range outcomes {
			Expect(err).NotTo(HaveOccurred(), key)
		}
		Expect(early).To(BeEmpty(), "acknowledged before a covering sync completed")
		st := j.Stats()
		Expect(st.Syncs).To(BeNumerically("<", st.Commits), "32 writers should share syncs")
	})

	It("batches concurrent commits behind a slow sync", func() {
		s, opts := newRecordingSyncer("slow/", 2*time.Millisecond)
		j, _ := openJournal(opts)
		before := j.Stats()
		outcomes, early := hammer(j, s, "slow/", 32, 20)
		for key, err := range outcomes {
			Expect(err).NotTo(HaveOccurred(), key)
		}
		Expect(early).To(BeEmpty())
		after := j.Stats()
		commits, syncs := after.Commits-before.Commits, after.Syncs-before.Syncs
		Expect(commits).To(BeEquivalentTo(32 * 20))
		Expect(after.Entries - before.Entries).To(BeEquivalentTo(2 * 32 * 20))
		GinkgoWriter.Printf("slow syncer: %d commits in %d syncs (%.1f per sync)\n", commits, syncs, float64(commits)/float64(syncs))
		Expect(syncs*4).To(BeNumerically("<=", commits), "expected group commit to share syncs")
	})

	It("acknowledges nothing of a group whose sync fails, and refuses writes until reopened", func() {
		s, opts := newRecordingSyncer("fail/", time.Millisecond)
		j, dir := openJournal(opts)
		s.mu.Lock()
		s.failAfter = s.calls.Load() + 5 // a few good syncs first
		s.mu.Unlock()

		outcomes, early := hammer(j, s, "fail/", 16, 200)
		Expect(early).To(BeEmpty())
		s.mu.Lock()
		failedSnapshot := s.failedSnapshot
		s.mu.Unlock()
		Expect(failedSnapshot).NotTo(BeEmpty(), "the failing sync never ran")

		// The group of the failed sync: written, never covered.
		var group []string
		for _, k := range failedSnapshot {
			if !s.isCovered(k) && strings.HasSuffix(k, "/a") {
				group = append(group, k)
			}
		}
		Expect(len(group)).To(BeNumerically(">=", 2), "the failing group should hold several requests")
		for _, k := range group {
			Expect(outcomes[k]).To(MatchError(journal.ErrSyncFailed), k)
			Expect(outcomes[k]).To(MatchError(s.inject), k)
		}
		// Every writer stopped on the sticky error, and nothing acknowledged is uncovered.
		failures := 0
		for k, err := range outcomes {
			if err != nil {
				failures++
				Expect(err).To(MatchError(journal.ErrSyncFailed), k)
			} else {
				Expect(s.isCovered(k)).To(BeTrue(), k)
			}
		}
		Expect(failures).To(Equal(16))

		// Sticky: no more writes, no more syncs.
		calls := s.calls.Load()
		Expect(j.Commit(context.Background(), kv("fail/later", "x"))).To(MatchError(journal.ErrSyncFailed))
		Expect(s.calls.Load()).To(Equal(calls))
		_, err := j.Get([]byte("fail/later"))
		Expect(err).To(MatchError(journal.ErrNotFound))

		// Reopening starts afresh from what is on disk.
		Expect(j.Close()).To(Succeed())
		j2 := openAt(dir, journal.Options{})
		Expect(j2.Commit(context.Background(), kv("fail/after-reopen", "x"))).To(Succeed())
	})
})
