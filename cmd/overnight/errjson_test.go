package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/harness/llm"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/scenarios"
)

// errorJSON checks that stdout is exactly one JSON object {"error": {...}}
// and that stderr still carries the message for people; it returns the
// error object.
func errorJSON(o outcome) map[string]any {
	GinkgoHelper()
	dec := json.NewDecoder(strings.NewReader(o.stdout))
	var doc map[string]any
	Expect(dec.Decode(&doc)).To(Succeed(), "stdout must be one JSON object:\n%s", o.stdout)
	_, err := dec.Token()
	Expect(err).To(Equal(io.EOF), "stdout must hold nothing after the JSON object:\n%s", o.stdout)
	Expect(doc).To(HaveLen(1))
	Expect(doc).To(HaveKey("error"))
	e, ok := doc["error"].(map[string]any)
	Expect(ok).To(BeTrue(), "error is an object: %s", o.stdout)
	Expect(e["code"]).To(BeAssignableToTypeOf(""))
	Expect(e["message"]).NotTo(BeEmpty())
	Expect(o.stderr).To(ContainSubstring("overnight: "+e["message"].(string)), "the message stays on stderr")
	return e
}

var _ = Describe("an error with --output json", func() {
	It("names the scenario file, line and column of a bad scenario", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		file := filepath.Join(dir, "bad.yaml")
		Expect(os.WriteFile(file, []byte("apiVersion: overnight/v1\nkind: Scenario\nname: bad\nworld: cloud\nagent: {builtin: deployer}\nfaults: [kill@stp:3]\n"+
			"task: {network: n, database: d, migration: 1, service: {name: s, image: \"i:1\"}, dns: a.example}\n"), 0o644)).To(Succeed())
		o := overnight(ctx, stateDir(), nil, "run", file, "--output", "json")
		Expect(o.code).To(Equal(3))
		e := errorJSON(o)
		Expect(e).To(HaveKeyWithValue("code", "scenario_invalid"))
		Expect(e).To(HaveKeyWithValue("file", file))
		Expect(e).To(HaveKeyWithValue("line", 6.0))
		Expect(e).To(HaveKeyWithValue("column", 15.0), "at the trigger")
		Expect(e["message"]).To(ContainSubstring(`unknown trigger "stp"`))

		// A scripted rule's $task reference is checked against the task when the file is loaded.
		ref := filepath.Join(dir, "ref.yaml")
		Expect(os.WriteFile(ref, []byte("apiVersion: overnight/v1\nkind: Scenario\nname: ref\nworld: cloud\nagent: {builtin: deployer}\n"+
			"task: {network: prod-net, database: d, migration: 1, service: {name: s, image: \"i:1\"}, dns: a.example}\nllm:\n  rules:\n    - when: {}\n      tool_calls: [{name: create_network, arguments: {name: $task.netwrk}}]\n"), 0o644)).To(Succeed())
		o = overnight(ctx, stateDir(), nil, "-q", "run", ref, "-o", "json")
		Expect(o.code).To(Equal(3))
		e = errorJSON(o)
		Expect(e).To(HaveKeyWithValue("code", "scenario_invalid"))
		Expect(e).To(HaveKeyWithValue("file", ref))
		Expect(e).To(HaveKeyWithValue("line", 10.0))
		Expect(e).To(HaveKeyWithValue("column", 67.0), "at the field the task lacks")
		Expect(e["message"]).To(ContainSubstring(`"$task.netwrk": the scenario's task has no field "netwrk" at $task (did you mean "network"?)`))
	})

	It("says run_not_found for an unknown run id, without a position", func(ctx SpecContext) {
		state := stateDir()
		j, err := journal.Open(state, journal.Options{})
		Expect(err).NotTo(HaveOccurred())
		Expect(j.Close()).To(Succeed())
		for _, args := range [][]string{
			{"resume", "no-such-run", "-o", "json"},
			{"logs", "no-such-run", "--output=json"},
			{"gate", "no-such-run", "-o", "json"},
			{"reflect", "no-such-run", "--format", "json"},
		} {
			o := overnight(ctx, state, nil, args...)
			Expect(o.code).To(Equal(3), "%v", args)
			e := errorJSON(o)
			Expect(e).To(HaveKeyWithValue("code", "run_not_found"), "%v", args)
			Expect(e["message"]).To(ContainSubstring(`no such run "no-such-run"`))
			Expect(e).NotTo(HaveKey("file"))
			Expect(e).NotTo(HaveKey("line"))
			Expect(e).NotTo(HaveKey("column"))
		}
	})

	It("says state_not_found and state_locked for a state dir that is missing or in use", func(ctx SpecContext) {
		o := overnight(ctx, filepath.Join(GinkgoT().TempDir(), "typo"), nil, "runs", "-o", "json")
		Expect(o.code).To(Equal(3))
		Expect(errorJSON(o)).To(HaveKeyWithValue("code", "state_not_found"))

		state := stateDir()
		// This test process owns the state dir, and serves no control socket.
		j, err := journal.Open(state, journal.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(j.Close)
		o = overnight(ctx, state, nil, "runs", "-o", "json")
		Expect(o.code).To(Equal(3))
		e := errorJSON(o)
		Expect(e).To(HaveKeyWithValue("code", "state_locked"))
		Expect(e["message"]).To(ContainSubstring(fmt.Sprintf("in use by pid %d", os.Getpid())))
	})

	It("says usage for a bad command line, however the flags are ordered", func(ctx SpecContext) {
		state := stateDir()
		for _, args := range [][]string{
			{"run", "deploy", "-o", "json", "--bogus"},
			{"run", "deploy", "--bogus", "-o", "json"}, // cobra stops parsing at the unknown flag
			{"run", "-q", "-ojson"},                    // the wrong number of arguments
			{"runs", "extra", "--output", "json"},
			{"run", "deploy", "--timeout", "-1s", "-o", "json"},
			{"run", "deploy", "--agent", "nobody", "-o", "json"},
			{"nosuchcmd", "-o", "json"},
		} {
			o := overnight(ctx, state, nil, args...)
			Expect(o.code).To(Equal(3), "%v", args)
			e := errorJSON(o)
			Expect(e).To(HaveKeyWithValue("code", "usage"), "%v", args)
			Expect(e).NotTo(HaveKey("file"))
		}

		// Without JSON asked for, stdout stays empty; a flag's value "-o" is not the flag.
		for _, args := range [][]string{
			{"run", "deploy", "--bogus"},
			{"run", "deploy", "--fault=-o", "json", "--bogus"},
			{"runs", "--output", "yaml"},
		} {
			o := overnight(ctx, state, nil, args...)
			Expect(o.code).To(Equal(3), "%v", args)
			Expect(o.stdout).To(BeEmpty(), "%v", args)
			Expect(o.stderr).To(HavePrefix("overnight: "))
		}
	})
})

