package chaos_test

import (
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/chaos"
)

var _ = Describe("the follow-up that shows an agent met a 429", func() {
	applied := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	wall := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	wait := chaos.LLMWait{Kind: chaos.LLMRateLimit, Call: 2, After: applied.Add(30 * time.Second),
		WallAfter: wall.Add(30 * time.Second), RetryAfterMS: 30000}
	call := func(virtual, real time.Duration) chaos.LLMCall {
		return chaos.LLMCall{Virtual: applied.Add(virtual), Wall: wall.Add(real)}
	}

	DescribeTable("the first later call decides: met once Retry-After is over in virtual or in real time, and says which",
		func(c chaos.LLMCall, met bool, detail string) {
			j, ok := wait.FollowedUp(c, applied)
			Expect(ok).To(BeTrue(), "the first call after the 429 decides")
			Expect(j.Met).To(Equal(met))
			Expect(j.Detail).To(Equal(detail))
		},
		Entry("at once", call(0, 0), false,
			"after the 429 on LLM call 2, the agent called again 0s later in real time (and 0s in virtual time), before its Retry-After of 30s was over"),
		Entry("just before, in both times", call(30*time.Second-time.Millisecond, 30*time.Second-time.Millisecond), false,
			"after the 429 on LLM call 2, the agent called again 29.999s later in real time (and 29.999s in virtual time), before its Retry-After of 30s was over"),
		Entry("slept through the gateway", call(30*time.Second, time.Second), true,
			"after the 429 on LLM call 2, the agent waited Retry-After (30s of virtual time) and called again"),
		Entry("waited in real time (a client's own retry, a time.sleep)", call(0, 30*time.Second), true,
			"after the 429 on LLM call 2, the agent waited Retry-After (30s of real time) and called again"),
	)

	It("survives the journal: the real-time deadline is part of the fault's evidence", func() {
		b, err := json.Marshal(chaos.Evidence{LLM: &wait})
		Expect(err).NotTo(HaveOccurred())
		var back chaos.Evidence
		Expect(json.Unmarshal(b, &back)).To(Succeed())
		Expect(back.LLM.WallAfter.Equal(wait.WallAfter)).To(BeTrue(), string(b))
		_, ok := back.LLM.FollowedUp(call(0, 30*time.Second), applied)
		Expect(ok).To(BeTrue())
	})

	It("credits only virtual time for evidence journaled without a real-time deadline", func() {
		old := chaos.LLMWait{Kind: chaos.LLMRateLimit, Call: 1, After: applied.Add(10 * time.Second)}
		_, ok := old.FollowedUp(call(0, time.Hour), applied)
		Expect(ok).To(BeFalse())
		j, ok := old.FollowedUp(call(10*time.Second, 0), applied)
		Expect(ok).To(BeTrue())
		Expect(j.Detail).To(ContainSubstring("(10s of virtual time)"), "the Retry-After, from the deadline")
	})

	It("waits for the tool call's answer after a malformed one, and takes any later call after a 5xx", func() {
		broken := chaos.LLMWait{Kind: chaos.LLMMalformed, Call: 1, CallID: "call_1"}
		_, ok := broken.FollowedUp(chaos.LLMCall{}, applied)
		Expect(ok).To(BeFalse(), "no messages: no answer")
		_, ok = broken.FollowedUp(chaos.LLMCall{Answers: func(id string) bool { return id == "call_1" }}, applied)
		Expect(ok).To(BeTrue())
		_, ok = chaos.LLMWait{Kind: chaos.LLMServerError, Call: 1}.FollowedUp(chaos.LLMCall{}, applied)
		Expect(ok).To(BeTrue())
	})
})

var _ = Describe("an API change met by a later effect", func() {
	// Fired by the 3rd effect: its intent is journaled (3 intents) when the
	// fault fires, whatever the phase.
	DescribeTable("counts the triggering effect only when the fault fired before the world saw it",
		func(phase chaos.Phase, intents int, met bool, detail string) {
			j := chaos.MetByLaterEffect.AtEnd(chaos.Evidence{IntentsAtFire: 3, Phase: phase}, chaos.End{Intents: intents})
			Expect(j.Met).To(Equal(met))
			Expect(j.Detail).To(Equal(detail))
		},
		Entry("before, and the agent sent nothing more", chaos.PhaseBefore, 3, true, "effect 3 was sent under the new API"),
		Entry("before, and two more", chaos.PhaseBefore, 5, true, "3 effects were sent under the new API, from effect 3 on"),
		Entry("mid: the world had executed it", chaos.PhaseMid, 3, false, "no effect was sent after the API changed"),
		Entry("mid, and one more", chaos.PhaseMid, 4, true, "effect 4 was sent under the new API"),
		Entry("after: its result was journaled", chaos.PhaseAfter, 3, false, "no effect was sent after the API changed"),
		Entry("after, and two more", chaos.PhaseAfter, 5, true, "2 effects were sent under the new API, from effect 4 on"),
		Entry("another trigger (step, t:): the intents after it", chaos.PhaseDefault, 3, false, "no effect was sent after the API changed"),
		Entry("another trigger, and one more", chaos.PhaseDefault, 4, true, "effect 4 was sent under the new API"),
	)

	It("keeps the phase in the journaled evidence, so a resumed run judges it the same", func() {
		b, err := json.Marshal(chaos.Evidence{IntentsAtFire: 3, Phase: chaos.PhaseBefore})
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(ContainSubstring(`"phase":"before"`))
		var back chaos.Evidence
		Expect(json.Unmarshal(b, &back)).To(Succeed())
		Expect(chaos.MetByLaterEffect.AtEnd(back, chaos.End{Intents: 3}).Met).To(BeTrue())
	})
})

