package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// agentPage is the page an agent's author follows. Its code blocks marked
// <!-- page-test: NAME --> are what this spec runs, copied out of the page
// itself, so the page and the spec cannot drift apart.
const agentPage = "docs/writing-an-agent.md"

// pageMarker marks the fenced code block on the next line.
var pageMarker = regexp.MustCompile(`^<!-- page-test: (\S+) -->$`)

// pageBlocks returns the marked code blocks of the Markdown file page, by
// name.
func pageBlocks(page string) map[string]string {
	GinkgoHelper()
	data, err := os.ReadFile(page)
	Expect(err).NotTo(HaveOccurred())
	lines := strings.Split(string(data), "\n")
	blocks := map[string]string{}
	for i := 0; i < len(lines); i++ {
		m := pageMarker.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		name := m[1]
		Expect(blocks).NotTo(HaveKey(name), "%s:%d: a second block marked %s", page, i+1, name)
		Expect(i+1 < len(lines) && strings.HasPrefix(lines[i+1], "```")).To(BeTrue(),
			"%s:%d: the marker of %s must be followed by a fenced code block", page, i+1, name)
		j := i + 2
		for j < len(lines) && lines[j] != "```" {
			j++
		}
		Expect(j).To(BeNumerically("<", len(lines)), "%s:%d: block %s is never closed", page, i+2, name)
		blocks[name] = strings.Join(lines[i+2:j], "\n") + "\n"
		i = j
	}
	return blocks
}

// pageShell runs a shell block of the page in dir, as an author's shell
// would: outside this module, with no go.work and no GOFLAGS of ours.
func pageShell(ctx context.Context, dir, script string) {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-eu", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "in %s:\n%s\n%s", dir, script, out)
}

// pageRuns parses the page's `overnight ...` command lines into their
// arguments, the scenario file given by its path in dir.
func pageRuns(block, scenarioName, dir string) [][]string {
	GinkgoHelper()
	var runs [][]string
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		Expect(fields[0]).To(Equal("overnight"), "%s: a run line that is not an overnight command: %q", agentPage, line)
		args := fields[1:]
		for i, a := range args {
			if a == scenarioName {
				args[i] = filepath.Join(dir, scenarioName)
			}
		}
		runs = append(runs, args)
	}
	return runs
}

// runEffects reads a finished run's effects from the state dir's journal.
func runEffects(state, runID string) ([]history.EffectRecord, *history.DoneRecord) {
	GinkgoHelper()
	j, err := journal.Open(state, journal.Options{ReadOnly: true})
	Expect(err).NotTo(HaveOccurred())
	defer func() { Expect(j.Close()).To(Succeed()) }()
	r := history.NewReader(j, harness.DefaultWorlds())
	effects, err := r.Effects(runID)
	Expect(err).NotTo(HaveOccurred())
	done, err := r.Done(runID)
	Expect(err).NotTo(HaveOccurred())
	return effects, done
}

