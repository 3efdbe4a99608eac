package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// deployTask is a deployment goal the script below reaches.
var deployTask = json.RawMessage(`{"network":"prod-net","database":"prod-db","migration":3,"service":{"name":"api","image":"registry.local/api:1.4.2"},"dns":"api.example.com"}`)

// script drives w through a deployment with a duplicate network, a
// refused kind, an API version change and v2's refusals, prefixing every
// key with prefix; it returns every outcome in order.
func script(ctx context.Context, w world.World, prefix string) []world.Outcome {
	GinkgoHelper()
	var outs []world.Outcome
	n := 0
	do := func(kind, args string) world.Outcome {
		n++
		o := apply(ctx, w, req(fmt.Sprintf("%sk/%d", prefix, n), kind, args, n))
		outs = append(outs, o)
		return o
	}
	net := resultID(do(cloud.KindCreateNetwork, `{"name":"prod-net"}`))
	do(cloud.KindCreateNetwork, `{"name":"prod-net"}`) // the duplicate
	db := resultID(do(cloud.KindCreateDatabase, fmt.Sprintf(`{"name":"prod-db","network_id":%q}`, net)))
	do(cloud.KindRunMigration, fmt.Sprintf(`{"database_id":%q,"version":3}`, db))
	svc := do(cloud.KindDeployService, fmt.Sprintf(`{"name":"api","image":"registry.local/api:1.4.2","database_id":%q}`, db))
	var s struct{ Endpoint string }
	Expect(json.Unmarshal(svc.Result, &s)).To(Succeed())
	do(cloud.KindSetDNS, fmt.Sprintf(`{"host":"api.example.com","target":%q}`, s.Endpoint))
	Expect(do("cloud.nope", `{}`).Status).To(Equal(protocol.StatusFailed))

	prev, err := w.(world.Versioned).SetAPIVersion(ctx, cloud.V2, t0.Add(time.Hour))
	Expect(err).NotTo(HaveOccurred())
	Expect(prev).To(Equal(cloud.V1))
	Expect(do(cloud.KindList, `{"kind":"network"}`).Error.Code).To(Equal("gone"))
	var key struct {
		APIKey string `json:"api_key"`
	}
	Expect(json.Unmarshal(do(cloud.KindIssueAPIKey, `{}`).Result, &key)).To(Succeed())
	do(cloud.KindCreateSnapshot, fmt.Sprintf(`{"db_id":%q,"name":"daily-1","api_key":%q,"retention_days":7}`, db, key.APIKey))
	return outs
}

var _ = Describe("a world over the protocol", func() {
	It("answers every call as the world in-process does: outcomes, lookups, ledger, duplicates, goal, state, versions", func(ctx SpecContext) {
		local := inProcess(ctx, nil)
		url := serveCloud(ctx, world.NewMemStore(), nil)
		cl := dial(ctx, url, remote.Config{})

		Expect(cl.Name()).To(Equal(cloud.Name))
		Expect(cl.APIVersion()).To(Equal(cloud.V1))
		Expect(cl.Kinds()).To(Equal(local.Kinds()))
		d := cl.Description()
		Expect(d.Protocol).To(Equal(remote.Protocol))
		Expect(d.Capabilities).To(Equal(remote.Capabilities{Goal: true, Duplicates: true, Versions: true, Instances: true}))
		Expect(d.Versions).To(HaveLen(2))
		Expect(d.Versions[1].Name).To(Equal(cloud.V2))
		Expect(d.Versions[1].Kinds).To(Equal(cloud.Definition().Versions[1].Kinds))

		Expect(script(ctx, cl, "")).To(Equal(script(ctx, local, "")))
		Expect(cl.APIVersion()).To(Equal(cloud.V2), "set_version's answer moves it")
		Expect(cl.Kinds()).To(Equal(local.Kinds()), "the kinds of v2")

		for _, key := range []string{"k/1", "k/2", "k/7", "k/10", "no-such-key", ""} {
			lo, lfound, lerr := local.Lookup(ctx, key)
			ro, rfound, rerr := cl.Lookup(ctx, key)
			Expect(rerr).NotTo(HaveOccurred())
			Expect(lerr).NotTo(HaveOccurred())
			Expect(rfound).To(Equal(lfound), key)
			Expect(ro).To(Equal(lo), key)
		}
		lledger, err := local.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		rledger, err := cl.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(rledger).To(HaveLen(11), "10 requests and the version change")
		Expect(rledger).To(Equal(lledger))

		ldups, err := local.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		rdups, err := cl.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(rdups).To(HaveLen(1))
		Expect(rdups[0].Keys).To(Equal([]string{"k/1", "k/2"}))
		Expect(rdups).To(Equal(ldups))

		lgoal, err := local.CheckGoal(ctx, deployTask)
		Expect(err).NotTo(HaveOccurred())
		rgoal, err := cl.CheckGoal(ctx, deployTask)
		Expect(err).NotTo(HaveOccurred())
		Expect(rgoal.OK).To(BeTrue(), rgoal.Detail)
		Expect(rgoal).To(Equal(lgoal))
		_, err = cl.CheckGoal(ctx, json.RawMessage(`{"dns": 7}`))
		var refused *remote.RefusedError
		Expect(errors.As(err, &refused)).To(BeTrue(), "a task the world cannot judge is refused: %v", err)
		Expect(refused.Code).To(Equal(remote.CodeBadRequest))

		lsnap, err := local.Snapshot(ctx)
		Expect(err).NotTo(HaveOccurred())
		rsnap, err := cl.Snapshot(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(rsnap).To(MatchJSON(lsnap))

		prev, err := cl.SetAPIVersion(ctx, cloud.V2, t0)
		Expect(err).NotTo(HaveOccurred())
		Expect(prev).To(Equal(cloud.V2), "switching to the current version changes nothing")
		_, err = cl.SetAPIVersion(ctx, "v9", t0)
		Expect(err).To(MatchError(world.ErrUnknownAPIVersion))
		Expect(errors.As(err, &refused)).To(BeTrue())
		Expect(refused.Code).To(Equal(remote.CodeUnknownVersion))
		Expect(err.Error()).To(ContainSubstring("set_version v9"))
		Expect(err).NotTo(MatchError(remote.ErrWorld), "a refusal is not the world failing")
		rledger2, err := cl.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(rledger2).To(Equal(rledger), "neither switch recorded anything")

		again := dial(ctx, url, remote.Config{})
		Expect(again.APIVersion()).To(Equal(cloud.V2), "describe answers the version the world serves now")
	})
})
