package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
)

// approveScenario is deploy whose DNS change waits for a person, for at
// most approval.
func approveScenario(approval string) string {
	raw, err := os.ReadFile(filepath.Join(harnesstest.ModuleRoot(), "scenarios", "builtin", "deploy.yaml"))
	Expect(err).NotTo(HaveOccurred())
	text := strings.Replace(string(raw), "limits:\n", "limits:\n  approval: "+approval+"\n", 1) +
		"gate:\n  - {kinds: cloud.set_dns, policy: approve}\n"
	file := filepath.Join(GinkgoT().TempDir(), "approve.yaml")
	Expect(os.WriteFile(file, []byte(text), 0o644)).To(Succeed())
	return file
}

// startRun starts `overnight run` in the background and returns its id and
// a function that waits for its result.
func startRun(ctx SpecContext, state string, args ...string) (string, func() outcome) {
	cmd := exec.CommandContext(ctx, bin, append([]string{"--state", state, "run"}, args...)...)
	var out strings.Builder
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(cmd.Start()).To(Succeed())
	line, err := bufio.NewReader(stderr).ReadString('\n')
	Expect(err).NotTo(HaveOccurred())
	id := strings.TrimSpace(strings.TrimPrefix(line, "run "))
	return id, func() outcome {
		rest, _ := io.ReadAll(stderr)
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return outcome{code, out.String(), string(rest)}
	}
}

