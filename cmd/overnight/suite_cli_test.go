package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/suite"
)

func decodeSuite(data []byte) suite.Result {
	GinkgoHelper()
	var res suite.Result
	Expect(json.Unmarshal(data, &res)).To(Succeed(), "a suite's JSON result:\n%s", data)
	return res
}

func readSuite(path string) suite.Result {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	return decodeSuite(data)
}

// digests maps each case of a suite result to its run's history digest.
func digests(res suite.Result) map[string]string {
	out := map[string]string{}
	for _, r := range res.Runs {
		out[suite.Case{Scenario: r.Scenario, Agent: r.Agent, Seed: r.Seed}.ID()] = r.Verdict + " " + r.HistoryDigest
	}
	return out
}

var _ = Describe("overnight suite", func() {
	It("fails its requirement with exit 1 when a variant is broken, names it, and writes JSON, JUnit and Markdown", func(ctx SpecContext) {
		state, dir := stateDir(), GinkgoT().TempDir()
		js, junit, md := filepath.Join(dir, "out.json"), filepath.Join(dir, "out.xml"), filepath.Join(dir, "summary.md")
		o := overnight(ctx, state, nil, "suite", "deploy", "--agents", "all", "--seeds", "2", "--fault", "kill@step:3",
			"--parallel", "4", "--require", "pass^1>=0.9", "--json", js, "--junit", junit, "--md", md, "-q")
		Expect(o.code).To(Equal(1), o.stderr+o.stdout)
		Expect(o.stdout).To(ContainSubstring("requirement pass^1>=0.9: failed"))

		res := readSuite(js)
		Expect(res.Requirement).NotTo(BeNil())
		Expect(res.Requirement.Outcome).To(Equal(suite.Failed))
		Expect(res.Requirement.Detail).To(ContainSubstring("deploy/naive: 0.0000 (0 of 2 passed, 2 failed, 0 unknown)"))
		Expect(res.Requirement.Detail).NotTo(ContainSubstring("deploy/default:"), "the variant that holds is not named")
		Expect(res.Groups).To(HaveLen(2))
		Expect(res.Groups[0].Agent).To(Equal("default"))
		Expect(res.Groups[0].Passes).To(Equal(2))
		Expect(res.Groups[1].Agent).To(Equal("naive"))
		Expect(res.Groups[1].Fails).To(Equal(2))
		Expect(res.Summary.PassK).To(Equal(suite.KValues{0.5, 0.5}))
		Expect(res.Runs).To(HaveLen(4))
		for _, r := range res.Runs {
			Expect(r.RunID).NotTo(BeEmpty())
			Expect(r.Reproduce).To(HavePrefix("overnight --state " + state + " run deploy --seed "))
		}

		var x struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
		}
		data, err := os.ReadFile(junit)
		Expect(err).NotTo(HaveOccurred())
		Expect(xml.Unmarshal(data, &x)).To(Succeed())
		Expect(x.Tests).To(Equal(5), "4 runs and the requirement's clause")
		Expect(x.Failures).To(Equal(3))
		summary, err := os.ReadFile(md)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(summary)).To(HavePrefix("## overnight suite: FAIL (requirement not met)"))

		// A failing run's reproducing command gives the same history.
		bad := res.Runs[2]
		Expect(bad.Agent).To(Equal("naive"))
		args := strings.Fields(bad.Reproduce)[3:] // past "overnight --state DIR"
		again := overnight(ctx, stateDir(), nil, append(args, "-o", "json", "-q")...)
		Expect(again.code).To(Equal(1), again.stderr)
		Expect(decodeResult(again.stdout).HistoryDigest).To(Equal(bad.HistoryDigest))
	}, SpecTimeout(4*time.Minute))

	It("split into shards by --shard i/n gives, merged, the unsharded suite; merge refuses a missing shard", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		args := []string{"suite", "deploy", "--agents", "all", "--seeds", "3", "--fault", "kill@step:3", "--parallel", "4", "-q"}
		whole := overnight(ctx, stateDir(), nil, append(args, "--json", "-")...)
		Expect(whole.code).To(Equal(1), whole.stderr)
		want := decodeSuite([]byte(whole.stdout))
		Expect(want.Runs).To(HaveLen(6))

		var parts []string
		for i := 1; i <= 3; i++ {
			part := filepath.Join(dir, "part"+string(rune('0'+i))+".json")
			o := overnight(ctx, stateDir(), nil, append(args, "--shard", string(rune('0'+i))+"/3", "--json", part)...)
			Expect(o.code).To(BeElementOf(0, 1), o.stderr)
			parts = append(parts, part)
		}
		m := overnight(ctx, stateDir(), nil, append([]string{"suite", "merge", "--require", "pass^2>=0.5", "--json", "-"}, parts...)...)
		Expect(m.code).To(Equal(0), m.stderr, "pass^2 is (1 + 0)/2")
		merged := decodeSuite([]byte(m.stdout))
		Expect(merged.Groups).To(Equal(want.Groups))
		Expect(merged.Summary).To(Equal(want.Summary))
		Expect(digests(merged)).To(Equal(digests(want)), "each case ran to the same history in its shard")
		Expect(merged.Merged).To(HaveLen(3))

		m = overnight(ctx, stateDir(), nil, "suite", "merge", parts[0], parts[2], "-o", "json")
		Expect(m.code).To(Equal(3))
		Expect(errorJSON(m)["message"]).To(ContainSubstring("shard 2/3 missing"))
	}, SpecTimeout(6*time.Minute))

	It("stops cleanly on Ctrl-C, leaving each run it stopped resumable, and runs again in full", func(ctx SpecContext) {
		state, dir := stateDir(), GinkgoT().TempDir()
		file := slowScenario("400ms")
		js := filepath.Join(dir, "part.json")
		cmd := exec.CommandContext(ctx, bin, "--state", state, "suite", file, "--agents", "slow", "--seeds", "4", "--parallel", "2", "--json", js)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		Expect(cmd.Start()).To(Succeed())
		// Both first runs are under way once they are listed as running.
		Eventually(func() int {
			o := overnight(ctx, state, nil, "runs", "-o", "json")
			return strings.Count(o.stdout, `"status": "running"`)
		}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Equal(2))
		Expect(cmd.Process.Signal(os.Interrupt)).To(Succeed())
		err := cmd.Wait()
		Expect(err).To(HaveOccurred())
		Expect(cmd.ProcessState.ExitCode()).To(Equal(3), errb.String())
		Expect(errb.String()).To(ContainSubstring("interrupted"))

		left, err := harnesstest.Containers(ctx, dockerCli, state)
		Expect(err).NotTo(HaveOccurred())
		Expect(left).To(BeEmpty(), "Ctrl-C must remove the suite's containers")
		part := readSuite(js)
		Expect(part.Suite.Interrupted).To(BeTrue())
		var stopped []string
		for _, r := range part.Runs {
			if strings.HasPrefix(r.Reason, "interrupted") {
				Expect(r.Verdict).To(Equal("unknown"))
				stopped = append(stopped, r.RunID)
			}
		}
		Expect(stopped).NotTo(BeEmpty())
		for _, id := range stopped {
			r := overnight(ctx, state, nil, "resume", id, "-o", "json", "-q")
			Expect(r.code).To(Equal(0), r.stderr)
			Expect(decodeResult(r.stdout).Verdict).To(Equal("pass"))
		}

		again := overnight(ctx, state, nil, "suite", file, "--agents", "slow", "--seeds", "4", "--parallel", "4", "--json", "-", "-q")
		Expect(again.code).To(Equal(0), again.stderr)
		res := decodeSuite([]byte(again.stdout))
		Expect(res.Summary.Passes).To(Equal(4))
		Expect(res.Suite.Interrupted).To(BeFalse())
	}, SpecTimeout(5*time.Minute))

	It("re-runs first the cases an earlier suite of the same flags saw fail, and reports them apart", func(ctx SpecContext) {
		state := stateDir()
		base := []string{"suite", "deploy", "--agents", "naive", "--fault", "kill@step:3", "--parallel", "2", "-q"}
		first := overnight(ctx, state, nil, append(base, "--seeds", "1", "--json", "-")...)
		Expect(first.code).To(Equal(1), first.stderr)
		Expect(decodeSuite([]byte(first.stdout)).Corpus.Added).To(Equal(1))

		next := overnight(ctx, state, nil, append(base, "--seeds", "2-3", "--json", "-")...)
		Expect(next.code).To(Equal(1), next.stderr)
		res := decodeSuite([]byte(next.stdout))
		Expect(res.Runs).To(HaveLen(3))
		Expect(res.Runs[0].Seed).To(Equal(int64(1)))
		Expect(res.Runs[0].FromCorpus).To(BeTrue())
		Expect(res.Runs[0].Counted).To(BeFalse(), "outside the seeds asked for: reported, not a trial")
		Expect(res.Groups[0].N).To(Equal(2))
		Expect(res.Corpus.Rerun).To(Equal(1))
		Expect(res.Corpus.StillFail).To(Equal(1))

		other := overnight(ctx, state, nil, "suite", "deploy", "--agents", "naive", "--seeds", "2-3", "--parallel", "2", "--json", "-", "-q")
		Expect(other.code).To(Equal(0), other.stderr, "without the fault, naive passes")
		Expect(decodeSuite([]byte(other.stdout)).Runs).To(HaveLen(2), "another configuration: another corpus")

		none := overnight(ctx, state, nil, append(base, "--seeds", "2-3", "--no-corpus", "--json", "-")...)
		Expect(decodeSuite([]byte(none.stdout)).Runs).To(HaveLen(2))
	}, SpecTimeout(5*time.Minute))

	It("says what is wrong with its flags, as JSON too", func(ctx SpecContext) {
		state := stateDir()
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--require", "pass^3>>0.9"}, "want METRIC OP NUMBER"},
			{[]string{"--shard", "5/4"}, "want i/n with 1 <= i <= n"},
			{[]string{"--seeds", "x"}, `"x" is not a seed`},
			{[]string{"--agents", "clever"}, `no scenario of the suite has an agent "clever"`},
			{[]string{"--json", "-", "--md", "-"}, "all write to stdout"},
			{[]string{"--http-replay", "r-recorded"}, "declares no HTTP API, so --http-replay r-recorded has nothing to answer"},
			{[]string{"--mcp-replay", "r-recorded"}, "declares no MCP server, so --mcp-replay r-recorded has nothing to answer"},
		} {
			o := overnight(ctx, state, nil, append([]string{"suite", "deploy", "-o", "json"}, c.args...)...)
			Expect(o.code).To(Equal(3), "%v: %s", c.args, o.stderr)
			Expect(o.stderr).To(ContainSubstring(c.want), "%v", c.args)
			Expect(errorJSON(o)["code"]).To(Equal("usage"), "%v", c.args)
		}
	})
})