var _ = Describe("the code of an error", func() {
	DescribeTable("comes from the sentinel or type it wraps",
		func(err error, want string) {
			Expect(describeError(err, false).Code).To(Equal(want))
		},
		Entry("a usage error", usagef("--output %q: want text or json", "yaml"), "usage"),
		Entry("an unknown agent variant", fmt.Errorf("%w %q", scenarios.ErrUnknownAgent, "x"), "usage"),
		Entry("a missing scenario file", &scenarioLoadError{fmt.Errorf("load scenario x.yaml: %w", fs.ErrNotExist)}, "scenario_not_found"),
		Entry("another missing file", fmt.Errorf("open init binary: %w", fs.ErrNotExist), "internal"),
		Entry("an unreadable scenario file", &scenarioLoadError{fmt.Errorf("load scenario x.yaml: %w", fs.ErrPermission)}, "scenario_invalid"),
		Entry("a fault no kind takes", fmt.Errorf("fault: %w", chaos.ErrUnsupported), "fault_invalid"),
		Entry("a model that cannot be set up", fmt.Errorf("%w: no key", llm.ErrConfig), "llm_config"),
		Entry("a journal of another format", fmt.Errorf("open: %w", journal.ErrFormat), "state_format"),
		Entry("an unreachable engine", fmt.Errorf("connect: %w", docker.ErrEngineUnreachable), "docker_unavailable"),
		Entry("an agent image the engine lacks", fmt.Errorf("plan: %w", sandbox.ErrImageNotFound), "image_not_found"),
		Entry("an image with nothing to run", fmt.Errorf("%w: image x has no ENTRYPOINT or CMD", sandbox.ErrInvalidSpec), "agent_invalid"),
		Entry("nothing to shrink", fmt.Errorf("%w: run x ended pass", harness.ErrNotFailing), "not_failing"),
		Entry("anything else", errors.New("disk full"), "internal"),
	)

	It("positions a list of scenario problems at the first, and names an interrupted run", func() {
		list := scenarios.ErrorList{{File: "s.yaml", Line: 3, Column: 7, Msg: "a"}, {File: "s.yaml", Line: 9, Column: 1, Msg: "b"}}
		Expect(describeError(fmt.Errorf("check: %w", list), false)).To(Equal(errorBody{
			Code: "scenario_invalid", Message: "check: s.yaml:3:7: a\ns.yaml:9:1: b", File: "s.yaml", Line: 3, Column: 7}))

		b := describeError(&interruptedError{"run-1", harness.ErrInterrupted}, false)
		Expect(b).To(Equal(errorBody{Code: "interrupted", Message: "interrupted; the run is resumable: overnight resume run-1", RunID: "run-1"}))
		Expect(describeError(errors.New("unknown flag: --x"), true).Code).To(Equal("usage"), "cobra refused the command line")
	})
})
