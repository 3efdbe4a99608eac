package world_test

import (
	"context"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/world"
)

var _ = Describe("World events beyond API versions", func() {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := world.Event{Kind: "world.dep_update", Args: json.RawMessage(`{}`), Now: at}

	It("are refused by a world that declares none, directly and behind a router, recording nothing", func(ctx SpecContext) {
		r, _ := routed(world.NewMemStore())
		Expect(world.EventsOf(r)).To(BeEmpty())
		_, err := r.(world.Eventful).FireEvent(ctx, ev)
		Expect(err).To(MatchError(world.ErrUnknownEvent))
		ledger, err := r.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(ledger).To(BeEmpty())
	})

	It("make a ledger that holds one unreplayable on a world without the event", func(ctx SpecContext) {
		w, err := world.Definition{Name: "notes", Open: openNotes}.Instance(ctx, world.NewMemStore(), []byte("n/"), nil)
		Expect(err).NotTo(HaveOccurred())
		out, _ := world.Done(map[string]string{"library": "logkit"})
		st := world.State{World: "notes", Ledger: []world.LedgerEntry{{Seq: 1, Kind: ev.Kind, Args: ev.Args, Outcome: out, At: at}}}
		err = world.Restore(context.Background(), w, st)
		Expect(err).To(MatchError(world.ErrNotReplayable))
		Expect(err).To(MatchError(ContainSubstring("world event 1 is world.dep_update, which the world does not undergo")))
	})
})