var _ = Describe("a tool change met by a later call of that tool", func() {
	calls := func(refused, ran int) chaos.End {
		// Effects of other tools after the change count for nothing.
		return chaos.End{Intents: 10, ToolCalls: chaos.ToolCalls{Tool: "tickets__close_ticket", Refused: refused, Ran: ran}}
	}
	evidence := chaos.Evidence{IntentsAtFire: 3, Tool: &chaos.ToolWindow{FromOrder: 3}}

	DescribeTable("is met by a call of the tool it changed, refused or run, and by nothing else",
		func(end chaos.End, met bool, detail string) {
			j := chaos.MetByLaterCallOfTool.AtEnd(evidence, end)
			Expect(j.Met).To(Equal(met))
			Expect(j.Detail).To(Equal(detail))
		},
		Entry("only other tools were called", calls(0, 0), false,
			"the agent never called tickets__close_ticket after it changed (calls of other tools do not meet the change)"),
		Entry("a call in the old shape, refused", calls(1, 0), true, "the agent called tickets__close_ticket once after it changed (1 refused)"),
		Entry("refused, then in the new shape", calls(1, 1), true, "the agent called tickets__close_ticket twice after it changed (1 refused, 1 in the new shape)"),
		Entry("right away in the new shape", calls(0, 3), true, "the agent called tickets__close_ticket 3 times after it changed (3 in the new shape)"),
	)

	It("counts the tool's effects sent while the change held, by their order", func() {
		w := chaos.ToolWindow{FromOrder: 3}
		Expect(w.Holds(3)).To(BeFalse(), "effect 3 had passed the check in the old shape when the fault fired")
		Expect(w.Holds(4)).To(BeTrue())
		Expect(w.Holds(400)).To(BeTrue(), "a change without /DURATION holds to the end")
		w.Healed, w.ToOrder = true, 6
		Expect(w.Holds(6)).To(BeTrue())
		Expect(w.Holds(7)).To(BeFalse(), "after the heal the tool is served unchanged")
		Expect(chaos.ToolWindow{Healed: true}.Holds(1)).To(BeFalse(), "healed before any effect: no effect met it")
	})

	It("keeps its window in the journaled evidence, so a resumed run judges it the same", func() {
		b, err := json.Marshal(chaos.Evidence{IntentsAtFire: 3, Tool: &chaos.ToolWindow{FromOrder: 3, Healed: true, ToOrder: 5}})
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(ContainSubstring(`"tool":{"from_order":3,"healed":true,"to_order":5}`))
		var back chaos.Evidence
		Expect(json.Unmarshal(b, &back)).To(Succeed())
		Expect(*back.Tool).To(Equal(chaos.ToolWindow{FromOrder: 3, Healed: true, ToOrder: 5}))
	})

	It("judges a record journaled before the rule existed as it was judged then: by any later effect", func() {
		old := chaos.Evidence{IntentsAtFire: 3, Phase: chaos.PhaseBefore}
		j := chaos.MetByLaterCallOfTool.AtEnd(old, calls(0, 0))
		Expect(j).To(Equal(chaos.MetByLaterEffect.AtEnd(old, calls(0, 0))))
		Expect(j.Met).To(BeTrue())
	})

	It("is the rule of mcp-tool-gone and mcp-schema, named in overnight faults", func() {
		for _, name := range []string{"mcp-tool-gone", "mcp-schema"} {
			k, ok := chaos.Default().Lookup(name)
			Expect(ok).To(BeTrue())
			Expect(k.MetBy).To(Equal(chaos.MetByLaterCallOfTool), name)
		}
		Expect(chaos.MetByLaterCallOfTool.String()).To(Equal("later-call-of-tool"))
	})
})
