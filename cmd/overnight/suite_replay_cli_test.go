package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/sandbox/docker"
)

var _ = Describe("overnight suite --http-replay", func() {
	It("replays every run of the suite from a run recorded against a real etcd, with etcd stopped", func(ctx SpecContext) {
		harnesstest.EtcdBinary(ctx, GinkgoT())
		dir := GinkgoT().TempDir()
		agent := filepath.Join(dir, "bin", "etcd-agent")
		Expect(harnesstest.Build(ctx, "./examples/etcd/agent", agent, fmt.Sprintf("suite-replay-%d", time.Now().UnixNano()))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			eng := docker.New(dockerCli, docker.Options{})
			if ref, err := eng.ImageRef(ctx, docker.ImageSpec{InitBinary: sandboxBin, AgentBinary: agent}); err == nil {
				Expect(eng.RemoveImage(ctx, ref)).To(Succeed())
			}
		})
		etcd := harnesstest.StartEtcd(ctx, GinkgoT(), GinkgoT().TempDir())
		DeferCleanup(etcd.Stop)
		raw, err := os.ReadFile(filepath.Join(harnesstest.ModuleRoot(), "examples", "etcd", "scenario.yaml"))
		Expect(err).NotTo(HaveOccurred())
		file := filepath.Join(dir, "etcd.yaml")
		Expect(os.WriteFile(file, []byte(strings.ReplaceAll(string(raw), "http://127.0.0.1:2379", etcd.URL)), 0o644)).To(Succeed())
		env := []string{"ETCD_TOKEN=" + etcd.Token}

		state := stateDir()
		o := overnight(ctx, state, env, "run", file, "--output", "json")
		Expect(o.code).To(Equal(0), o.stderr+o.stdout)
		recorded := decodeResult(o.stdout)

		etcd.Stop()
		o = overnight(ctx, state, env, "suite", file, "--seeds", "1-2", "--http-replay", recorded.RunID, "--json", "-", "-q")
		Expect(o.code).To(Equal(0), o.stderr+o.stdout)
		res := decodeSuite([]byte(o.stdout))
		Expect(res.Runs).To(HaveLen(2))
		for _, r := range res.Runs {
			Expect(r.Verdict).To(Equal("pass"), "%s: %s", r.RunID, r.Reason)
			Expect(r.ReplayDivergence).To(BeNil())
			Expect(r.HistoryDigest).To(Equal(recorded.HistoryDigest), "each replay did what the recording did")
			Expect(r.Reproduce).To(ContainSubstring("--http-replay " + recorded.RunID))
		}

		// The naive agent diverges from the recording: unknown, not a pass,
		// the first divergence named in the suite's JSON.
		o = overnight(ctx, state, env, "suite", file, "--agents", "naive", "--seeds", "1", "--http-replay", recorded.RunID, "--json", "-", "-q")
		res = decodeSuite([]byte(o.stdout))
		Expect(res.Runs).To(HaveLen(1), o.stderr)
		Expect(res.Runs[0].Verdict).To(Equal("unknown"), res.Runs[0].Reason)
		Expect(res.Runs[0].ReplayDivergence).NotTo(BeNil())
		Expect(res.Runs[0].ReplayDivergence.Route).To(Equal("POST /v3/kv/put"))
		Expect(res.Runs[0].ReplayDivergence.Ordinal).To(BeEquivalentTo(3))
	}, SpecTimeout(5*time.Minute))
})
