package harness_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/reflect"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world/httpworld"
)

// etcdScenario is examples/etcd/scenario.yaml pointed at etcd at url and at
// the agent built at bin, with more agent variants given as YAML lines.
func etcdScenario(url, bin, variants string) *scenarios.Scenario {
	GinkgoHelper()
	path := filepath.Join(harnesstest.ModuleRoot(), "examples", "etcd", "scenario.yaml")
	raw, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	text := strings.ReplaceAll(string(raw), "http://127.0.0.1:2379", url)
	text = strings.ReplaceAll(text, "./bin/etcd-agent", bin)
	text = strings.Replace(text, "\nagents:\n", "\nagents:\n"+variants, 1)
	s, err := scenarios.Parse(path, []byte(text))
	Expect(err).NotTo(HaveOccurred())
	return s
}

var _ = Describe("an agent calling etcd through the gateway's HTTP pass-through", Ordered, func() {
	var agentBin string
	BeforeAll(func(ctx SpecContext) {
		harnesstest.EtcdBinary(ctx, GinkgoT())
		dir, err := os.MkdirTemp("", "ovn-etcd-agent-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		agentBin = filepath.Join(dir, "etcd-agent")
		Expect(harnesstest.Build(ctx, "./examples/etcd/agent", agentBin, fmt.Sprintf("etcd-e2e-%d", time.Now().UnixNano()))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			eng := docker.New(dockerCli, docker.Options{})
			if ref, err := eng.ImageRef(ctx, docker.ImageSpec{InitBinary: initBinary, AgentBinary: agentBin}); err == nil {
				Expect(eng.RemoveImage(ctx, ref)).To(Succeed())
			}
		})
	}, NodeTimeout(5*time.Minute))

	// startEtcd starts etcd with authentication for the spec, its token
	// in the harness's environment (this process's) as ETCD_TOKEN.
	startEtcd := func(ctx SpecContext) *harnesstest.Etcd {
		e := harnesstest.StartEtcd(ctx, GinkgoT(), GinkgoT().TempDir())
		DeferCleanup(e.Stop)
		GinkgoT().Setenv("ETCD_TOKEN", e.Token)
		return e
	}
	versions := func(ctx SpecContext, e *harnesstest.Etcd) []int {
		GinkgoHelper()
		var out []int
		for i := range 3 {
			v, err := e.Version(ctx, fmt.Sprintf("demo/%d", i))
			Expect(err).NotTo(HaveOccurred())
			out = append(out, v)
		}
		return out
	}

	It("killed after etcd's second put, passes when it sends Idempotency-Key: etcd wrote each key once", func(ctx SpecContext) {
		e := startEtcd(ctx)
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: etcdScenario(e.URL, agentBin, "")})
		Expect(err).NotTo(HaveOccurred())
		logs, _ := h.Logs(res.RunID)
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v\n%+v", res.Reason, res.Invariants, logs)
		Expect(res.Attempts).To(Equal(2), "the attempt killed, and the one that resumed")
		Expect(res.Outcome).To(Equal(protocol.OutcomeSuccess))
		Expect(res.Effects.Executed).To(Equal(3))
		Expect(res.Effects.Deduplicated).To(Equal(1), "the put killed in flight was answered from the journal")
		Expect(res.Effects.Duplicates).To(BeZero())
		Expect(invariant(res, harness.InvGoalReached).Detail).To(ContainSubstring("POST /v3/kv/range of HTTP API etcd answered"))
		Expect(versions(ctx, e)).To(Equal([]int{1, 1, 1}), "etcd's own version counter: every key written once")

		run, err := h.History().Load(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		var kinds []string
		for _, eff := range run.Effects {
			kinds = append(kinds, eff.Kind+" "+eff.Key)
		}
		Expect(kinds).To(Equal([]string{"http.etcd.put put-0", "http.etcd.put put-1", "http.etcd.put put-2"}))
		Expect(run.Ledger).To(HaveLen(4), "the journal of etcd's answers, read without etcd")
		Expect(run.Ledger[3].Kind).To(Equal(httpworld.EventProbe), "the three puts, then the goal's probe")
	}, SpecTimeout(3*time.Minute))

	It("fails with no-duplicate-effects when it sends no Idempotency-Key and starts over: etcd counts the second writes too", func(ctx SpecContext) {
		e := startEtcd(ctx)
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: etcdScenario(e.URL, agentBin, ""), Agent: "naive"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictFail), res.Reason)
		dup := invariant(res, harness.InvNoDuplicateEffects)
		Expect(dup.Verdict).To(Equal(harness.VerdictFail))
		Expect(dup.Detail).To(ContainSubstring(`http.etcd.put "` + harnesstest.B64("demo/0") + `" created 2 times`))
		Expect(dup.Detail).To(ContainSubstring(`http.etcd.put "` + harnesstest.B64("demo/1") + `" created 2 times`))
		Expect(res.Effects.Duplicates).To(Equal(2))
		Expect(res.Effects.Unkeyed).To(Equal(5), "two puts before the kill, three after")
		Expect(invariant(res, harness.InvGoalReached).Verdict).To(Equal(harness.VerdictPass), "every key is there: only the count of writes is wrong")
		Expect(versions(ctx, e)).To(Equal([]int{2, 2, 1}), "etcd's own version counter agrees: demo/0 and demo/1 written twice")
	}, SpecTimeout(3*time.Minute))

	It("never lets etcd's credential into the sandbox: the agent sees the token-bearing base URL, and etcd refuses a wrong credential", func(ctx SpecContext) {
		e := startEtcd(ctx)
		h := newHarness(ctx, nil)
		scen := etcdScenario(e.URL, agentBin, "  env: {binary: "+testBinary+", args: [env]}\n")
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, Agent: "env", MaxAttempts: 1, Faults: faults()})
		Expect(err).NotTo(HaveOccurred())
		out := stdout(h, res.RunID, 1)
		Expect(out).To(MatchRegexp(`(?m)^OVERNIGHT_HTTP_ETCD=http://127\.0\.0\.1:7070/v1/http/etcd/[0-9a-f]{64}$`))
		Expect(out).NotTo(ContainSubstring(e.Token), "etcd's token never enters the sandbox")
		Expect(out).NotTo(ContainSubstring("ETCD_TOKEN"))

		before, err := e.Revision(ctx)
		Expect(err).NotTo(HaveOccurred())
		GinkgoT().Setenv("ETCD_TOKEN", "not-etcds-token")
		res, err = h.Run(ctx, harness.RunRequest{Scenario: scen, MaxAttempts: 1, Faults: faults()})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Outcome).To(Equal(protocol.OutcomeFailure))
		Expect(stdout(h, res.RunID, 1)+stderr(h, res.RunID, 1)).To(ContainSubstring("401 Unauthorized"), "etcd checks the credential the gateway adds")
		after, err := e.Revision(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(after).To(Equal(before), "nothing was written")
	}, SpecTimeout(3*time.Minute))
})

