package harness

import (
	"context"
	"net/http/httptest"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// claimsScenario names a CEL judge of its own beside the cloud world's.
const claimsScenario = backendScenario + `claims:
  dns_points_at: 'state.resources.exists(r, r.kind == "dns" && r.name == claim.host && r.fields.target == claim.target)'
`

// startLiveRunText is startLiveRun for a scenario of the spec's own.
func startLiveRunText(stateDir, text string) *liveRun {
	ctx := context.Background()
	h, err := Open(ctx, Options{StateDir: stateDir})
	Expect(err).NotTo(HaveOccurred())
	scen, err := scenarios.Parse("claims-test.yaml", []byte(text))
	Expect(err).NotTo(HaveOccurred())
	id, err := h.create(ctx, RunRequest{Scenario: scen})
	Expect(err).NotTo(HaveOccurred())
	return liveRunOf(h, id)
}

func (lr *liveRun) checkpoints() []history.CheckpointRecord {
	cps, err := lr.h.history.Checkpoints(lr.r.rec.ID)
	Expect(err).NotTo(HaveOccurred())
	return cps
}

var _ = Describe("claims on a checkpoint", func() {
	var (
		ctx context.Context
		lr  *liveRun
		tok string
	)
	BeforeEach(func() {
		ctx = context.Background()
		lr = startLiveRunText(GinkgoT().TempDir(), claimsScenario)
		tok = lr.attempt()
		c := lr.sdk(tok)
		_, err := c.Effect(ctx, cloud.KindCreateNetwork, map[string]string{"name": "n"})
		Expect(err).NotTo(HaveOccurred())
		_, err = c.Effect(ctx, cloud.KindSetDNS, map[string]string{"host": "s.example.com", "target": "svc-1.cloud.internal"})
		Expect(err).NotTo(HaveOccurred())
	})

	It("journals the world's judgement with the checkpoint: consistent, poisoned with the reason, or unknown", func() {
		c := lr.sdk(tok)
		_, err := c.CheckpointClaims(ctx, 1, "a", map[string]any{cloud.ClaimExists: map[string]string{"kind": "network", "name": "n"}})
		Expect(err).NotTo(HaveOccurred())
		_, err = c.CheckpointClaims(ctx, 2, "b", []map[string]any{
			{cloud.ClaimExists: map[string]string{"kind": "network", "name": "n"}},
			{cloud.ClaimExists: map[string]string{"kind": "database", "name": "prod-db"}},
		})
		Expect(err).NotTo(HaveOccurred())
		_, err = c.CheckpointClaims(ctx, 3, "c", map[string]any{"weather": "sunny"})
		Expect(err).NotTo(HaveOccurred())
		_, err = c.Checkpoint(ctx, 4, "d")
		Expect(err).NotTo(HaveOccurred())

		cps := lr.checkpoints()
		Expect(cps).To(HaveLen(4))
		Expect(cps[0].Consistency.Verdict).To(Equal(history.Consistent))
		Expect(cps[0].Poisoned()).To(BeFalse())
		Expect(cps[1].Poisoned()).To(BeTrue())
		Expect(cps[1].Consistency.Reason).To(ContainSubstring(`the cloud has no database "prod-db"`))
		Expect(cps[1].Consistency.Claims).To(HaveLen(2))
		Expect(string(cps[1].Claims)).To(ContainSubstring("prod-db"))
		Expect(cps[2].Consistency.Verdict).To(Equal(history.ConsistencyUnknown))
		Expect(cps[2].Consistency.Reason).To(ContainSubstring("weather"))
		Expect(cps[3].Consistency).To(BeNil())
		Expect(cps[3].Claims).To(BeNil())
	})

	It("judges a claim the scenario names by its CEL expression over the world's state", func() {
		c := lr.sdk(tok)
		_, err := c.CheckpointClaims(ctx, 1, nil, map[string]any{"dns_points_at": map[string]string{"host": "s.example.com", "target": "svc-1.cloud.internal"}})
		Expect(err).NotTo(HaveOccurred())
		_, err = c.CheckpointClaims(ctx, 2, nil, map[string]any{"dns_points_at": map[string]string{"host": "s.example.com", "target": "svc-9.cloud.internal"}})
		Expect(err).NotTo(HaveOccurred())
		cps := lr.checkpoints()
		Expect(cps[0].Consistency.Verdict).To(Equal(history.Consistent))
		Expect(cps[1].Consistency.Verdict).To(Equal(history.Poisoned))
		Expect(cps[1].Consistency.Reason).To(ContainSubstring("claims.dns_points_at is false"))
	})

	It("judges the claims sent with done the same way, and keeps free-form ones unjudged", func() {
		Expect(lr.sdk(tok).Done(ctx, protocol.OutcomeSuccess, "done", map[string]any{cloud.ClaimExists: map[string]string{"kind": "service", "name": "api"}})).To(Succeed())
		d, err := lr.h.history.Done(lr.r.rec.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Consistency.Poisoned()).To(BeTrue())
		Expect(d.Consistency.Reason).To(ContainSubstring(`no service "api"`))

		lr2 := startLiveRun(GinkgoT().TempDir(), "")
		Expect(lr2.sdk(lr2.attempt()).Done(ctx, protocol.OutcomeSuccess, "done", "it went well")).To(Succeed())
		d, err = lr2.h.history.Done(lr2.r.rec.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(d.Claims)).To(Equal(`"it went well"`))
		Expect(d.Consistency.Verdict).To(Equal(history.ConsistencyUnknown))
		Expect(d.Consistency.Reason).To(HavePrefix("not judged: claims: want an object"))
	})

	It("refuses claims in no claims shape with 400", func() {
		status, body := lr.raw("PUT", "/v1/checkpoint", tok, `{"step":1,"state":{},"claims":[1,2]}`)
		Expect(status).To(Equal(400))
		Expect(body).To(ContainSubstring("claims: want a list of objects"))
		Expect(lr.checkpoints()).To(BeEmpty())
	})
})

var _ = Describe("claims on a checkpoint, against a remote world", func() {
	It("are judged by the scenario's CEL over the remote world's state; the world's own judge is unknown across the protocol", func(ctx SpecContext) {
		srv, err := remote.NewServer(ctx, cloud.Definition(), world.NewMemStore(), nil)
		Expect(err).NotTo(HaveOccurred())
		hs := httptest.NewServer(srv)
		DeferCleanup(hs.Close)

		h, err := Open(ctx, Options{StateDir: GinkgoT().TempDir()})
		Expect(err).NotTo(HaveOccurred())
		scen, err := scenarios.Parse("claims-remote.yaml", []byte(claimsScenario))
		Expect(err).NotTo(HaveOccurred())
		scen.World = scenarios.World{Name: "cloud", URL: hs.URL, Options: map[string]any{}}
		id, err := h.create(ctx, RunRequest{Scenario: scen, World: hs.URL})
		Expect(err).NotTo(HaveOccurred())
		lr := liveRunOf(h, id)
		c := lr.sdk(lr.attempt())
		_, err = c.Effect(ctx, cloud.KindSetDNS, map[string]string{"host": "s.example.com", "target": "svc-1.cloud.internal"})
		Expect(err).NotTo(HaveOccurred())

		_, err = c.CheckpointClaims(ctx, 1, nil, []map[string]any{
			{"dns_points_at": map[string]string{"host": "s.example.com", "target": "svc-1.cloud.internal"}},
			{"dns_points_at": map[string]string{"host": "s.example.com", "target": "elsewhere"}},
			{cloud.ClaimExists: map[string]string{"kind": "dns", "name": "s.example.com"}},
		})
		Expect(err).NotTo(HaveOccurred())
		cp := lr.checkpoints()[0]
		Expect(cp.Consistency.Verdict).To(Equal(history.Poisoned))
		verdicts := []string{}
		for _, v := range cp.Consistency.Claims {
			verdicts = append(verdicts, v.Verdict)
		}
		Expect(verdicts).To(Equal([]string{world.ClaimHolds, world.ClaimContradicted, world.ClaimUnknown}))
	})
})
