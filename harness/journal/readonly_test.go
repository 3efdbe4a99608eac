package journal_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/journal"
)

var _ = Describe("a read-only journal (a moment's look)", func() {
	ctx := context.Background()

	It("reads what was committed, refuses writes, needs an existing journal, and tells a write from none by its version", func() {
		j, dir := openJournal(journal.Options{})
		Expect(j.Commit(ctx, kv("run/1", "a"))).To(Succeed())
		v1, err := j.Version()
		Expect(err).NotTo(HaveOccurred())
		Expect(j.Close()).To(Succeed())

		ro := openAt(dir, journal.Options{ReadOnly: true})
		Expect(ro.Get([]byte("run/1"))).To(Equal([]byte("a")))
		Expect(ro.Version()).To(Equal(v1))
		Expect(ro.Commit(ctx, kv("run/2", "b"))).NotTo(Succeed())
		Expect(ro.CommitBuffered(ctx, kv("run/2", "b"))).To(MatchError(ContainSubstring("read-only")), "refused at once, not at the next read")
		Expect(ro.Close()).To(Succeed())

		rw := openAt(dir, journal.Options{})
		Expect(rw.Get([]byte("run/2"))).Error().To(MatchError(journal.ErrNotFound), "the refused write left nothing")
		Expect(rw.Version()).To(Equal(v1), "opening and reading write nothing")
		Expect(rw.Commit(ctx, kv("run/2", "b"))).To(Succeed())
		Expect(rw.Version()).To(BeNumerically(">", v1))
		Expect(rw.Close()).To(Succeed())

		missing := filepath.Join(GinkgoT().TempDir(), "none")
		_, err = journal.Open(missing, journal.Options{ReadOnly: true})
		Expect(err).To(HaveOccurred())
		Expect(missing).NotTo(BeADirectory(), "a read-only open creates no state dir")
	})

	It("makes an Open meanwhile wait for it instead of failing, in another process too", func() {
		j, dir := openJournal(journal.Options{})
		Expect(j.Commit(ctx, kv("run/1", "a"))).To(Succeed())
		Expect(j.Close()).To(Succeed())

		ro := openAt(dir, journal.Options{ReadOnly: true})
		opened := make(chan error, 1)
		go func() {
			rw, err := journal.Open(dir, journal.Options{})
			if err == nil {
				err = rw.Close()
			}
			opened <- err
		}()
		Consistently(opened, 200*time.Millisecond).ShouldNot(Receive(), "the Open waits while the look lasts")
		Expect(ro.Close()).To(Succeed())
		Eventually(opened, 5*time.Second).Should(Receive(BeNil()))

		ro = openAt(dir, journal.Options{ReadOnly: true})
		holder := startHelper("hold", dir)
		time.AfterFunc(300*time.Millisecond, func() { _ = ro.Close() })
		Expect(holder.waitLine(30*time.Second)).To(Equal(fmt.Sprintf("ready %d", holder.cmd.Process.Pid)),
			"a process that opens while the look lasts gets the state dir once it is over")
	})

	It("still refuses at once an Open while a process owns the state dir, and waits no more than BriefWait for a look", func() {
		_, dir := openJournal(journal.Options{})
		start := time.Now()
		_, err := journal.Open(dir, journal.Options{ReadOnly: true})
		Expect(err).To(MatchError(journal.ErrLocked))
		Expect(time.Since(start)).To(BeNumerically("<", time.Second), "an owner that is not brief is not waited for")
	})

	It("recovers the journal a SIGKILLed owner left, then reads every acknowledged write", func() {
		dir := filepath.Join(GinkgoT().TempDir(), "state")
		writer := startHelper("crash", dir, helperIterEnv+"=1")
		Expect(writer.waitLine(30 * time.Second)).To(Equal("ready"))
		var acked []string
		for len(acked) < 50 {
			acked = append(acked, writer.waitLine(30*time.Second))
		}
		acked = append(acked, writer.killAndCollect()...)
		memLogs, err := filepath.Glob(filepath.Join(dir, "journal", "*.mem"))
		Expect(err).NotTo(HaveOccurred())
		Expect(memLogs).NotTo(BeEmpty(), "the dead owner left its memtable log")

		ro := openAt(dir, journal.Options{ReadOnly: true})
		for _, line := range acked {
			var w, i int
			if _, err := fmt.Sscanf(line, "ack %d %d", &w, &i); err != nil {
				continue
			}
			prefix, entries := crashRequest(1, w, i)
			Expect(scanAll(ro, prefix)).To(HaveLen(len(entries)), "acknowledged request %s", prefix)
		}
		Expect(ro.Close()).To(Succeed())
		after, err := os.ReadDir(filepath.Join(dir, "journal"))
		Expect(err).NotTo(HaveOccurred())
		for _, e := range after {
			Expect(strings.HasSuffix(e.Name(), ".mem")).To(BeFalse(), "recovered: %s", e.Name())
		}
	})
})
