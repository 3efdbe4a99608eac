package remote_test

import (
	"encoding/json"
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

var _ = Describe("instances", func() {
	It("are made empty or restored from a ledger, isolated from the world and from each other, and dropped", func(ctx SpecContext) {
		cl := dial(ctx, serveCloud(ctx, world.NewMemStore(), nil), remote.Config{})
		script(ctx, cl, "")
		ledger, err := cl.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		state, err := cl.Snapshot(ctx)
		Expect(err).NotTo(HaveOccurred())

		Expect(cl.CreateInstance(ctx, "shadow", ledger)).To(Succeed())
		shadow := cl.Instance("shadow")
		Expect(shadow.APIVersion()).To(Equal(cloud.V2), "create_instance answers the version the restore left")
		sledger, err := shadow.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(sledger).To(Equal(ledger), "restored request by request, and the version change")
		sstate, err := shadow.Snapshot(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(sstate).To(MatchJSON(state))

		Expect(cl.CreateInstance(ctx, "empty", nil)).To(Succeed())
		empty := cl.Instance("empty")
		eledger, err := empty.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(eledger).To(BeEmpty())
		Expect(empty.APIVersion()).To(Equal(cloud.V1))

		o := apply(ctx, shadow, req("k/shadow", cloud.KindIssueAPIKey, `{}`, 99))
		Expect(o.Result).To(MatchJSON(`{"api_key":"key-2"}`), "the shadow goes on from the world's state")
		o = apply(ctx, empty, req("k/1", cloud.KindCreateNetwork, `{"name":"scratch"}`, 99))
		Expect(resultID(o)).To(Equal("net-1"))
		_, found, err := shadow.Lookup(ctx, "k/shadow")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		for _, other := range []*remote.Client{cl, empty} {
			_, found, err := other.Lookup(ctx, "k/shadow")
			Expect(err).NotTo(HaveOccurred())
			Expect(found).To(BeFalse(), "the shadow's request reached no one else")
		}
		after, err := cl.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(after).To(Equal(ledger), "the world itself is untouched")

		var refused *remote.RefusedError
		err = cl.CreateInstance(ctx, "shadow", nil)
		Expect(errors.As(err, &refused)).To(BeTrue(), "%v", err)
		Expect(refused.Code).To(Equal(remote.CodeInstanceExists))
		Expect(refused.Status).To(Equal(409))

		Expect(cl.DropInstance(ctx, "shadow")).To(Succeed())
		_, err = shadow.Ledger(ctx)
		Expect(errors.As(err, &refused)).To(BeTrue(), "%v", err)
		Expect(refused.Code).To(Equal(remote.CodeUnknownInstance))
		Expect(refused.Status).To(Equal(404))
		Expect(err.Error()).To(ContainSubstring("ledger on instance shadow"))
		Expect(err).NotTo(MatchError(remote.ErrWorld))
		err = cl.DropInstance(ctx, "shadow")
		Expect(errors.As(err, &refused)).To(BeTrue(), "%v", err)
		Expect(refused.Code).To(Equal(remote.CodeUnknownInstance))

		err = cl.CreateInstance(ctx, "", nil)
		Expect(errors.As(err, &refused)).To(BeTrue(), "%v", err)
		Expect(refused.Code).To(Equal(remote.CodeBadRequest))
		Expect(refused.Message).To(ContainSubstring(`"instance"`))
		_, err = cl.Instance("never").Snapshot(ctx)
		Expect(errors.As(err, &refused)).To(BeTrue(), "%v", err)
		Expect(refused.Code).To(Equal(remote.CodeUnknownInstance))
	})

	It("refuses a ledger that replays otherwise than recorded with replay_differs, and leaves no instance", func(ctx SpecContext) {
		cl := dial(ctx, serveCloud(ctx, world.NewMemStore(), nil), remote.Config{})
		script(ctx, cl, "")
		ledger, err := cl.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		forged := append([]world.LedgerEntry(nil), ledger...)
		forged[2].Outcome.Result = json.RawMessage(`{"id":"db-9","name":"prod-db","network_id":"net-1"}`)

		err = cl.CreateInstance(ctx, "shadow", forged)
		Expect(err).To(MatchError(world.ErrNotReplayable))
		var refused *remote.RefusedError
		Expect(errors.As(err, &refused)).To(BeTrue())
		Expect(refused.Code).To(Equal(remote.CodeReplayDiffers))
		Expect(refused.Status).To(Equal(409))
		Expect(refused.Message).To(ContainSubstring("entry 3"))
		_, err = cl.Instance("shadow").Ledger(ctx)
		Expect(errors.As(err, &refused)).To(BeTrue())
		Expect(refused.Code).To(Equal(remote.CodeUnknownInstance), "no half-restored instance is left")
		Expect(cl.CreateInstance(ctx, "shadow", ledger)).To(Succeed(), "the name is free again")
	})
})