var _ = Describe("a verify-gated put to etcd, reflected on against a scratch etcd", Ordered, func() {
	var bin string
	BeforeAll(func(ctx SpecContext) {
		harnesstest.EtcdBinary(ctx, GinkgoT())
		dir, err := os.MkdirTemp("", "ovn-etcd-reflect-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		bin = filepath.Join(dir, "etcd-agent")
		Expect(harnesstest.Build(ctx, "./examples/etcd/agent", bin, fmt.Sprintf("etcd-reflect-%d", time.Now().UnixNano()))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			eng := docker.New(dockerCli, docker.Options{})
			if ref, err := eng.ImageRef(ctx, docker.ImageSpec{InitBinary: initBinary, AgentBinary: bin}); err == nil {
				Expect(eng.RemoveImage(ctx, ref)).To(Succeed())
			}
		})
	}, NodeTimeout(5*time.Minute))

	// setUpWith starts etcd and a harness with the reflection loop, and
	// reads examples/etcd/reflect.yaml pointed at both — without its
	// shadow: block when noShadow; acting on world: cloud too when
	// withWorld (the agent then creates a network there before its puts).
	setUpWith := func(ctx SpecContext, noShadow, withWorld bool) (*harnesstest.Etcd, *harness.Harness, *scenarios.Scenario) {
		e := harnesstest.StartEtcd(ctx, GinkgoT(), GinkgoT().TempDir())
		DeferCleanup(e.Stop)
		GinkgoT().Setenv("ETCD_TOKEN", e.Token)
		path := filepath.Join(harnesstest.ModuleRoot(), "examples", "etcd", "reflect.yaml")
		raw, err := os.ReadFile(path)
		Expect(err).NotTo(HaveOccurred())
		text := strings.ReplaceAll(strings.ReplaceAll(string(raw), "http://127.0.0.1:2379", e.URL), "./bin/etcd-agent", bin)
		if noShadow {
			from, to := strings.Index(text, "    # A scratch etcd"), strings.Index(text, "goal:")
			Expect(from).To(BeNumerically(">", 0))
			Expect(to).To(BeNumerically(">", from))
			text = text[:from] + text[to:]
		}
		if withWorld {
			text = strings.Replace(text, "\nagent:\n", "\nworld: cloud\nagent:\n", 1)
			// The cloud world checks the task has the shape of its own goal,
			// which goal: (the etcd probe) replaces here.
			text = strings.Replace(text, "\ntask:\n", "\ntask:\n  network: shadow-net\n  dns: api.example.com\n  service: {name: api}\n", 1)
		}
		scen, err := scenarios.Parse(path, []byte(text))
		Expect(err).NotTo(HaveOccurred())
		ext, err := reflect.New(reflect.Options{})
		Expect(err).NotTo(HaveOccurred())
		return e, newHarnessWith(ctx, dockerCli, nil, harness.Options{Extension: ext}), scen
	}
	setUp := func(ctx SpecContext, noShadow bool) (*harnesstest.Etcd, *harness.Harness, *scenarios.Scenario) {
		return setUpWith(ctx, noShadow, false)
	}

	It("holds the agent's puts until a lesson is verified on a shadow etcd restored from the run, and the real etcd sees only the run's requests", func(ctx SpecContext) {
		e, h, scen := setUp(ctx, false)
		before, err := e.Revision(ctx)
		Expect(err).NotTo(HaveOccurred())
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen})
		Expect(err).NotTo(HaveOccurred())
		logs, _ := h.Logs(res.RunID)
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v\n%+v", res.Reason, res.Invariants, logs)
		Expect(res.Reflections).To(HaveLen(1))
		r := res.Reflections[0]
		Expect(r.Decision).To(Equal(history.DecisionVerify), "%+v", r)
		Expect(r.Reproduced.Failed).To(Equal(r.Reproduced.Runs), "the refusal came back in every replay on a shadow etcd")
		Expect(r.Lesson.Text).To(ContainSubstring("without the lease"))
		Expect(r.Verification.Verdict).To(Equal(harness.VerdictPass), "verified on a fresh shadow etcd")
		Expect(res.Gate.Released).To(BeNumerically(">=", 2), "the corrected puts passed the gate on the strength of the verification")
		Expect(res.Gate.Denied).To(BeZero())

		// The shadows: each isolated run wrote to its own scratch etcd — the
		// verification's holds the key the real run wrote before the
		// refusal (the restore) and the two it wrote itself.
		refls, err := h.History().Reflections(res.RunID)
		Expect(err).NotTo(HaveOccurred())
		verification, err := h.History().Load(ctx, refls[0].Verification.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(verification.Record.Isolated.Parent).To(Equal(res.RunID))
		var done []string
		for _, eff := range verification.Effects {
			if eff.Status == protocol.StatusDone {
				done = append(done, eff.Key)
			}
		}
		Expect(done).To(Equal([]string{"put-0", "put-1/no-lease", "put-2/no-lease"}), "put-0 came with the fork; the other two the verification sent")

		// The real etcd: only the real run's writes — put-0, then the two
		// corrected puts after the verified lesson — moved its revision;
		// nothing of the replays or the verification reached it.
		after, err := e.Revision(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(after - before).To(BeEquivalentTo(3))
		for i := range 3 {
			v, err := e.Version(ctx, fmt.Sprintf("demo/%d", i))
			Expect(err).NotTo(HaveOccurred())
			Expect(v).To(Equal(1))
		}
		run, err := h.History().Load(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		executed := 0
		for _, eff := range run.Effects {
			executed += eff.Executions
		}
		Expect(executed).To(Equal(4), "three puts done and the refused one: every request the real etcd received")
		Expect(os.ReadDir(filepath.Join(h.StateDir(), "shadows"))).To(BeEmpty(), "every scratch etcd removed with its isolated run")
	}, SpecTimeout(5*time.Minute))

	// gaveUp runs the scenario without its shadow: block (and with world:
	// cloud when withWorld): the reflection gives up, its reason holding
	// each of reasons, and the shut gate lets no put through.
	gaveUp := func(ctx SpecContext, withWorld bool, reasons ...string) {
		e, h, scen := setUpWith(ctx, true, withWorld)
		before, err := e.Revision(ctx)
		Expect(err).NotTo(HaveOccurred())
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictFail), res.Reason)
		Expect(res.Reflections).To(HaveLen(1))
		r := res.Reflections[0]
		Expect(r.Decision).To(Equal(history.DecisionGaveUp))
		for _, reason := range reasons {
			Expect(r.Reason).To(ContainSubstring(reason))
		}
		after, err := e.Revision(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(after-before).To(BeEquivalentTo(1), "put-0 alone: the refused put changed nothing, and no put passed the shut gate")
	}

	It("says no shadow can be built when the API declares none, and keeps the gate shut: the real etcd gets nothing more", func(ctx SpecContext) {
		gaveUp(ctx, false, "HTTP API etcd declares no shadow")
	}, SpecTimeout(5*time.Minute))

	// revisions polls etcd's revision until the spec ends, each sample
	// with its wall time.
	type sample struct {
		at, end time.Time // the read began at at and was answered at end
		rev     int64
	}
	revisions := func(ctx SpecContext, e *harnesstest.Etcd) func() []sample {
		var mu sync.Mutex
		var out []sample
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				at := time.Now()
				if rev, err := e.Revision(ctx); err == nil {
					mu.Lock()
					out = append(out, sample{at, time.Now(), rev})
					mu.Unlock()
				}
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
		return func() []sample {
			close(stop)
			<-done
			mu.Lock()
			defer mu.Unlock()
			return append([]sample(nil), out...)
		}
	}

	It("with world: cloud as well, shadows both — the cloud world rebuilt, a scratch etcd restored — and the real etcd's revision stands still through the reflection", func(ctx SpecContext) {
		e, h, scen := setUpWith(ctx, false, true)
		Expect(scen.HasWorld()).To(BeTrue())
		stop := revisions(ctx, e)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen})
		Expect(err).NotTo(HaveOccurred())
		samples := stop()
		logs, _ := h.Logs(res.RunID)
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v\n%+v", res.Reason, res.Invariants, logs)
		Expect(res.Reflections).To(HaveLen(1))
		r := res.Reflections[0]
		Expect(r.Decision).To(Equal(history.DecisionVerify), "%+v", r)
		Expect(r.Verification.Verdict).To(Equal(harness.VerdictPass), "verified on the shadows")

		// The verification's worlds: the cloud network came with the fork
		// (rebuilt in its own key space), the puts went to its scratch etcd.
		refls, err := h.History().Reflections(res.RunID)
		Expect(err).NotTo(HaveOccurred())
		verification, err := h.History().Load(ctx, refls[0].Verification.RunID)
		Expect(err).NotTo(HaveOccurred())
		var kinds []string
		for _, l := range verification.Ledger {
			kinds = append(kinds, l.Kind)
		}
		Expect(kinds).To(ContainElement("cloud.create_network"), "the shadow cloud world holds the network the real run created")
		Expect(kinds).To(ContainElement("http.etcd.put"))
		var done []string
		for _, eff := range verification.Effects {
			if eff.Status == protocol.StatusDone {
				done = append(done, eff.Key)
			}
		}
		Expect(done).To(Equal([]string{"network", "put-0", "put-1/no-lease", "put-2/no-lease"}))

		// The real etcd, read before and after the reflection — from the
		// first isolated run's start to the verification's end: unchanged.
		var ids []string
		for _, rp := range refls[0].Replays {
			ids = append(ids, rp.RunID)
		}
		ids = append(ids, refls[0].Verification.RunID)
		var from, to time.Time
		for _, id := range ids {
			rec, err := h.History().Run(id)
			Expect(err).NotTo(HaveOccurred())
			if from.IsZero() || rec.StartedAt.Before(from) {
				from = rec.StartedAt
			}
			if rec.EndedAt.After(to) {
				to = rec.EndedAt
			}
		}
		var trace []string
		last := int64(-1)
		for _, smp := range samples {
			if smp.rev != last {
				trace = append(trace, fmt.Sprintf("%s rev %d", smp.at.Format("15:04:05.000"), smp.rev))
				last = smp.rev
			}
		}
		for _, id := range ids {
			rec, _ := h.History().Run(id)
			trace = append(trace, fmt.Sprintf("isolated %s %s .. %s", id, rec.StartedAt.Format("15:04:05.000"), rec.EndedAt.Format("15:04:05.000")))
		}
		realRun, err := h.History().Load(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		for _, l := range realRun.Ledger {
			trace = append(trace, fmt.Sprintf("real ledger %d %s %s %s", l.Seq, l.Kind, l.Key, l.Outcome.Status))
		}
		// Every read made wholly within the reflection answers the same
		// revision: the real run's, after its put-0.
		var during []int64
		for _, smp := range samples {
			if !smp.at.Before(from) && !smp.end.After(to) {
				during = append(during, smp.rev)
			}
		}
		Expect(during).NotTo(BeEmpty(), "revisions read during the reflection")
		for _, rev := range during {
			Expect(rev).To(Equal(during[0]), "etcd's revision moved during the reflection (%s .. %s):\n%s", from, to, strings.Join(trace, "\n"))
		}
		final := samples[len(samples)-1].rev
		Expect(final-during[0]).To(BeEquivalentTo(2), "after the reflection, the real run's two corrected puts alone")
		GinkgoWriter.Printf("etcd's revision through the reflection (%s): %d reads, all %d; %d at the end\n", to.Sub(from), len(during), during[0], final)
		run, err := h.History().Load(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.ReadDir(filepath.Join(h.StateDir(), "shadows"))).To(BeEmpty())
		Expect(run.Record.Result.Verdict).To(Equal(harness.VerdictPass))
	}, SpecTimeout(5*time.Minute))

	It("with world: cloud as well, says no shadow can be built when the API declares none, and keeps the gate shut for its guarded kinds: the real etcd gets nothing more", func(ctx SpecContext) {
		gaveUp(ctx, true, "HTTP API etcd declares no shadow", "world cloud could be shadowed")
	}, SpecTimeout(5*time.Minute))
})

func stderr(h *harness.Harness, runID string, n int) string {
	GinkgoHelper()
	logs, err := h.Logs(runID)
	Expect(err).NotTo(HaveOccurred())
	Expect(len(logs)).To(BeNumerically(">=", n))
	return logs[n-1].Stderr
}
