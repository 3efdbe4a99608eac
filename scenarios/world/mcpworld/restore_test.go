package mcpworld_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/mcpworld"
)

var _ = Describe("a fresh instance of an MCP server restored from a real one's journal (Redo)", func() {
	tickets := scenarios.MCPServer{Name: "tickets", Command: []string{"python3", "../../../examples/mcp/tickets.py"}, Replayable: true}
	// open starts tickets.py on its own file db.
	open := func(ctx context.Context, db string) *mcpworld.World {
		GinkgoHelper()
		w, err := openTickets(ctx, tickets, db)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(w.Close)
		return w
	}
	// real is a real server's journal after two creates, a read and a
	// refused close.
	real := func(ctx context.Context) ([]world.LedgerEntry, []byte) {
		GinkgoHelper()
		db := filepath.Join(GinkgoT().TempDir(), "tickets.json")
		w := open(ctx, db)
		for _, r := range []world.Request{
			{Key: "k/a", Kind: "mcp.tickets.create_ticket", Args: json.RawMessage(`{"title":"disk full"}`)},
			{Key: "u/1", Kind: "mcp.tickets.list_tickets", Args: json.RawMessage(`{}`)},
			{Key: "k/c", Kind: "mcp.tickets.close_ticket", Args: json.RawMessage(`{"id":99}`)},
			{Key: "k/b", Kind: "mcp.tickets.create_ticket", Args: json.RawMessage(`{"title":"cert expired"}`)},
		} {
			r.Now = t0
			_, err := w.Execute(ctx, r)
			Expect(err).NotTo(HaveOccurred())
		}
		ledger, err := w.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(ledger).To(HaveLen(4))
		file, err := os.ReadFile(db)
		Expect(err).NotTo(HaveOccurred())
		return ledger, file
	}

	It("sends the mutating calls done again, in order, and journals the rest as they were: the fresh file equals the real one", func(ctx SpecContext) {
		ledger, want := real(ctx)
		db := filepath.Join(GinkgoT().TempDir(), "tickets.json")
		fresh := open(ctx, db)
		for _, e := range ledger {
			Expect(fresh.Redo(ctx, e)).To(Succeed())
		}
		Expect(os.ReadFile(db)).To(Equal(want), "the fresh instance's own file stands where the real one's did")
		journal, err := fresh.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(journal).To(HaveLen(4))
		for i, e := range journal {
			Expect(e.Key).To(Equal(ledger[i].Key))
			Expect(e.Outcome.Status).To(Equal(ledger[i].Outcome.Status))
		}
		Expect(journal[2].Outcome.Status).To(Equal(protocol.StatusFailed), "the refused close, journaled as it was")
	})

	It("refuses to go on when the fresh instance answers a replayed call otherwise than the real server did", func(ctx SpecContext) {
		ledger, _ := real(ctx)
		db := filepath.Join(GinkgoT().TempDir(), "tickets.json")
		// Not fresh: a ticket of its own already, so the first create
		// opens ticket 2 where the real server opened ticket 1.
		Expect(os.WriteFile(db, []byte(`{"tickets": [{"id": 1, "title": "stray", "status": "open", "key": null}]}`), 0o644)).To(Succeed())
		fresh := open(ctx, db)
		err := fresh.Redo(ctx, ledger[0])
		Expect(err).To(MatchError(world.ErrNotReplayable))
		Expect(err.Error()).To(And(ContainSubstring("ledger entry 1 (tools/call create_ticket"), ContainSubstring(`"id":2`), ContainSubstring(`"id":1`)))
	})
})
