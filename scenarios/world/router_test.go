package world_test

import (
	"context"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// routed opens, in store, the notes world (unprefixed) and a journal
// standing for a world elsewhere ("ext."), behind a router.
func routed(store world.Store) (world.World, *world.Ledgered) {
	GinkgoHelper()
	ctx := context.Background()
	order, err := world.NewOrder(store, []byte("w/~order/"))
	Expect(err).NotTo(HaveOccurred())
	base, err := world.Definition{Name: "notes", Open: openNotes}.Instance(ctx, order.Store(0, []byte("w/"), nil), []byte("w/"), nil)
	Expect(err).NotTo(HaveOccurred())
	ext, err := world.OpenJournal("ext", order.Store(1, []byte("w/~ext/"), nil), []byte("w/~ext/"))
	Expect(err).NotTo(HaveOccurred())
	r := world.NewRouter("notes+ext", order, []world.Route{{Prefix: "", World: base}, {Prefix: "ext.", World: extWorld{ext}, Slot: 1}}, nil)
	return r, ext
}

// extWorld is a journal answering every request done (a stand-in for an
// HTTP API's world).
type extWorld struct{ *world.Ledgered }

func (e extWorld) Kinds() []world.KindInfo { return []world.KindInfo{{Name: "ext.call"}} }

func (e extWorld) Execute(ctx context.Context, req world.Request) (world.Outcome, error) {
	out, _ := world.Done(map[string]string{"ok": req.Key})
	return out, e.Record(ctx, world.LedgerEntry{Key: req.Key, Kind: req.Kind, Args: req.Args, Outcome: out, At: req.Now})
}

var _ = Describe("A router of several worlds", func() {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	req := func(key, kind, args string) world.Request {
		return world.Request{Key: key, Kind: kind, Args: json.RawMessage(args), Now: at}
	}

	It("routes each kind by prefix, and keeps one ledger in arrival order across its worlds, durably", func(ctx SpecContext) {
		store := world.NewMemStore()
		r, _ := routed(store)
		for _, q := range []world.Request{
			req("k/1", "ext.call", `{}`),
			req("k/2", "notes.put", `{"text":"a"}`),
			req("k/3", "ext.call", `{"n":2}`),
			req("k/4", "notes.put", `{"text":"b"}`),
		} {
			out, err := r.Execute(ctx, q)
			Expect(err).NotTo(HaveOccurred())
			Expect(out.Status).To(Equal(protocol.StatusDone))
		}
		out, err := r.Execute(ctx, req("k/5", "nowhere.call", `{}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Error.Code).To(Equal("unknown_kind"), "the unprefixed world's answer")
		order, err := world.NewOrder(world.NewMemStore(), []byte("o/"))
		Expect(err).NotTo(HaveOccurred())
		alone := world.NewRouter("ext", order, []world.Route{{Prefix: "ext.", World: extWorld{}}}, nil)
		out, err = alone.Execute(ctx, req("k/1", "nowhere.call", `{}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Error.Message).To(Equal(`no world of this run serves effect kind "nowhere.call" (its worlds serve ext.*)`))

		check := func(r world.World) {
			ledger, err := r.Ledger(ctx)
			Expect(err).NotTo(HaveOccurred())
			var got []string
			for i, e := range ledger {
				Expect(e.Seq).To(BeEquivalentTo(i+1), "renumbered from 1")
				got = append(got, e.Key+" "+e.Kind)
			}
			Expect(got).To(Equal([]string{"k/1 ext.call", "k/2 notes.put", "k/3 ext.call", "k/4 notes.put", "k/5 nowhere.call"}),
				"the unknown kind went to the unprefixed world")
			seq, err := world.LedgerSeq(ctx, r)
			Expect(err).NotTo(HaveOccurred())
			Expect(seq).To(BeEquivalentTo(5))
		}
		check(r)
		again, _ := routed(store)
		check(again)

		found, ok, err := world.LookupOf(ctx, again, req("k/3", "ext.call", `{"n":2}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeTrue())
		Expect(string(found.Result)).To(Equal(`{"ok":"k/3"}`))
		_, ok, err = world.LookupOf(ctx, again, req("k/2", "ext.call", `{}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeFalse(), "asked of the kind's world, which never saw k/2")
		snap, err := again.Snapshot(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(snap)).To(ContainSubstring(`"ext":`))
		Expect(string(snap)).To(ContainSubstring(`"world":`))
	})
})
