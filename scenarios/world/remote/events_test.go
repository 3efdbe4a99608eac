package remote_test

import (
	"encoding/json"
	"errors"
	"net/http/httptest"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/fleet"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

var _ = Describe("world events over the protocol (capability events)", func() {
	It("fires a served fleet's dependency update through event, recorded in its ledger as a world event, and restores an instance from that ledger", func(ctx SpecContext) {
		srv, err := remote.NewServer(ctx, fleet.Definition(), world.NewMemStore(), nil)
		Expect(err).NotTo(HaveOccurred())
		hs := httptest.NewServer(srv)
		DeferCleanup(hs.Close)
		cl := dial(ctx, hs.URL, remote.Config{})
		Expect(cl.Description().Capabilities.Events).To(BeTrue())
		Expect(world.HasEvent(world.EventsOf(cl), fleet.EventDepUpdate)).To(BeTrue(), "the client is a world.Eventful")

		proposed := apply(ctx, cl, req("k/1", fleet.KindProposeCandidate, `{"id":"api-warn","service":"api","change":{"level":"warn"}}`, 1))
		Expect(proposed.Status).To(Equal("done"))
		out, err := cl.FireEvent(ctx, world.Event{Kind: fleet.EventDepUpdate, Args: json.RawMessage(`{"library":"logkit"}`), Now: t0.Add(2 * 60e9)})
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Status).To(Equal("done"))
		Expect(string(out.Result)).To(ContainSubstring(`"library":"logkit"`))

		ledger, err := cl.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(ledger).To(HaveLen(2))
		ev := ledger[1]
		Expect(ev.IsEvent()).To(BeTrue())
		Expect(ev.Kind).To(Equal(fleet.EventDepUpdate))
		Expect(ev.At).To(Equal(t0.Add(2 * 60e9)))

		// The update made api's candidate stale; a shadow restored from the
		// ledger says the same.
		Expect(cl.CreateInstance(ctx, "shadow", ledger)).To(Succeed())
		shadow := cl.Instance("shadow")
		trial := apply(ctx, shadow, req("k/2", fleet.KindTryCandidate, `{"id":"api-warn"}`, 3))
		Expect(string(trial.Result)).To(ContainSubstring(`"passed":false`))
		Expect(string(trial.Result)).To(ContainSubstring("stale"))

		_, err = cl.FireEvent(ctx, world.Event{Kind: "world.meteor", Now: t0})
		Expect(errors.Is(err, world.ErrUnknownEvent)).To(BeTrue(), "%v", err)
		Expect(err).To(MatchError(ContainSubstring("nothing was sent")))
		code, body := post(ctx, hs.URL+remote.PathEvent, `{"instance":"","kind":"world.meteor","now":"2026-01-01T00:00:00Z"}`)
		Expect(code).To(Equal(400))
		Expect(refusal(body).Code).To(Equal(remote.CodeUnknownEvent))
		code, body = post(ctx, hs.URL+remote.PathEvent, `{"instance":"","kind":"world.api_version","args":{"version":"v2"}}`)
		Expect(code).To(Equal(400))
		Expect(refusal(body).Message).To(ContainSubstring("set_version's"))
	})

	It("declares no events capability for a world without them, and its client fires none", func(ctx SpecContext) {
		cl := dial(ctx, serveCloud(ctx, world.NewMemStore(), nil), remote.Config{})
		Expect(cl.Description().Capabilities.Events).To(BeFalse())
		Expect(cl.Events()).To(BeEmpty())
		_, err := cl.FireEvent(ctx, world.Event{Kind: fleet.EventDepUpdate, Now: t0})
		Expect(errors.Is(err, world.ErrUnknownEvent)).To(BeTrue())
	})
})
