package harness

import (
	"bytes"
	"net/http/httptest"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

var _ = Describe("The journal of a served world's answers", func() {
	// liveRunOn is a live run of the backend scenario acting on the world
	// at url ("": the in-process cloud).
	liveRunOn := func(ctx SpecContext, url string) *liveRun {
		h, err := Open(ctx, Options{StateDir: GinkgoT().TempDir()})
		Expect(err).NotTo(HaveOccurred())
		scen, err := scenarios.Parse("backend-test.yaml", []byte(backendScenario))
		Expect(err).NotTo(HaveOccurred())
		if url != "" { // as Run does with RunRequest.World
			scen.World = scenarios.World{Name: scen.World.Name, URL: url, Options: scen.World.Options}
		}
		id, err := h.create(ctx, RunRequest{Scenario: scen, World: url})
		Expect(err).NotTo(HaveOccurred())
		return liveRunOf(h, id)
	}

	It("costs no sync nor write of its own: the effect's durable result, written after it, makes it durable", func(ctx SpecContext) {
		srv, err := remote.NewServer(ctx, cloud.Definition(), world.NewMemStore(), nil)
		Expect(err).NotTo(HaveOccurred())
		ts := httptest.NewServer(srv)
		DeferCleanup(ts.Close)

		syncsPerEffect := func(lr *liveRun) uint64 {
			c := lr.sdk(lr.attempt())
			args := map[string]string{"host": "h.example.com", "target": "svc-1.cloud.internal"}
			before := lr.h.j.Stats().Syncs
			res, err := c.EffectWithKey(ctx, "dns-1", cloud.KindSetDNS, args)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Status).To(Equal("done"))
			return lr.h.j.Stats().Syncs - before
		}
		in := liveRunOn(ctx, "")
		Expect(syncsPerEffect(in)).To(BeEquivalentTo(3), "the in-process world: intent, the world's commit, result")
		served := liveRunOn(ctx, ts.URL)
		Expect(syncsPerEffect(served)).To(BeEquivalentTo(2), "a served world: intent, result (the answer's record rides on the result's sync)")

		// The answer is in the journal, readable at once, as the world
		// gave it.
		m, ok := served.r.world.(*mirrored)
		Expect(ok).To(BeTrue(), "a run on a served world drives it mirrored")
		journaled, err := m.journal.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		inWorld, err := m.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(journaled).To(HaveLen(1))
		Expect(inWorld).To(HaveLen(1))
		Expect(journaled[0].Key).To(Equal(inWorld[0].Key))
		Expect(journaled[0].Outcome).To(Equal(inWorld[0].Outcome))

		// Written in the result's own Badger transaction: the same version.
		var result, answer uint64
		Expect(served.h.j.Versions(nil, func(k []byte, v uint64, _ func() ([]byte, error)) error {
			switch {
			case bytes.HasPrefix(k, []byte("fx/")) && bytes.HasSuffix(k, []byte("/dns-1")):
				result = v
			case bytes.Contains(k, []byte("/ledger/")):
				answer = v
			}
			return nil
		})).To(Succeed())
		Expect(result).NotTo(BeZero())
		Expect(answer).To(Equal(result), "the answer's record and the effect's result, one transaction")
	}, SpecTimeout(60e9))
})
