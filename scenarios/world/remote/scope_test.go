package remote_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

var _ = Describe("a scoped client", func() {
	It("sees only its own keys and the world's events, renumbered, on a world runs share", func(ctx SpecContext) {
		url := serveCloud(ctx, world.NewMemStore(), nil)
		whole := dial(ctx, url, remote.Config{})
		a := dial(ctx, url, remote.Config{Scope: "run-a"})
		b := whole.WithScope("run-b")
		Expect(b.Scope()).To(Equal("run-b"))

		// Interleaved: each run makes a network named "shared" once (a
		// duplicate only to the world as a whole), then its own twice (a
		// duplicate within the run); the API changes version; each run
		// issues itself a v2 key.
		outs := map[string][]world.Outcome{}
		n := 0
		both := func(kind, args string) {
			for _, v := range []struct {
				c   *remote.Client
				run string
			}{{a, "a"}, {b, "b"}} {
				n++
				key := []string{"k/1", "k/2", "k/3", "k/4"}[len(outs[v.run])]
				body := args
				if body == "own" {
					body = `{"name":"net-` + v.run + `"}`
				}
				outs[v.run] = append(outs[v.run], apply(ctx, v.c, req(key, kind, body, n)))
			}
		}
		both(cloud.KindCreateNetwork, `{"name":"shared"}`)
		both(cloud.KindCreateNetwork, "own")
		both(cloud.KindCreateNetwork, "own")
		_, err := whole.SetAPIVersion(ctx, cloud.V2, t0.Add(time.Hour))
		Expect(err).NotTo(HaveOccurred())
		both(cloud.KindIssueAPIKey, `{}`)

		for _, v := range []struct {
			c   *remote.Client
			run string
		}{{a, "a"}, {b, "b"}} {
			ledger, err := v.c.Ledger(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(ledger).To(HaveLen(5), "four requests and the version change")
			var keys []string
			for i, e := range ledger {
				Expect(e.Seq).To(Equal(int64(i+1)), "renumbered in order")
				keys = append(keys, e.Key)
			}
			Expect(keys).To(Equal([]string{"k/1", "k/2", "k/3", "", "k/4"}))
			Expect(ledger[3].Kind).To(Equal(world.EventAPIVersion))
			Expect(ledger[0].Outcome).To(Equal(outs[v.run][0]))
			Expect(ledger[4].Outcome).To(Equal(outs[v.run][3]))

			for i, key := range []string{"k/1", "k/2", "k/3", "k/4"} {
				o, found, err := v.c.Lookup(ctx, key)
				Expect(err).NotTo(HaveOccurred())
				Expect(found).To(BeTrue())
				Expect(o).To(Equal(outs[v.run][i]), "%s's own %s", v.run, key)
			}
			_, found, err := v.c.Lookup(ctx, "run-b/k/1")
			Expect(err).NotTo(HaveOccurred())
			Expect(found).To(BeFalse(), "a scope cannot reach into another")

			dups, err := v.c.Duplicates(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(dups).To(HaveLen(1), "the shared name is no duplicate of one run")
			Expect(dups[0].Name).To(Equal("net-" + v.run))
			Expect(dups[0].Keys).To(Equal([]string{"k/2", "k/3"}))
			Expect(dups[0].Count).To(Equal(2))
			Expect(dups[0].IDs).To(HaveLen(2))
		}
		Expect(outs["a"][1]).NotTo(Equal(outs["b"][1]), "each run made its own network")

		ledger, err := whole.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(ledger).To(HaveLen(9))
		Expect(ledger[0].Key).To(Equal("run-a/k/1"))
		Expect(ledger[1].Key).To(Equal("run-b/k/1"))
		dups, err := whole.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(dups).To(HaveLen(3), "shared, net-a and net-b, to the world as a whole")
	})

	It("restores its ledger into an instance with the keys as they are, which a shared world may not replay", func(ctx SpecContext) {
		url := serveCloud(ctx, world.NewMemStore(), nil)
		a := dial(ctx, url, remote.Config{Scope: "run-a"})
		apply(ctx, dial(ctx, url, remote.Config{Scope: "run-b"}), req("k/1", cloud.KindCreateNetwork, `{"name":"b"}`, 0))
		apply(ctx, a, req("k/1", cloud.KindCreateNetwork, `{"name":"a"}`, 1))
		ledger, err := a.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		err = a.CreateInstance(ctx, "shadow", ledger)
		Expect(err).To(MatchError(world.ErrNotReplayable), "run-a's network is net-2 in the shared world, net-1 alone")
		Expect(err.Error()).To(ContainSubstring("net-2"))
	})
})
