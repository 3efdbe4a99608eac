package harness

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("the supervisor's pacing between attempts", func() {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }

	It("backs off a crash loop of the agent's own making: 100ms, doubling, capped at 2s", func() {
		var p pacing
		var waits []time.Duration
		for range 7 {
			waits = append(waits, p.after(false, false))
		}
		Expect(waits).To(Equal([]time.Duration{ms(100), ms(200), ms(400), ms(800), ms(1600), ms(2000), ms(2000)}))
	})

	It("starts the next attempt at once after one a fault ended, however little it did", func() {
		var p pacing
		for range 5 {
			Expect(p.after(false, true)).To(BeZero(), "a kill, stop or restart is the schedule's doing, not a crash loop")
		}
	})

	It("neither adds a fault's attempt to the loop nor clears the loop with it", func() {
		var p pacing
		Expect(p.after(false, false)).To(Equal(ms(100)))
		Expect(p.after(false, false)).To(Equal(ms(200)))
		Expect(p.after(false, true)).To(BeZero())
		Expect(p.after(false, false)).To(Equal(ms(400)), "the loop goes on where it was")
	})

	It("clears the loop after an attempt that checkpointed, fault or not", func() {
		var p pacing
		p.after(false, false)
		p.after(false, false)
		Expect(p.after(true, true)).To(BeZero())
		Expect(p.after(false, false)).To(Equal(ms(100)))
		Expect(p.after(true, false)).To(BeZero())
		Expect(p.after(false, false)).To(Equal(ms(100)))
	})
})
