package harness_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
)

// openaiScenario runs harness/testdata/openaiagent (built at bin): an agent
// on the official openai-go client, out of the box.
const openaiScenario = `apiVersion: overnight/v1
kind: Scenario
name: openai-agent
world: cloud
agent: {binary: %s}
task: {network: n, database: d, migration: 1, service: {name: s, image: i}, dns: s.example.com}
llm:
  model: scripted
  budget: {calls: 5}
  rules:
    - when: {}
      reply: hello from the scripted model
invariants: [no-duplicate-effects]
limits: {timeout: 2m, max_attempts: 2}
`

var _ = Describe("an agent on openai-go in a real sandbox", Ordered, func() {
	var agentBinary string
	BeforeAll(func(ctx SpecContext) {
		dir, err := os.MkdirTemp("", "ovn-openai-agent-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		agentBinary = filepath.Join(dir, "openaiagent")
		Expect(harnesstest.Build(ctx, "./harness/testdata/openaiagent", agentBinary, fmt.Sprintf("llm-e2e-%d", time.Now().UnixNano()))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			eng := docker.New(dockerCli, docker.Options{})
			if ref, err := eng.ImageRef(ctx, docker.ImageSpec{InitBinary: initBinary, AgentBinary: agentBinary}); err == nil {
				Expect(eng.RemoveImage(ctx, ref)).To(Succeed())
			}
		})
	}, NodeTimeout(5*time.Minute))

	It("is credited for waiting out a 429 in real time with the client's own retry, and the run passes", func(ctx SpecContext) {
		scen, err := scenarios.Parse("openai-agent.yaml", []byte(fmt.Sprintf(openaiScenario, agentBinary)))
		Expect(err).NotTo(HaveOccurred())
		h := newHarness(ctx, nil)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, Faults: faults("llm-429:1s@llm:1")})
		Expect(err).NotTo(HaveOccurred())
		logs, _ := h.Logs(res.RunID)
		Expect(res.Verdict).To(Equal(harness.VerdictPass), "%s\n%+v\n%+v\n%+v", res.Reason, res.Invariants, res.Faults, logs)
		Expect(res.Outcome).To(Equal(protocol.OutcomeSuccess))
		Expect(res.Faults).To(HaveLen(1))
		Expect(res.Faults[0].Met).To(BeTrue(), res.Faults[0].MetDetail)
		Expect(res.Faults[0].MetDetail).To(Equal("after the 429 on LLM call 1, the agent waited Retry-After (1s of real time) and called again"))
		Expect(invariant(res, harness.InvFaultsFired).Verdict).To(Equal(harness.VerdictPass))
		Expect(res.LLM.Calls).To(Equal(2))
		Expect(res.LLM.Answered).To(Equal(1))
		Expect(res.LLM.Refused).To(Equal(1))
		Expect(res.LLM.RefusedBy).To(Equal(map[string]int{protocol.CodeRateLimited: 1}))
		Expect(res.WallMS).To(BeNumerically(">=", 1000), "the wait was real")
	}, NodeTimeout(3*time.Minute)) // not SpecTimeout: that would count BeforeAll's build of openai-go too
})
