package harness

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox/agent"
	"github.com/overnight-dev/overnight/scenarios/cloud"
)

var _ = Describe("rollback: consistent", func() {
	var (
		ctx   context.Context
		state string
	)
	exists := func(kind, name string) map[string]any {
		return map[string]any{cloud.ClaimExists: map[string]string{"kind": kind, "name": name}}
	}
	// poison plays attempt 1: two consistent checkpoints, a poisoned third
	// (it claims a database it never created), and a fourth built on it.
	poison := func(lr *liveRun) string {
		tok := lr.attempt()
		c := lr.sdk(tok)
		_, err := c.Effect(ctx, cloud.KindCreateNetwork, map[string]string{"name": "n"})
		Expect(err).NotTo(HaveOccurred())
		_, err = c.CheckpointClaims(ctx, 1, map[string]string{"net": "net-1"}, exists("network", "n"))
		Expect(err).NotTo(HaveOccurred())
		_, err = c.CheckpointClaims(ctx, 2, map[string]string{"net": "net-1", "db": "pending"}, nil)
		Expect(err).NotTo(HaveOccurred())
		_, err = c.CheckpointClaims(ctx, 3, map[string]string{"db": "db-1"}, exists("database", "d"))
		Expect(err).NotTo(HaveOccurred())
		_, err = c.Effect(ctx, cloud.KindSetDNS, map[string]string{"host": "s.example.com", "target": "svc-1.cloud.internal"})
		Expect(err).NotTo(HaveOccurred())
		_, err = c.CheckpointClaims(ctx, 4, map[string]string{"db": "db-1", "dns": "s.example.com"}, nil)
		Expect(err).NotTo(HaveOccurred())
		return tok
	}
	BeforeEach(func() {
		ctx = context.Background()
		state = GinkgoT().TempDir()
	})

	It("writes the next seq with the newest consistent state for the next attempt, fenced and counted like any checkpoint", func() {
		lr := startLiveRunText(state, backendScenario+"rollback: consistent\n")
		old := poison(lr)
		tok := lr.attempt()

		cps := lr.checkpoints()
		Expect(cps).To(HaveLen(5))
		rb := cps[4]
		Expect(rb.Seq).To(Equal(int64(5)))
		Expect(rb.RollbackOf).To(Equal(int64(3)), "it replaces the poisoned checkpoint")
		Expect(rb.RollbackFrom).To(Equal(int64(2)), "the newest consistent one before it")
		Expect(rb.Attempt).To(Equal(2))
		Expect(rb.Step).To(Equal(2))
		Expect(rb.StateHash).To(Equal(cps[1].StateHash))
		Expect(*rb.ExpectSeq).To(Equal(int64(4)))
		Expect(rb.RolledPast).To(Equal([]string{"k/step-4/0"}), "the effects journaled after checkpoint 2: shown, not undone")

		events, err := lr.h.history.Events(lr.r.rec.ID)
		Expect(err).NotTo(HaveOccurred())
		last := events[len(events)-1]
		Expect(last.Type).To(Equal(EventRollback))
		Expect(last.Message).To(ContainSubstring("checkpoint 3 (step 3) is poisoned"))
		Expect(last.Message).To(ContainSubstring("attempt 2 resumes from checkpoint 2 (step 2), as checkpoint 5"))

		c := lr.sdk(tok)
		cp, err := c.Resume(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(cp.Seq).To(Equal(int64(5)))
		Expect(cp.Step).To(Equal(2))
		Expect(cp.State).To(MatchJSON(`{"net":"net-1","db":"pending"}`))
		status, body := lr.raw("PUT", "/v1/checkpoint", tok, `{"step":5,"state":{},"expect_seq":4}`)
		Expect(status).To(Equal(409), "expect_seq counts from the rollback")
		Expect(body).To(ContainSubstring("the last checkpoint is seq 5 (step 2)"))
		_, err = lr.sdk(old).Checkpoint(ctx, 5, "zombie")
		Expect(err).To(MatchError(agent.ErrFenced))
		_, err = c.Checkpoint(ctx, 3, map[string]string{"db": "db-1"})
		Expect(err).NotTo(HaveOccurred())

		lr.attempt()
		Expect(lr.checkpoints()).To(HaveLen(6), "a rollback clears the poison: the next attempt needs none")
	})

	It("decides the same from the journal alone when the harness starts again", func() {
		lr := startLiveRunText(state, backendScenario+"rollback: consistent\n")
		poison(lr)
		id := lr.r.rec.ID
		lr.stop() // the harness goes away before attempt 2 begins
		lr = liveRunOf(reopen(state), id)
		lr.attempt()
		cps := lr.checkpoints()
		Expect(cps).To(HaveLen(5))
		Expect(cps[4].RollbackOf).To(Equal(int64(3)))

		lr.stop() // and again after the rollback is durable: no second one
		lr = liveRunOf(reopen(state), id)
		lr.attempt()
		Expect(lr.checkpoints()).To(HaveLen(5))
	})

	It("rolls back to the start when the first checkpoint is poisoned, and not at all without rollback: consistent", func() {
		lr := startLiveRunText(state, backendScenario+"rollback: consistent\n")
		c := lr.sdk(lr.attempt())
		_, err := c.CheckpointClaims(ctx, 1, "x", exists("database", "nope"))
		Expect(err).NotTo(HaveOccurred())
		lr.attempt()
		cps := lr.checkpoints()
		Expect(cps).To(HaveLen(2))
		Expect(cps[1].Step).To(Equal(0))
		Expect(cps[1].RollbackFrom).To(BeZero())
		st, err := lr.h.history.CheckpointState(cps[1])
		Expect(err).NotTo(HaveOccurred())
		Expect(st).To(MatchJSON(`null`))

		plain := startLiveRunText(GinkgoT().TempDir(), backendScenario)
		poison(plain)
		plain.attempt()
		Expect(plain.checkpoints()).To(HaveLen(4), "rollback: none resumes from the last checkpoint, whatever it claims")
	})
})

func reopen(state string) *Harness {
	h, err := Open(context.Background(), Options{StateDir: state})
	Expect(err).NotTo(HaveOccurred())
	return h
}
