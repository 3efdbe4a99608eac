package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The Python example agent (sandbox/agent/python), run as a user would
// bring it: a Debian image made without a registry (debootstrap + dockerCli
// import, cached on the engine), the agent's two files put into it with a
// plain docker build, and a scenario naming the image.
const pythonBase = "overnight-test/debian-python:bookworm"

var pythonDir = filepath.Join("..", "..", "sandbox", "agent", "python")

// pythonAgentImage builds the agent's image once per content of its files.
func pythonAgentImage(ctx context.Context) string {
	GinkgoHelper()
	script, err := filepath.Abs(filepath.Join(pythonDir, "debian-image.sh"))
	Expect(err).NotTo(HaveOccurred())
	if _, err := dockerCli.ImageInspect(ctx, pythonBase); err != nil && os.Geteuid() != 0 {
		Skip("the Debian+Python image " + pythonBase + " is not on the engine, and making it (debootstrap) needs root: run `make python-image` as root once")
	}
	out, err := exec.CommandContext(ctx, script, pythonBase).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "make the Debian base image (`make python-image` does it too):\n%s", out)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	h := sha256.New()
	for _, name := range []string{"Dockerfile", "overnight.py", "deploy_agent.py"} {
		data, err := os.ReadFile(filepath.Join(pythonDir, name))
		Expect(err).NotTo(HaveOccurred())
		h.Write(data)
		Expect(tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data))})).To(Succeed())
		_, err = tw.Write(data)
		Expect(err).NotTo(HaveOccurred())
	}
	Expect(tw.Close()).To(Succeed())
	tag := "overnight-test/python-agent:" + hex.EncodeToString(h.Sum(nil))[:12]
	if _, err := dockerCli.ImageInspect(ctx, tag); err == nil {
		return tag
	}
	resp, err := dockerCli.ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true, Version: build.BuilderV1})
	Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	Expect(resp.Body.Close()).To(Succeed())
	Expect(string(body)).NotTo(ContainSubstring(`"error"`), "docker build of the Python agent's image")
	return tag
}

// pythonScenario is the deploy scenario with the Python agent.
func pythonScenario(tag string) string {
	text := fmt.Sprintf(`apiVersion: overnight/v1
kind: Scenario
name: deploy-python
world: cloud
agent: {image: %s}
task:
  network: prod-net
  database: prod-db
  migration: 3
  service: {name: api, image: registry.local/api:1.4.2}
  dns: api.example.com
llm:
  model: scripted
  budget: {calls: 40}
  rules:
    - when: {tool_offered: create_network}
      tool_calls:
        - {name: create_network, arguments: {name: $task.network}}
        - {name: create_database, arguments: {name: $task.database}}
        - {name: run_migration, arguments: {version: $task.migration}}
        - {name: deploy_service, arguments: {name: $task.service.name, image: $task.service.image}}
        - {name: set_dns, arguments: {host: $task.dns}}
invariants: [no-duplicate-effects, no-lost-progress, effects-resolved, goal-reached]
limits: {timeout: 3m, max_attempts: 6, horizon: 30d}
`, tag)
	file := filepath.Join(GinkgoT().TempDir(), "deploy-python.yaml")
	Expect(os.WriteFile(file, []byte(text), 0o644)).To(Succeed())
	return file
}

var _ = Describe("an agent in Python, in a Debian image", Ordered, func() {
	var tag string
	BeforeAll(func(ctx SpecContext) {
		tag = pythonAgentImage(ctx)
	}, NodeTimeout(15*time.Minute))

	DescribeTable("is judged right through",
		func(ctx SpecContext, fault string, attempts int) {
			state := stateDir()
			o := overnight(ctx, state, nil, "run", pythonScenario(tag), "--fault", fault, "-o", "json", "-q")
			Expect(o.code).To(Equal(0), o.stderr)
			res := decodeResult(o.stdout)
			Expect(res.Verdict).To(Equal("pass"), res.Reason)
			Expect(res.Attempts).To(Equal(attempts))
			Expect(res.Faults).To(HaveLen(1))
			Expect(res.Faults[0].Met).To(BeTrue(), res.Faults[0].MetDetail)
			Expect(res.Effects.Duplicates).To(BeZero())
		},
		Entry("a kill after step 3", "kill@step:3", 2, SpecTimeout(3*time.Minute)),
		Entry("an API change to v2 before step 4", "api-version:v2@step:3", 1, SpecTimeout(3*time.Minute)),
		Entry("a 429 it waits out in real time", "llm-429:1s@llm:1", 1, SpecTimeout(3*time.Minute)),
		Entry("a provider 5xx", "llm-5xx@llm:1", 1, SpecTimeout(3*time.Minute)),
		Entry("a model call held and reset", "llm-timeout@llm:1", 1, SpecTimeout(3*time.Minute)),
		Entry("a malformed tool call", "llm-malformed-tool-call@llm:1", 1, SpecTimeout(3*time.Minute)),
		Entry("an answer cut short", "llm-truncated@llm:1", 1, SpecTimeout(3*time.Minute)),
	)

	It("survives a harness crash and resume, and its killed attempt's last lines reach the logs", func(ctx SpecContext) {
		state := stateDir()
		o := overnight(ctx, state, nil, "run", pythonScenario(tag), "--fault", "harness-crash@step:2", "-o", "json", "-q")
		Expect(o.code).To(Equal(128+int(syscall.SIGKILL)), o.stderr)
		runID := runIDOf(o.stderr)
		r := overnight(ctx, state, nil, "resume", runID, "-o", "json", "-q")
		Expect(r.code).To(Equal(0), r.stderr)
		res := decodeResult(r.stdout)
		Expect(res.Verdict).To(Equal("pass"), res.Reason)
		Expect(res.Effects.Duplicates).To(BeZero())
		l := overnight(ctx, state, nil, "logs", runID, "-o", "json")
		Expect(l.code).To(Equal(0), l.stderr)
		var logs struct {
			Attempts []struct {
				Attempt int    `json:"attempt"`
				Stdout  string `json:"stdout"`
			} `json:"attempts"`
		}
		Expect(json.Unmarshal([]byte(l.stdout), &logs)).To(Succeed(), l.stdout)
		Expect(logs.Attempts).NotTo(BeEmpty())
		Expect(logs.Attempts[0].Stdout).To(ContainSubstring("step 1 done"), "unbuffered: the orphaned attempt's output up to the crash (at step 2, before its reply) was kept")
	}, SpecTimeout(4*time.Minute))

	AfterAll(func(ctx SpecContext) {
		// The agent's image goes; the Debian base stays cached on the engine.
		_, _ = dockerCli.ImageRemove(ctx, tag, image.RemoveOptions{PruneChildren: true})
	})
})