var _ = Describe("the agent of docs/writing-an-agent.md, built as the page says", Ordered, func() {
	const scenarioName = "my-scenario.yaml"
	var blocks map[string]string
	var dir string // the agent's own module

	BeforeAll(func(ctx SpecContext) {
		root := harnesstest.ModuleRoot()
		blocks = pageBlocks(filepath.Join(root, agentPage))
		for _, name := range []string{"setup.sh", "main.go", "build.sh", scenarioName, "run.sh", "gate.yaml"} {
			Expect(blocks).To(HaveKey(name), "%s has no code block marked %s", agentPage, name)
		}

		// An empty directory outside this module: the page's commands make
		// the agent's module there, the SDK taken from this checkout.
		top := GinkgoT().TempDir()
		setup := blocks["setup.sh"]
		Expect(setup).To(ContainSubstring("/path/to/overnight"), "the page's setup names the checkout as /path/to/overnight")
		pageShell(ctx, top, strings.ReplaceAll(setup, "/path/to/overnight", root))
		entries, err := os.ReadDir(top)
		Expect(err).NotTo(HaveOccurred())
		Expect(entries).To(HaveLen(1), "the page's setup makes one directory, the agent's module")
		dir = filepath.Join(top, entries[0].Name())
		Expect(filepath.Join(dir, "go.work")).NotTo(BeAnExistingFile())

		Expect(os.WriteFile(filepath.Join(dir, "main.go"), []byte(blocks["main.go"]), 0o644)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, scenarioName), []byte(blocks[scenarioName]), 0o644)).To(Succeed())
		pageShell(ctx, dir, blocks["build.sh"])
		agentBin := filepath.Join(dir, "bin", "myagent")
		Expect(agentBin).To(BeAnExistingFile())

		// The sandbox image made around the agent goes with the spec.
		DeferCleanup(func(ctx SpecContext) {
			eng := docker.New(dockerCli, docker.Options{})
			ref, err := eng.ImageRef(ctx, docker.ImageSpec{InitBinary: sandboxBin, AgentBinary: agentBin})
			Expect(err).NotTo(HaveOccurred())
			Expect(eng.RemoveImage(ctx, ref)).To(Succeed())
		})
	}, NodeTimeout(8*time.Minute))

	It("passes every run the page shows, under its fault", func(ctx SpecContext) {
		runs := pageRuns(blocks["run.sh"], scenarioName, dir)
		var kinds []string
		for _, args := range runs {
			for i, a := range args {
				if a == "--fault" && i+1 < len(args) {
					kind, _, _ := strings.Cut(args[i+1], "@")
					kinds = append(kinds, kind)
				}
			}
		}
		Expect(kinds).To(ContainElements("kill", "effect-5xx"), "the page runs its agent through a kill and a transient failure")

		state := stateDir()
		for _, args := range runs {
			By("overnight " + strings.Join(args, " "))
			o := overnight(ctx, state, nil, args...)
			Expect(o.code).To(Equal(0), "overnight %s:\n%s", strings.Join(args, " "), o.stderr)
			res := decodeResult(o.stdout)
			Expect(res.Verdict).To(Equal("pass"), res.Reason)
			Expect(res.Outcome).To(Equal(protocol.OutcomeSuccess))
			Expect(res.Effects.Duplicates).To(BeZero())
			Expect(res.Faults).NotTo(BeEmpty())
			retried := false
			for _, f := range res.Faults {
				Expect(f.Met).To(BeTrue(), "fault %s: %s", f.Spec, f.MetDetail)
				retried = retried || f.Kind == "effect-5xx"
			}
			if retried {
				// The effect the 503 hit was sent again under its own key
				// (a second intent), and every effect of the run is done:
				// no key was left behind failed.
				effects, _ := runEffects(state, res.RunID)
				again := 0
				for _, e := range effects {
					Expect(e.Status).To(Equal(protocol.StatusDone), "effect %s (%s)", e.Key, e.Kind)
					if e.Intents > 1 {
						again++
					}
				}
				Expect(again).To(Equal(1), "one effect sent again under its key: %+v", effects)
			}
		}
	}, SpecTimeout(5*time.Minute))

	It("reports failure, naming the denial, when the gate denies a step", func(ctx SpecContext) {
		base, err := os.ReadFile(filepath.Join(dir, scenarioName))
		Expect(err).NotTo(HaveOccurred())
		gated := filepath.Join(dir, "gated.yaml")
		Expect(os.WriteFile(gated, append(base, blocks["gate.yaml"]...), 0o644)).To(Succeed())

		state := stateDir()
		o := overnight(ctx, state, nil, "run", gated, "--output", "json")
		Expect(o.code).To(Equal(1), o.stderr)
		res := decodeResult(o.stdout)
		Expect(res.Verdict).To(Equal("fail"))
		Expect(res.Outcome).To(Equal(protocol.OutcomeFailure), "never a claimed success")
		Expect(res.Gate).NotTo(BeNil())
		Expect(res.Gate.Denied).To(Equal(1))
		_, done := runEffects(state, res.RunID)
		Expect(done).NotTo(BeNil())
		Expect(done.Summary).To(ContainSubstring("denied"))
	}, SpecTimeout(3*time.Minute))
})
