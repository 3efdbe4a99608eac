package world_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// naiveAnswer is the replay's rule read off the whole journal each time
// (what the replaying worlds did before world.Replay indexed it): the
// spec's oracle.
func naiveAnswer(mine, recording []world.LedgerEntry, req world.Request) world.ReplayAnswer {
	args := world.CompactJSON(req.Args)
	n := 0
	for _, e := range mine {
		if e.Kind == req.Kind && bytes.Equal(world.CompactJSON(e.Args), args) {
			n++
		}
	}
	a := world.ReplayAnswer{Occurrence: n + 1}
	for _, e := range recording {
		if e.Kind != req.Kind || !bytes.Equal(world.CompactJSON(e.Args), args) {
			continue
		}
		if a.Recorded == n {
			a.Outcome, a.Found = e.Outcome, true
		}
		a.Recorded++
	}
	return a
}

// replayRig is a replay over a journal in memory.
type replayRig struct {
	ctx       context.Context
	store     *world.MemStore
	journal   *world.Ledgered
	recording []world.LedgerEntry
	replay    *world.Replay
}

func newReplayRig(recording []world.LedgerEntry) *replayRig {
	r := &replayRig{ctx: context.Background(), store: world.NewMemStore(), recording: recording}
	var err error
	r.journal, err = world.OpenJournal("api", r.store, []byte("w/"))
	Expect(err).NotTo(HaveOccurred())
	r.replay = world.NewReplay(recording, r.journal)
	return r
}

// step answers req, journals the answer (a divergence when the recording
// has none) and tells the replay, as a replaying world does; between runs
// after the answer is journaled and before the replay is told.
func (r *replayRig) step(kind, args string, between ...func()) world.ReplayAnswer {
	req := world.Request{Key: fmt.Sprintf("k%d", r.journal.LedgerSeq()+1), Kind: kind, Args: json.RawMessage(args)}
	a, err := r.replay.Answer(r.ctx, req)
	Expect(err).NotTo(HaveOccurred())
	out := a.Outcome
	if !a.Found {
		out = world.Failed(502, world.CodeReplayDiverged, "no answer to %s %s, occurrence %d", kind, args, a.Occurrence)
	}
	e := world.LedgerEntry{Key: req.Key, Kind: kind, Args: req.Args, Outcome: out}
	Expect(r.journal.Record(r.ctx, e)).To(Succeed())
	for _, f := range between {
		f()
	}
	r.replay.Journaled(e)
	return a
}

// foreign journals an entry the replay is not told of.
func (r *replayRig) foreign(kind, args string) {
	Expect(r.journal.Record(r.ctx, world.LedgerEntry{Kind: kind, Args: json.RawMessage(args), Outcome: world.Outcome{Status: protocol.StatusDone}})).To(Succeed())
}

func recorded(kind, args, result string) world.LedgerEntry {
	return world.LedgerEntry{Kind: kind, Args: json.RawMessage(args), Outcome: world.Outcome{Status: protocol.StatusDone, Result: json.RawMessage(result)}}
}

