package harness_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world/httpworld"
)

var _ = Describe("an HTTP replay of a run recorded against a real etcd", Ordered, func() {
	var (
		bin  string
		etcd *harnesstest.Etcd
		h    *harness.Harness
		scen *scenarios.Scenario
		rec  *harness.Result
	)
	BeforeAll(func(ctx SpecContext) {
		harnesstest.EtcdBinary(ctx, GinkgoT())
		dir, err := os.MkdirTemp("", "ovn-etcd-replay-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		bin = filepath.Join(dir, "etcd-agent")
		Expect(harnesstest.Build(ctx, "./examples/etcd/agent", bin, fmt.Sprintf("etcd-replay-%d", time.Now().UnixNano()))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			eng := docker.New(dockerCli, docker.Options{})
			if ref, err := eng.ImageRef(ctx, docker.ImageSpec{InitBinary: initBinary, AgentBinary: bin}); err == nil {
				Expect(eng.RemoveImage(ctx, ref)).To(Succeed())
			}
		})

		// The recording: examples/etcd/scenario.yaml in mode record, the
		// well-behaved agent killed after its second put.
		etcd = harnesstest.StartEtcd(ctx, GinkgoT(), GinkgoT().TempDir())
		DeferCleanup(etcd.Stop)
		GinkgoT().Setenv("ETCD_TOKEN", etcd.Token)
		path := filepath.Join(harnesstest.ModuleRoot(), "examples", "etcd", "scenario.yaml")
		raw, err := os.ReadFile(path)
		Expect(err).NotTo(HaveOccurred())
		text := strings.ReplaceAll(strings.ReplaceAll(string(raw), "http://127.0.0.1:2379", etcd.URL), "./bin/etcd-agent", bin)
		text = strings.Replace(text, "    credentials:", "    mode: record\n    credentials:", 1)
		scen, err = scenarios.Parse(path, []byte(text))
		Expect(err).NotTo(HaveOccurred())
		Expect(scen.HTTP[0].Mode).To(Equal(scenarios.HTTPRecord))
		h = newHarness(ctx, nil)
		rec, err = h.Run(ctx, harness.RunRequest{Scenario: scen})
		Expect(err).NotTo(HaveOccurred())
		Expect(rec.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v", rec.Reason, rec.Invariants)
		Expect(rec.ReplayDivergence).To(BeNil(), "a recording diverges from nothing")
	}, NodeTimeout(5*time.Minute))

	It("journals the goal's probe with the recording: its request and etcd's answer", func(ctx SpecContext) {
		run, err := h.History().Load(ctx, rec.RunID)
		Expect(err).NotTo(HaveOccurred())
		var probes []string
		for _, e := range run.Ledger {
			if e.Kind == httpworld.EventProbe {
				probes = append(probes, string(e.Args)+" -> "+string(e.Outcome.Result))
			}
		}
		Expect(probes).To(HaveLen(1))
		Expect(probes[0]).To(ContainSubstring(`"route":"POST /v3/kv/range"`))
		Expect(probes[0]).To(ContainSubstring(`"count":"3"`), "etcd's answer: three keys under demo/")
	})

	It("names the first request the recording cannot answer, never sends it, and judges nothing of the world: unknown, not a pass", func(ctx SpecContext) {
		before, err := etcd.Revision(ctx)
		Expect(err).NotTo(HaveOccurred())
		// The naive agent starts over after the kill, unkeyed: its second
		// put of demo/0 is a request the recording holds once.
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, Agent: "naive", HTTPReplay: rec.RunID})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictUnknown), "%s\n%+v", res.Reason, res.Invariants)
		d := res.ReplayDivergence
		Expect(d).NotTo(BeNil())
		Expect(d.API).To(Equal("etcd"))
		Expect(d.Kind).To(Equal("http.etcd.put"))
		Expect(d.Route).To(Equal("POST /v3/kv/put"))
		Expect(d.Ordinal).To(BeEquivalentTo(3), "demo/0, demo/1, then demo/0 again")
		Expect(d.Occurrence).To(Equal(2))
		Expect(d.Recording).To(Equal(rec.RunID))
		for _, name := range []string{harness.InvGoalReached, harness.InvNoDuplicateEffects} {
			ir := invariant(res, name)
			Expect(ir.Verdict).To(Equal(harness.VerdictUnknown), "%s: %s", name, ir.Detail)
			Expect(ir.Detail).To(ContainSubstring("request 3 to HTTP API etcd"))
		}
		b, err := json.Marshal(res)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(ContainSubstring(`"replay_divergence":{"api":"etcd","kind":"http.etcd.put","route":"POST /v3/kv/put","ordinal":3,"occurrence":2`))
		after, err := etcd.Revision(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(after).To(Equal(before), "a replay sends nothing upstream")
	}, SpecTimeout(3*time.Minute))

	It("judges goal-reached from the recorded probe with etcd stopped: a faithful replay passes without contacting etcd", func(ctx SpecContext) {
		etcd.Stop()
		_, err := etcd.Revision(ctx)
		Expect(err).To(HaveOccurred(), "etcd is gone")
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, HTTPReplay: rec.RunID})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v", res.Reason, res.Invariants)
		Expect(res.ReplayDivergence).To(BeNil())
		goal := invariant(res, harness.InvGoalReached)
		Expect(goal.Verdict).To(Equal(harness.VerdictPass))
		Expect(goal.Detail).To(ContainSubstring(`POST /v3/kv/range of HTTP API etcd answered {"count":"3"`))
		Expect(res.HistoryDigest).To(Equal(rec.HistoryDigest), "the replay did what the recording did")
	}, SpecTimeout(3*time.Minute))
})
