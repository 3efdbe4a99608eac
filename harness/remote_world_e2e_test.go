package harness_test

import (
	"net/http"
	"net/http/httptest"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// serveCloud serves the built-in cloud world over the world protocol on
// loopback, for the spec.
func serveCloud(ctx SpecContext) (*httptest.Server, *remote.Server) {
	srv, err := remote.NewServer(ctx, cloud.Definition(), world.NewMemStore(), nil)
	Expect(err).NotTo(HaveOccurred())
	ts := httptest.NewServer(srv)
	DeferCleanup(ts.Close)
	return ts, srv
}

var _ = Describe("A run against a world over the world protocol (the served cloud)", func() {
	It("gets the verdict, reason, effects and history digest the in-process world gets, and a report after the world is gone", func(ctx SpecContext) {
		ts, _ := serveCloud(ctx)
		h := newHarness(ctx, nil)
		req := harness.RunRequest{Scenario: deploy(), Faults: faults("kill@step:3")}
		local, err := h.Run(ctx, req)
		Expect(err).NotTo(HaveOccurred())
		req.World = ts.URL
		over, err := h.Run(ctx, req)
		Expect(err).NotTo(HaveOccurred())
		Expect(over.Verdict).To(Equal(harness.VerdictPass), over.Reason)
		Expect(over.Verdict).To(Equal(local.Verdict))
		Expect(over.Reason).To(Equal(local.Reason))
		Expect(over.Effects).To(Equal(local.Effects))
		Expect(over.HistoryDigest).To(Equal(local.HistoryDigest))

		// Every effect the run journaled done is in the world, under the
		// run's own scope.
		c, err := remote.Dial(ctx, ts.URL, remote.Config{Scope: over.RunID})
		Expect(err).NotTo(HaveOccurred())
		ledger, err := c.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(ledger).NotTo(BeEmpty())
		effects, err := h.History().Effects(over.RunID)
		Expect(err).NotTo(HaveOccurred())
		for _, e := range effects {
			out, found, err := c.Lookup(ctx, e.ID)
			Expect(err).NotTo(HaveOccurred())
			Expect(found).To(BeTrue(), "effect %s is not in the world", e.ID)
			Expect(out.Status).To(Equal(e.Status))
		}

		// The world goes; the run's history still reads, its ledger from
		// what the harness journaled of the world's answers.
		ts.Close()
		run, err := h.History().Load(ctx, over.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(run.Ledger).To(HaveLen(len(ledger)))
		for i := range ledger {
			Expect(run.Ledger[i].Key).To(Equal(ledger[i].Key))
			Expect(run.Ledger[i].Outcome).To(Equal(ledger[i].Outcome))
		}
	}, SpecTimeout(3*time.Minute))

	It("refuses, before any run is recorded, a world that does not answer or is not the one asked for", func(ctx SpecContext) {
		h := newHarness(ctx, nil)
		ts := httptest.NewServer(http.NotFoundHandler())
		dead := ts.URL
		ts.Close()
		_, err := h.Run(ctx, harness.RunRequest{Scenario: deploy(), World: dead})
		Expect(err).To(MatchError(harness.ErrWorldUnreachable))
		Expect(err.Error()).To(ContainSubstring(dead))

		other, err := remote.NewServer(ctx, renamed(cloud.Definition(), "elsewhere"), world.NewMemStore(), nil)
		Expect(err).NotTo(HaveOccurred())
		ots := httptest.NewServer(other)
		defer ots.Close()
		_, err = h.Run(ctx, harness.RunRequest{Scenario: deploy(), World: ots.URL})
		Expect(err).To(MatchError(harness.ErrWorldMismatch))
		Expect(err.Error()).To(ContainSubstring(`world "cloud"`))
		Expect(err.Error()).To(ContainSubstring(`world "elsewhere"`))

		runs, err := h.History().Runs()
		Expect(err).NotTo(HaveOccurred())
		Expect(runs).To(BeEmpty())
	}, SpecTimeout(time.Minute))
})

// renamed is def under another name.
func renamed(def world.Definition, name string) world.Definition {
	def.Name = name
	return def
}