var _ = Describe("Replay", func() {
	recording := []world.LedgerEntry{
		recorded("a", `{"x":1}`, `"r1"`),
		recorded("b", `{"x":1}`, `"r2"`),
		recorded("a", `{"x":1}`, `"r3"`),
		recorded("a", `{"x":2}`, `"r4"`),
	}

	It("answers the n-th request of a kind and args with the n-th recorded answer, insignificant space aside, and the first it lacks diverges", func() {
		r := newReplayRig(recording)
		Expect(r.step("a", `{ "x": 1 }`)).To(Equal(world.ReplayAnswer{Outcome: recording[0].Outcome, Found: true, Occurrence: 1, Recorded: 2}))
		Expect(r.step("a", `{"x":2}`).Outcome.Result).To(MatchJSON(`"r4"`))
		Expect(r.step("a", `{"x":1}`).Outcome.Result).To(MatchJSON(`"r3"`))
		d, err := r.replay.Diverged(r.ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(d).To(BeNil())

		Expect(r.step("a", `{"x":1}`)).To(Equal(world.ReplayAnswer{Occurrence: 3, Recorded: 2}))
		Expect(r.step("c", `null`)).To(Equal(world.ReplayAnswer{Occurrence: 1, Recorded: 0}))
		d, err = r.replay.Diverged(r.ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(d).NotTo(BeNil())
		Expect(d.Seq).To(Equal(int64(4)), "the first divergence, not the last")
		Expect(d.Kind).To(Equal("a"))
		Expect(d.Outcome.Error.Message).To(ContainSubstring("occurrence 3"))
	})

	It("counts a resumed run's requests from its journal", func() {
		r := newReplayRig(recording)
		r.step("a", `{"x":1}`)
		r.step("b", `{"x":1}`)
		resumed := world.NewReplay(recording, r.journal)
		a, err := resumed.Answer(r.ctx, world.Request{Kind: "a", Args: json.RawMessage(`{"x":1}`)})
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Occurrence).To(Equal(2))
		Expect(a.Outcome.Result).To(MatchJSON(`"r3"`))
		a, err = resumed.Answer(r.ctx, world.Request{Kind: "b", Args: json.RawMessage(`{"x":1}`)})
		Expect(err).NotTo(HaveOccurred())
		Expect(a).To(Equal(world.ReplayAnswer{Occurrence: 2, Recorded: 1}))
	})

	It("counts again what was journaled without it", func() {
		r := newReplayRig(recording)
		r.step("a", `{"x":1}`)
		r.foreign("a", `{"x":1}`)
		Expect(r.step("a", `{"x":1}`)).To(Equal(world.ReplayAnswer{Occurrence: 3, Recorded: 2}), "the foreign entry counts, as it did when the journal was read per request")
		// A foreign entry journaled between an answer and Journaled.
		req := world.Request{Kind: "a", Args: json.RawMessage(`{"x":2}`)}
		a, err := r.replay.Answer(r.ctx, req)
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Found).To(BeTrue())
		e := world.LedgerEntry{Kind: req.Kind, Args: req.Args, Outcome: a.Outcome}
		Expect(r.journal.Record(r.ctx, e)).To(Succeed())
		r.foreign("a", `{"x":2}`)
		r.replay.Journaled(e)
		Expect(r.step("a", `{"x":2}`)).To(Equal(world.ReplayAnswer{Occurrence: 3, Recorded: 1}))
	})

	It("answers as reading the whole journal per request would, over random runs", func() {
		kinds, argsOf := []string{"a", "b", "c"}, []string{`{"x":1}`, `{ "x": 1 }`, `{"x":2}`, `null`, `[1, 2]`}
		rng := rand.New(rand.NewPCG(19, 3))
		for run := range 40 {
			var rec []world.LedgerEntry
			for i := range rng.IntN(30) {
				rec = append(rec, recorded(kinds[rng.IntN(len(kinds))], argsOf[rng.IntN(len(argsOf))], fmt.Sprintf(`"run%d-%d"`, run, i)))
			}
			r := newReplayRig(rec)
			for range 40 {
				kind, args := kinds[rng.IntN(len(kinds))], argsOf[rng.IntN(len(argsOf))]
				var between []func()
				if rng.IntN(4) == 0 {
					between = append(between, func() {
						_, err := r.replay.Diverged(r.ctx) // counts the journal, the answer in it
						Expect(err).NotTo(HaveOccurred())
					})
				}
				if rng.IntN(4) == 0 {
					between = append(between, func() { r.foreign(kinds[0], argsOf[0]) })
				}
				switch rng.IntN(10) {
				case 0:
					r.foreign(kind, args)
				case 1:
					r.replay = world.NewReplay(rec, r.journal) // a resume
				default:
					mine, err := r.journal.Ledger(r.ctx)
					Expect(err).NotTo(HaveOccurred())
					want := naiveAnswer(mine, rec, world.Request{Kind: kind, Args: json.RawMessage(args)})
					got := r.step(kind, args, between...)
					Expect(got).To(Equal(want), "run %d, %s %s after %d entries", run, kind, args, len(mine))
				}
			}
			mine, err := r.journal.Ledger(r.ctx)
			Expect(err).NotTo(HaveOccurred())
			d, err := world.FirstDivergedIn(r.ctx, r.journal, r.replay)
			Expect(err).NotTo(HaveOccurred())
			Expect(d).To(Equal(world.FirstDiverged(mine)))
		}
	})
})

// BenchmarkReplayAnswer measures one answer of a replay (Answer, the
// journal's Record in memory, Journaled) after a run of n requests: flat
// in n, since the recording is indexed and the journal counted once.
//
//	go test -run '^$' -bench ReplayAnswer ./scenarios/world
func BenchmarkReplayAnswer(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ctx := context.Background()
			rec := make([]world.LedgerEntry, 0, n+b.N)
			for i := range n + b.N {
				rec = append(rec, world.LedgerEntry{Kind: "mcp.counters.add", Args: json.RawMessage(fmt.Sprintf(`{"name":"c%d","n":1}`, i%10)),
					Outcome: world.Outcome{Status: protocol.StatusDone, Result: json.RawMessage(`{"content":[]}`)}})
			}
			journal, err := world.OpenJournal("counters", world.NewMemStore(), []byte("w/"))
			if err != nil {
				b.Fatal(err)
			}
			replay := world.NewReplay(rec, journal)
			step := func(i int) {
				req := world.Request{Key: fmt.Sprint(i), Kind: rec[i].Kind, Args: rec[i].Args, Now: time.Unix(0, 0)}
				a, err := replay.Answer(ctx, req)
				if err != nil || !a.Found {
					b.Fatalf("answer %d: %v %+v", i, err, a)
				}
				e := world.LedgerEntry{Key: req.Key, Kind: req.Kind, Args: req.Args, Outcome: a.Outcome, At: req.Now}
				if err := journal.Record(ctx, e); err != nil {
					b.Fatal(err)
				}
				replay.Journaled(e)
			}
			for i := range n {
				step(i)
			}
			b.ResetTimer()
			for i := range b.N {
				step(n + i)
			}
		})
	}
}
