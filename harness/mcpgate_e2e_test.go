package harness_test

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/reflect"
	"github.com/overnight-dev/overnight/scenarios"
)

// These specs drive the reflect package's gate through the real gateway's
// MCP endpoint, the SDK's client as the agent and the counters server (a
// real process) as the world.
var _ = Describe("MCP approvals", func() {
	const gate = `gate:
  - {kinds: "mcp.counters.pay", policy: approve}
  - {kinds: "mcp.counters.set", policy: deny}
`
	var (
		live *harness.LiveMCP
		h    *harness.Harness
		cs   *mcp.ClientSession
	)
	BeforeEach(func(ctx SpecContext) {
		ext, err := reflect.New(reflect.Options{})
		Expect(err).NotTo(HaveOccurred())
		live = harness.StartLiveMCP("agent", gate, harness.Options{Extension: ext})
		h = live.Harness()
		cs = live.Session(ctx, live.Attempt())
	})

	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	// call sends a tools/call that may be held, and returns where its answer comes.
	call := func(ctx context.Context, name, key string, args map[string]any) chan answer {
		ch := make(chan answer, 1)
		p := &mcp.CallToolParams{Name: name, Arguments: args}
		if key != "" {
			p.Meta = mcp.Meta{scenarios.MCPMetaIdempotencyKey: key}
		}
		go func() {
			res, err := cs.CallTool(ctx, p)
			ch <- answer{res, err}
		}()
		return ch
	}
	// heldOne waits until exactly one effect is held, and returns it.
	heldOne := func(ctx context.Context) harness.HeldEffect {
		GinkgoHelper()
		var held []harness.HeldEffect
		Eventually(func(g Gomega) {
			var err error
			held, err = h.Held(ctx, live.RunID())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(held).To(HaveLen(1))
		}).WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(Succeed())
		return held[0]
	}
	text := func(res *mcp.CallToolResult) string { return res.Content[0].(*mcp.TextContent).Text }

	It("hold an unkeyed call, addressed by its id and bound to its arguments: approving it approves nothing else", func(ctx SpecContext) {
		first := call(ctx, "counters__pay", "", map[string]any{"to": "bob", "amount": 5})
		held := heldOne(ctx)
		Expect(held.Key).To(BeEmpty(), "an unkeyed call has no key")
		Expect(held.ID).To(Equal("u/1"))
		Expect(held.ArgsDigest).To(HaveLen(64))
		Expect(held.Kind).To(Equal("mcp.counters.pay"))

		err := h.Decide(ctx, live.RunID(), harness.Decision{Effect: held.ID, ArgsDigest: "0123", Approve: true, By: "alice"})
		Expect(err).To(MatchError(harness.ErrOtherArgs), "a digest of other arguments approves nothing")
		Expect(h.Decide(ctx, live.RunID(), harness.Decision{Effect: "", Approve: true, By: "alice"})).To(MatchError(harness.ErrNotHeld))
		Consistently(first).WithTimeout(200*time.Millisecond).ShouldNot(Receive(), "still held")
		Expect(h.Decide(ctx, live.RunID(), harness.Decision{Effect: held.ID, ArgsDigest: held.ArgsDigest, Approve: true, By: "alice"})).To(Succeed())
		var a answer
		Eventually(first).WithTimeout(10 * time.Second).Should(Receive(&a))
		Expect(a.err).NotTo(HaveOccurred())
		Expect(a.res.IsError).To(BeFalse())
		Expect(text(a.res)).To(Equal("5"))

		second := call(ctx, "counters__pay", "", map[string]any{"to": "bob", "amount": 7})
		again := heldOne(ctx)
		Expect(again.ID).To(Equal("u/2"), "a second call with other arguments is held again")
		Expect(again.ArgsDigest).NotTo(Equal(held.ArgsDigest))
		Expect(h.Decide(ctx, live.RunID(), harness.Decision{Effect: again.ID, Approve: false, By: "alice"})).To(Succeed())
		Eventually(second).WithTimeout(10 * time.Second).Should(Receive(&a))
		Expect(a.err).NotTo(HaveOccurred())
		Expect(a.res.IsError).To(BeTrue())
		Expect(text(a.res)).To(ContainSubstring("denied by alice"))

		Expect(live.Counters()).To(Equal(map[string]int{"paid:bob": 5}), "the server's own state: only the approved call")
	})

	It("hold a keyed call, addressed by its key; its repeat gets the approved answer without being held", func(ctx SpecContext) {
		first := call(ctx, "counters__pay", "pay-carol", map[string]any{"to": "carol", "amount": 1})
		held := heldOne(ctx)
		Expect(held.Key).To(Equal("pay-carol"))
		Expect(h.Decide(ctx, live.RunID(), harness.Decision{Effect: "pay-carol", Approve: true, By: "bob"})).To(Succeed())
		var a answer
		Eventually(first).WithTimeout(10 * time.Second).Should(Receive(&a))
		Expect(a.err).NotTo(HaveOccurred())
		Expect(text(a.res)).To(Equal("1"))

		var b answer
		Eventually(call(ctx, "counters__pay", "pay-carol", map[string]any{"to": "carol", "amount": 1})).WithTimeout(10 * time.Second).Should(Receive(&b))
		Expect(b.err).NotTo(HaveOccurred())
		Expect(text(b.res)).To(Equal("1"))
		Expect(b.res.Meta[scenarios.MCPMetaReplayed]).To(BeTrue())
		Expect(h.Held(ctx, live.RunID())).To(BeEmpty())
		Expect(live.Counters()).To(Equal(map[string]int{"paid:carol": 1}))
	})

	It("let the scenario's rules override the tools' annotations: set, idempotent, is denied", func(ctx SpecContext) {
		var a answer
		Eventually(call(ctx, "counters__set", "", map[string]any{"name": "x", "value": 1})).WithTimeout(10 * time.Second).Should(Receive(&a))
		Expect(a.err).NotTo(HaveOccurred())
		Expect(a.res.IsError).To(BeTrue())
		Expect(text(a.res)).To(ContainSubstring("denied: the gate's policy denies mcp.counters.set"))
		Eventually(call(ctx, "counters__get", "", map[string]any{"name": "x"})).WithTimeout(10 * time.Second).Should(Receive(&a))
		Expect(a.err).NotTo(HaveOccurred())
		Expect(a.res.IsError).To(BeFalse(), "no rule matches get: allowed")
		Expect(live.Counters()).To(BeEmpty())
	})
})