// heldKeys polls `overnight gate` until an effect is held, and returns the keys.
func heldKeys(ctx SpecContext, state, runID string) []string {
	var keys []string
	Eventually(func(g Gomega) {
		o := overnight(ctx, state, nil, "gate", runID, "-o", "json")
		g.Expect(o.code).To(Equal(0), o.stderr)
		var held struct {
			Held []harness.HeldEffect `json:"held"`
		}
		g.Expect(json.Unmarshal([]byte(o.stdout), &held)).To(Succeed())
		g.Expect(held.Held).NotTo(BeEmpty())
		keys = nil
		for _, h := range held.Held {
			keys = append(keys, h.Key)
			g.Expect(h.Policy).To(Equal("approve"))
			g.Expect(h.Kind).To(Equal("cloud.set_dns"))
		}
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	return keys
}

var _ = Describe("a person at the gate", func() {
	It("approves a held effect through the live run's control socket, and the run goes on", func(ctx SpecContext) {
		state := stateDir()
		id, wait := startRun(ctx, state, approveScenario("1m"), "-o", "json")
		keys := heldKeys(ctx, state, id)
		Expect(keys).To(Equal([]string{"step-5/0"}))
		o := overnight(ctx, state, nil, "approve", id, "step-5/0", "--by", "alice")
		Expect(o.code).To(Equal(0), o.stderr)
		r := wait()
		Expect(r.code).To(Equal(0), r.stderr)
		res := decodeResult(r.stdout)
		Expect(res.Gate.Held).To(Equal(1))
		Expect(res.Gate.Approved).To(Equal(1))
		o = overnight(ctx, state, nil, "gate", id, "-o", "json")
		Expect(o.stdout).To(MatchJSON(`{"held": []}`))
		rep := overnight(ctx, state, nil, "reflect", id)
		Expect(rep.code).To(Equal(0), rep.stderr)
		Expect(rep.stdout).To(ContainSubstring("| approved | person:alice | approved by alice |"))
	}, SpecTimeout(3*time.Minute))

	It("denies one: the effect never reaches the world", func(ctx SpecContext) {
		state := stateDir()
		id, wait := startRun(ctx, state, approveScenario("1m"), "--max-attempts", "1", "-o", "json")
		heldKeys(ctx, state, id)
		o := overnight(ctx, state, nil, "deny", id, "step-5/0", "--by", "bob")
		Expect(o.code).To(Equal(0), o.stderr)
		r := wait()
		Expect(r.code).To(Equal(1), r.stderr)
		res := decodeResult(r.stdout)
		Expect(res.Gate.Denied).To(Equal(1))
		Expect(invariantDetail(res, "goal-reached")).To(ContainSubstring("no DNS record"))
		o = overnight(ctx, state, nil, "deny", id, "step-5/0")
		Expect(o.code).To(Equal(3), "nothing is held any more")
	}, SpecTimeout(3*time.Minute))

	It("denies it when nobody decides within limits.approval", func(ctx SpecContext) {
		state := stateDir()
		o := overnight(ctx, state, nil, "run", approveScenario("2s"), "--max-attempts", "1", "-o", "json", "-q")
		Expect(o.code).To(Equal(1), o.stderr)
		res := decodeResult(o.stdout)
		Expect(res.Gate.Held).To(Equal(1))
		Expect(res.Gate.Denied).To(Equal(1))
		rep := overnight(ctx, state, nil, "reflect", res.RunID, "--format", "json")
		Expect(rep.stdout).To(ContainSubstring(`"by": "timeout"`))
	}, SpecTimeout(3*time.Minute))
})

func invariantDetail(res harness.Result, name string) string {
	for _, ir := range res.Invariants {
		if ir.Name == name {
			return ir.Detail
		}
	}
	return ""
}

var _ = Describe("the reflection loop from the command line", func() {
	It("runs deploy-v2 through exactly one reflection to a pass, writes it up, and lists its isolated re-runs only with --all", func(ctx SpecContext) {
		state := stateDir()
		o := overnight(ctx, state, nil, "run", "deploy-v2", "--seed", "3", "-o", "json", "-q")
		Expect(o.code).To(Equal(0), o.stderr)
		res := decodeResult(o.stdout)
		Expect(res.Reflections).To(HaveLen(1))
		Expect(res.Reflections[0].Decision).To(Equal("verified"))
		for _, format := range []string{"md", "json", "html"} {
			rep := overnight(ctx, state, nil, "reflect", res.RunID, "--format", format)
			Expect(rep.code).To(Equal(0), rep.stderr)
			Expect(rep.stdout).To(ContainSubstring("api_contract_change"))
		}
		expectIsolatedListedWithAll(ctx, state, res.RunID)
		u := overnight(ctx, state, nil, "run", "deploy-v2", "--agent", "unteachable", "-o", "json", "-q")
		Expect(u.code).To(Equal(1), u.stderr)
		Expect(decodeResult(u.stdout).Reason).To(HavePrefix("reflection r1 gave up"))
	}, SpecTimeout(4*time.Minute))

	DescribeTable("resumes to the same decisions after a SIGKILL of the harness",
		func(ctx SpecContext, agent, at, verdict, reason string) {
			args := []string{"deploy-v2", "--seed", "3", "-o", "json"}
			if agent != "" {
				args = append(args, "--agent", agent)
			}
			state := stateDir()
			id := killAt(ctx, state, at, append([]string{"run"}, args...)...)
			r := overnight(ctx, state, nil, "resume", id, "-o", "json", "-q")
			Expect(r.code).To(BeNumerically("<", 3), r.stderr)
			res := decodeResult(r.stdout)
			Expect(res.Verdict).To(Equal(verdict), res.Reason)
			Expect(res.Reason).To(ContainSubstring(reason))
			Expect(res.Reflections).To(HaveLen(1))
			Expect(res.Reflections[0].Reproduced.Failed).To(Equal(3))
		},
		Entry("during a replay", "", "reflection r1: replaying attempt 1", "pass", "the agent reported done", SpecTimeout(4*time.Minute)),
		Entry("during verification", "", "reflection r1: verifying lesson", "pass", "the agent reported done", SpecTimeout(4*time.Minute)),
		Entry("while an effect is held", "unteachable", "gate: step-4/1 cloud.deploy_service held", "fail", "reflection r1 gave up", SpecTimeout(4*time.Minute)),
	)

	DescribeTable("resumes a crash loop's reflection to the same renewed attempt after a SIGKILL of the harness",
		func(ctx SpecContext, at string, shadowsLeft bool) {
			state := stateDir()
			id := killAt(ctx, state, at, "run", filepath.Join("..", "..", "reflect", "testdata", "deploy-fragile.yaml"), "-o", "json")
			// The killed harness's shadow runs are not resumable: the
			// reflection redoes its stage with new ones.
			l := overnight(ctx, state, nil, "runs", "--all", "-o", "json")
			Expect(l.code).To(Equal(0), l.stderr)
			var listed struct {
				Runs []struct {
					RunID  string `json:"run_id"`
					Status string `json:"status"`
					Parent string `json:"parent"`
				} `json:"runs"`
			}
			Expect(json.Unmarshal([]byte(l.stdout), &listed)).To(Succeed())
			unfinished := 0
			for _, run := range listed.Runs {
				if run.Parent == id && run.Status != "finished" {
					unfinished++
					u := overnight(ctx, state, nil, "resume", run.RunID, "-q")
					Expect(u.code).To(Equal(3), "resume of unfinished shadow %s: %s", run.RunID, u.stderr)
					Expect(u.stderr).To(ContainSubstring("an isolated run is not resumable; resume run " + id))
				}
			}
			if shadowsLeft {
				Expect(unfinished).To(BeNumerically(">", 0), "the harness was killed while its replays ran")
			}
			r := overnight(ctx, state, nil, "resume", id, "-o", "json", "-q")
			Expect(r.code).To(Equal(0), r.stderr)
			res := decodeResult(r.stdout)
			Expect(res.Verdict).To(Equal("pass"), res.Reason)
			Expect(res.Attempts).To(Equal(4), "the three of the loop, then the one renewed")
			Expect(res.Reflections).To(HaveLen(1), "the crash loop seen again on resume joins the decision on record")
			Expect(res.Reflections[0].Decision).To(Equal("verified"))
		},
		Entry("during a replay", "  [r1 replay 1/2] attempt 1 started", true, SpecTimeout(4*time.Minute)),
		Entry("after the decision, before the renewed attempt", "reflection r1 verified", false, SpecTimeout(4*time.Minute)),
	)
})

// expectIsolatedListedWithAll checks that `overnight runs` lists id, the
// only run of state made by a person, and leaves the isolated re-runs of
// its reflection to --all, which names each one's purpose and parent.
func expectIsolatedListedWithAll(ctx SpecContext, state, id string) {
	list := func(args ...string) []harness.RunSummary {
		l := overnight(ctx, state, nil, append([]string{"runs", "-o", "json"}, args...)...)
		Expect(l.code).To(Equal(0), l.stderr)
		var listed struct {
			Runs []harness.RunSummary `json:"runs"`
		}
		Expect(json.Unmarshal([]byte(l.stdout), &listed)).To(Succeed(), l.stdout)
		return listed.Runs
	}
	runs := list()
	Expect(runs).To(HaveLen(1), "the run itself, not its reflection's replays, counterfactual and verification")
	Expect(runs[0].RunID).To(Equal(id))
	all := list("--all")
	Expect(len(all)).To(BeNumerically(">", 1))
	purposes := []string{}
	for _, r := range all {
		if r.RunID != id {
			Expect(r.Parent).To(Equal(id), r.RunID)
			purposes = append(purposes, r.Purpose)
		}
	}
	Expect(purposes).To(ContainElements("r1 replay 1/3", "r1 verification"))

	table := overnight(ctx, state, nil, "runs")
	Expect(table.code).To(Equal(0), table.stderr)
	lines := strings.Split(strings.TrimSpace(table.stdout), "\n")
	Expect(lines).To(HaveLen(3), table.stdout)
	Expect(lines[1]).To(HavePrefix(id))
	Expect(lines[2]).To(Equal(fmt.Sprintf("(%d isolated re-runs of reflections not listed; --all lists them)", len(all)-1)))
	table = overnight(ctx, state, nil, "runs", "--all")
	Expect(table.code).To(Equal(0), table.stderr)
	Expect(table.stdout).To(ContainSubstring("ISOLATED RE-RUN"))
	Expect(table.stdout).To(MatchRegexp(`(?m)  r1 replay 1/3 of %s$`, id))
	Expect(table.stdout).To(MatchRegexp(`(?m)^%s .*  -$`, id))
}
