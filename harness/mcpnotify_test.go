package harness

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"

	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/harness/history"
)

// watchedSession connects the official SDK's client to the gateway's MCP
// endpoint with token and a ToolListChangedHandler: each notification it
// gets arrives on the channel. protocol "" is the client's own default
// (2026-07-28: the notifications come on its subscriptions/listen
// stream); "2025-11-25" opens a session whose GET stream carries them.
func (lr *liveRun) watchedSession(ctx context.Context, token, protocol string) (*mcp.ClientSession, <-chan *mcp.ToolListChangedRequest) {
	GinkgoHelper()
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", lr.sock)
		},
	}}
	got := make(chan *mcp.ToolListChangedRequest, 8)
	c := mcp.NewClient(&mcp.Implementation{Name: "spec-agent", Version: "v1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(_ context.Context, req *mcp.ToolListChangedRequest) { got <- req },
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://gateway" + gateway.MCPPathPrefix + token, HTTPClient: hc, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: protocol})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cs.Close)
	return cs, got
}

// listChanges are the run's journaled list_changed notifications.
func (lr *liveRun) listChanges() []history.MCPListChange {
	GinkgoHelper()
	events, err := lr.h.history.Events(lr.r.rec.ID)
	Expect(err).NotTo(HaveOccurred())
	return history.MCPListChanges(events)
}

// toolNames lists the tools as cs sees them.
func toolNames(ctx context.Context, cs *mcp.ClientSession) []string {
	GinkgoHelper()
	res, err := cs.ListTools(ctx, nil)
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, t := range res.Tools {
		out = append(out, t.Name)
	}
	return out
}

var _ = Describe("notifications/tools/list_changed from the gateway's MCP endpoint, against a real MCP server process", func() {
	var bin string
	BeforeEach(func() { bin = countersBinary() })

	notified := func(got <-chan *mcp.ToolListChangedRequest) {
		GinkgoHelper()
		Eventually(got).WithTimeout(10*time.Second).Should(Receive(), "notifications/tools/list_changed")
	}

	for _, protocol := range []string{"", "2025-11-25"} {
		stream := map[string]string{"": "subscriptions/listen", "2025-11-25": "GET"}[protocol]

		It("mcp-tool-gone notifies the SDK's client on its "+stream+" stream when it fires; its next tools/list lacks the tool, whose call is a tool error; journaled", func(ctx SpecContext) {
			lr := liveMCPRun(countersScenario(bin, "agent", "faults: [mcp-tool-gone:counters__pay@step:1]\n"), Options{})
			tok := lr.attempt()
			cs, got := lr.watchedSession(ctx, tok, protocol)
			Expect(toolNames(ctx, cs)).To(ContainElement("counters__pay"))
			Consistently(got).WithTimeout(300*time.Millisecond).ShouldNot(Receive(), "nothing changed yet")

			_, err := lr.sdk(tok).Checkpoint(ctx, 1, nil) // the fault fires
			Expect(err).NotTo(HaveOccurred())
			notified(got)
			Expect(toolNames(ctx, cs)).NotTo(ContainElement("counters__pay"))
			res := tool(ctx, cs, "counters__pay", map[string]any{"to": "bob", "amount": 5})
			Expect(res.IsError).To(BeTrue())
			Expect(text(res)).To(ContainSubstring("tool counters__pay is gone"))
			_, calls := lr.countersState()
			Expect(calls).To(BeEmpty(), "the server never saw it")

			Eventually(lr.listChanges).Should(ConsistOf(gstruct.MatchFields(gstruct.IgnoreExtras, gstruct.Fields{
				"Attempt": Equal(1), "Stream": Equal(stream),
				"Changed": Equal([]string{"counters__pay gone (mcp-tool-gone:counters__pay@step:1)"}),
			})), "the notification is journaled")
			if stream == "GET" {
				Expect(lr.listChanges()[0].Session).To(Equal(cs.ID()), "the session it went to")
			}
		})
	}

	It("mcp-schema notifies when the schema changes and again when it heals; each tools/list after shows the schema of the moment", func(ctx SpecContext) {
		lr := liveMCPRun(countersScenario(bin, "agent", "faults: [\"mcp-schema:counters__add:rename=n>amount@step:1/1h\"]\n"), Options{})
		tok := lr.attempt()
		cs, got := lr.watchedSession(ctx, tok, "2025-11-25")
		props := func() map[string]any {
			res, err := cs.ListTools(ctx, nil)
			Expect(err).NotTo(HaveOccurred())
			for _, t := range res.Tools {
				if t.Name == "counters__add" {
					return schemaMap(t.InputSchema)["properties"].(map[string]any)
				}
			}
			Fail("no counters__add")
			return nil
		}
		Expect(props()).To(HaveKey("n"))
		sdk := lr.sdk(tok)
		_, err := sdk.Checkpoint(ctx, 1, nil)
		Expect(err).NotTo(HaveOccurred())
		notified(got)
		Expect(props()).To(And(HaveKey("amount"), Not(HaveKey("n"))))
		res := tool(ctx, cs, "counters__add", map[string]any{"name": "a", "n": 1})
		Expect(text(res)).To(ContainSubstring(`argument "n" is now "amount"`), "an old-shaped call is told what changed")
		Expect(value(tool(ctx, cs, "counters__add", map[string]any{"name": "a", "amount": 2}))).To(BeEquivalentTo(2))

		_, err = sdk.Sleep(ctx, 2*time.Hour) // the fault heals
		Expect(err).NotTo(HaveOccurred())
		notified(got)
		Expect(props()).To(And(HaveKey("n"), Not(HaveKey("amount"))))
		Eventually(func() [][]string {
			var out [][]string
			for _, c := range lr.listChanges() {
				out = append(out, c.Changed)
			}
			return out
		}).Should(Equal([][]string{{`counters__add input schema changed: "n" renamed "amount" (mcp-schema:counters__add:rename=n>amount@step:1/1h)`}, {}}))
	})

	It("closes an attempt's sessions when the next begins: the old session is gone, a new one of the old token is fenced", func(ctx SpecContext) {
		lr := liveMCPRun(countersScenario(bin, "agent", ""), Options{})
		old := lr.attempt()
		zombie, _ := lr.watchedSession(ctx, old, "2025-11-25")
		Expect(toolNames(ctx, zombie)).NotTo(BeEmpty())
		lr.attempt() // attempt 2: attempt 1 is fenced

		Eventually(func() error {
			_, err := zombie.ListTools(ctx, nil)
			return err
		}).WithTimeout(5*time.Second).Should(HaveOccurred(), "the old attempt's session is closed")
		_, err := zombie.CallTool(ctx, &mcp.CallToolParams{Name: "counters__add", Arguments: map[string]any{"name": "a", "n": 1}})
		Expect(err).To(HaveOccurred())

		again := lr.mcpSession(ctx, old) // the old token, a new session
		_, err = again.CallTool(ctx, &mcp.CallToolParams{Name: "counters__add", Arguments: map[string]any{"name": "a", "n": 1}})
		Expect(err).To(MatchError(ContainSubstring("fenced")))
		_, calls := lr.countersState()
		Expect(calls).To(BeEmpty(), "no call of the zombie reached the server")
	})

	It("keeps at most MaxMCPSessions sessions per attempt: opening more closes the oldest", func(ctx SpecContext) {
		lr := liveMCPRun(countersScenario(bin, "agent", ""), Options{})
		tok := lr.attempt()
		var sessions []*mcp.ClientSession
		for range gateway.MaxMCPSessions + 1 {
			cs, _ := lr.watchedSession(ctx, tok, "2025-11-25")
			sessions = append(sessions, cs)
		}
		_, err := sessions[0].ListTools(ctx, nil)
		Expect(err).To(HaveOccurred(), "the oldest was closed")
		for _, cs := range sessions[1:] {
			Expect(toolNames(ctx, cs)).NotTo(BeEmpty())
		}
	})
})
