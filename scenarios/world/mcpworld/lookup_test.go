package mcpworld_test

import (
	"encoding/json"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/mcpworld"
)

var _ = Describe("a lookup for calls in doubt: a read-only tool and an expression over its answer", func() {
	// server is tickets.py as scenario text declares it, with lookups.
	server := func(lookups string) scenarios.MCPServer {
		GinkgoHelper()
		scen, err := scenarios.Parse("lookups.yaml", []byte(`apiVersion: overnight/v1
kind: Scenario
name: lookups
agent: {builtin: deployer}
mcp:
  servers:
    - name: tickets
      command: [python3, ../../../examples/mcp/tickets.py]
      lookups:
`+lookups))
		Expect(err).NotTo(HaveOccurred())
		return scen.MCPServers()[0]
	}
	open := openTickets
	create := func(key, title string) world.Request {
		return world.Request{Key: key, Kind: "mcp.tickets.create_ticket", Args: json.RawMessage(`{"title":"` + title + `"}`), Now: t0}
	}

	It("finds a call the server acted on whose answer was lost (done, reconciled), and one it never got (not found)", func(ctx SpecContext) {
		s := server(`        create_ticket:
          tool: list_tickets
          found: 'response.structuredContent.tickets.exists(t, t.key == key && t.title == args.title)'
`)
		db := filepath.Join(GinkgoT().TempDir(), "tickets.json")
		// The call reached the server through another connection, whose
		// journal is gone: as when the answer is lost to a crash.
		before, err := open(ctx, s, db)
		Expect(err).NotTo(HaveOccurred())
		_, err = before.Execute(ctx, create("k/a", "disk full"))
		Expect(err).NotTo(HaveOccurred())
		Expect(before.Close()).To(Succeed())

		w, err := open(ctx, s, db)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(w.Close)
		_, found, err := w.LookupRequest(ctx, create("k/a", "other title"))
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeFalse(), "found reads the call's args too")
		out, found, err := w.LookupRequest(ctx, create("k/a", "disk full"))
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(out.Status).To(Equal(protocol.StatusDone))
		var res mcp.CallToolResult
		Expect(json.Unmarshal(out.Result, &res)).To(Succeed())
		Expect(res.Meta[scenarios.MCPMetaReconciled]).To(BeTrue())
		again, found, err := w.Lookup(ctx, "k/a")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue(), "the reconciled answer is journaled as the server's")
		Expect(again).To(Equal(out))

		_, found, err = w.LookupRequest(ctx, create("k/b", "cert expired"))
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeFalse(), "the server never got it")

		_, _, err = w.LookupRequest(ctx, world.Request{Key: "k/c", Kind: "mcp.tickets.close_ticket", Args: json.RawMessage(`{"id":1}`), Now: t0})
		Expect(err).To(MatchError(world.ErrCannotLookup), "no lookup for close_ticket: unknown")
		Expect(err.Error()).To(ContainSubstring("declares none for tool close_ticket"))
	})

	It("refuses, as the server lists its tools, a lookup by a tool that is not read-only or not listed, at its place in the file", func(ctx SpecContext) {
		db := filepath.Join(GinkgoT().TempDir(), "tickets.json")
		_, err := open(ctx, server(`        create_ticket: {tool: close_ticket, found: 'true'}
`), db)
		Expect(err).To(MatchError(mcpworld.ErrServer))
		Expect(err.Error()).To(ContainSubstring(`lookups.yaml:10:24: lookups.create_ticket.tool: tool "close_ticket" is not read-only`))
		_, err = open(ctx, server(`        create_ticket: {tool: list_all, found: 'true'}
`), db)
		Expect(err.Error()).To(ContainSubstring(`lookups.create_ticket.tool: the server lists no tool "list_all" (it lists close_ticket, create_ticket, list_tickets)`))
		_, err = open(ctx, server(`        open_ticket: {tool: list_tickets, found: 'true'}
`), db)
		Expect(err.Error()).To(ContainSubstring(`lookups.open_ticket: the server lists no tool "open_ticket"`))
	})
})
