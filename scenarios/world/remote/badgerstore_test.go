package remote_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

var _ = Describe("the Badger store", func() {
	It("commits, gets and scans, and keeps it all when opened again", func() {
		dir := GinkgoT().TempDir()
		s, err := remote.OpenBadgerStore(dir, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Commit(GinkgoT().Context(), world.Entry{Key: []byte("a/2"), Value: []byte("two")}, world.Entry{Key: []byte("a/1"), Value: []byte("one")},
			world.Entry{Key: []byte("b/1"), Value: []byte("other")})).To(Succeed())
		_, err = s.Get([]byte("a/3"))
		Expect(err).To(MatchError(world.ErrNotFound))

		_, err = remote.OpenBadgerStore(dir, nil)
		Expect(err).To(MatchError(ContainSubstring("another process has it open")))
		Expect(s.Close()).To(Succeed())

		s, err = remote.OpenBadgerStore(dir, nil)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(s.Close)
		v, err := s.Get([]byte("a/1"))
		Expect(err).NotTo(HaveOccurred())
		Expect(v).To(Equal([]byte("one")))
		var keys []string
		Expect(s.Scan([]byte("a/"), func(k, v []byte) error {
			keys = append(keys, string(k)+"="+string(v))
			return nil
		})).To(Succeed())
		Expect(keys).To(Equal([]string{"a/1=one", "a/2=two"}), "in key order, under the prefix alone")
		stop := errors.New("stop")
		Expect(s.Scan(nil, func(k, _ []byte) error { return stop })).To(MatchError(stop))
	})

	It("syncs every commit through the memtable's log alone, across rotations, and never writes the value log", func() {
		dir := GinkgoT().TempDir()
		s, err := remote.OpenBadgerStore(dir, nil)
		Expect(err).NotTo(HaveOccurred())
		newest := func() string {
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
		// 80 x 512 KiB = 40 MiB: 16 MiB memtables rotate at least twice.
		value := bytes.Repeat([]byte("w"), remote.MaxStoreValue)
		logs := map[string]bool{}
		for i := range 80 {
			Expect(s.Commit(GinkgoT().Context(), world.Entry{Key: fmt.Appendf(nil, "w/%02d", i), Value: value})).To(Succeed())
			Expect(s.WALLog()).To(Equal(newest()), "commit %d: the log holding it is the one synced", i)
			logs[s.WALLog()] = true
		}
		Expect(len(logs)).To(BeNumerically(">=", 3))

		err = s.Commit(GinkgoT().Context(), world.Entry{Key: []byte("small"), Value: []byte("1")},
			world.Entry{Key: []byte("big"), Value: make([]byte, remote.MaxStoreValue+1)})
		Expect(err).To(MatchError(And(ContainSubstring(`"big"`), ContainSubstring("nothing was written"))))
		Expect(s.Close()).To(Succeed())

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
		s, err = remote.OpenBadgerStore(dir, nil)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(s.Close)
		for i := range 80 {
			v, err := s.Get(fmt.Appendf(nil, "w/%02d", i))
			Expect(err).NotTo(HaveOccurred())
			Expect(v).To(Equal(value))
		}
		_, err = s.Get([]byte("small"))
		Expect(err).To(MatchError(world.ErrNotFound), "a refused commit writes none of its entries")
	})

	It("sets aside an empty log a crash left, which would fail every open", func() {
		dir := GinkgoT().TempDir()
		s, err := remote.OpenBadgerStore(dir, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Commit(GinkgoT().Context(), world.Entry{Key: []byte("k"), Value: []byte("v")})).To(Succeed())
		Expect(s.Close()).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "000099.vlog"), nil, 0o600)).To(Succeed())
		s, err = remote.OpenBadgerStore(dir, nil)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(s.Close)
		Expect(filepath.Join(dir, "000099.vlog.empty-after-crash")).To(BeAnExistingFile())
		v, err := s.Get([]byte("k"))
		Expect(err).NotTo(HaveOccurred())
		Expect(v).To(Equal([]byte("v")))
	})

	It("keeps a served world across a restart of its server", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		serveOn := func() (*remote.Client, func()) {
			s, err := remote.OpenBadgerStore(dir, nil)
			Expect(err).NotTo(HaveOccurred())
			srv, err := remote.NewServer(ctx, cloud.Definition(), s, nil)
			Expect(err).NotTo(HaveOccurred())
			hs := httptest.NewServer(srv)
			return dial(ctx, hs.URL, remote.Config{}), func() { hs.Close(); Expect(s.Close()).To(Succeed()) }
		}
		cl, stop := serveOn()
		outs := script(ctx, cl, "")
		before, err := cl.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		stop()

		cl, stop = serveOn()
		DeferCleanup(stop)
		Expect(cl.APIVersion()).To(Equal(cloud.V2), "the version is durable state")
		after, err := cl.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(after).To(Equal(before))
		o, found, err := cl.Lookup(ctx, "k/3")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(o).To(Equal(outs[2]))
		next := apply(ctx, cl, req("k/next", cloud.KindIssueAPIKey, `{}`, 50))
		Expect(bytes.Contains(next.Result, []byte("key-2"))).To(BeTrue(), "the world goes on from its state: %s", next.Result)
	})
})
