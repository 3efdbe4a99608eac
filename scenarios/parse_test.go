package scenarios_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/scenarios"
)

// header is the valid start of a scenario; cases append to it, so their errors are on line 6+.
const header = `apiVersion: overnight/v1
kind: Scenario
name: t
world: cloud
agent: {builtin: deployer}
`

// positioned flattens a Parse error into "line:column: msg" strings, checking that every error
// names the file.
func positioned(file string, err error) []string {
	GinkgoHelper()
	Expect(err).To(HaveOccurred())
	var list scenarios.ErrorList
	var one *scenarios.Error
	switch {
	case errors.As(err, &list):
		Expect(len(list)).To(BeNumerically(">", 1), "an ErrorList holds more than one error")
	case errors.As(err, &one):
		list = scenarios.ErrorList{one}
	default:
		Fail("Parse returned neither *Error nor ErrorList: " + err.Error())
	}
	out := make([]string, len(list))
	for i, e := range list {
		Expect(e.File).To(Equal(file))
		Expect(e.Error()).To(HavePrefix(file + ":"))
		out[i] = strings.TrimPrefix(e.Error(), file+":")
	}
	return out
}

func mustParse(file, text string) *scenarios.Scenario {
	GinkgoHelper()
	sc, err := scenarios.Parse(file, []byte(text))
	Expect(err).NotTo(HaveOccurred())
	Expect(sc).NotTo(BeNil())
	return sc
}

func spec(text string) chaos.Spec {
	GinkgoHelper()
	sp, err := chaos.ParseSpec(text)
	Expect(err).NotTo(HaveOccurred())
	return sp
}

var _ = Describe("Parse", func() {
	Describe("valid files", func() {
		It("applies every default to a minimal file", func() {
			data, err := os.ReadFile("testdata/minimal.yaml")
			Expect(err).NotTo(HaveOccurred())
			sc, err := scenarios.Load("testdata/minimal.yaml")
			Expect(err).NotTo(HaveOccurred())
			Expect(sc.APIVersion).To(Equal("overnight/v1"))
			Expect(sc.Kind).To(Equal("Scenario"))
			Expect(sc.Name).To(Equal("minimal"))
			Expect(sc.Description).To(BeEmpty())
			Expect(sc.World).To(Equal(scenarios.World{Name: "cloud", Options: map[string]any{}}))
			Expect(sc.Agent).To(Equal(scenarios.AgentSpec{Builtin: "deployer"}))
			Expect(sc.Agents).To(BeNil())
			Expect(sc.Task).To(Equal(map[string]any{}))
			Expect(sc.Faults).To(Equal([]chaos.Spec{}))
			Expect(sc.FaultText).To(Equal([]string{}))
			Expect(sc.Invariants).To(Equal([]string{"no-duplicate-effects", "goal-reached", "no-lost-progress"}))
			Expect(sc.Limits).To(Equal(scenarios.Limits{Timeout: 5 * time.Minute, Horizon: 30 * 24 * time.Hour, MaxAttempts: 10, Approval: 10 * time.Minute}))
			Expect(sc.Seed).To(BeNil())
			Expect(sc.Source).To(Equal("testdata/minimal.yaml"))
			Expect(sc.Raw).To(Equal(data))
		})

		It("reads every field of a full file", func() {
			sc, err := scenarios.Load("testdata/deploy.yaml")
			Expect(err).NotTo(HaveOccurred())
			Expect(sc.Name).To(Equal("deploy"))
			Expect(sc.Description).To(Equal("Deploy a three-tier service; exactly once, across crashes."))
			Expect(sc.World).To(Equal(scenarios.World{Name: "cloud", Options: map[string]any{
				"region": "eu-west-1",
				"quota":  map[string]any{"services": int64(5)},
			}}))
			Expect(sc.Agent).To(Equal(scenarios.AgentSpec{
				Builtin: "deployer", Args: []string{"--plan", "three-tier"}, Env: map[string]string{"LOG_LEVEL": "debug"},
			}))
			Expect(sc.Agents).To(Equal(map[string]scenarios.AgentSpec{
				"naive":   {Builtin: "deployer", Args: []string{"--naive"}},
				"careful": {Builtin: "deployer", Args: []string{"--careful"}, Env: map[string]string{"RETRIES": "5"}},
			}))
			Expect(sc.Task).To(Equal(map[string]any{
				"service": "shop", "replicas": int64(3), "ratio": 0.5, "tags": []any{"web", "prod"},
			}))
			Expect(sc.FaultText).To(Equal([]string{"kill@step:3", "api-version:v2@t:4d", "netdrop@t:36h/2h"}))
			Expect(sc.Faults).To(Equal([]chaos.Spec{spec("kill@step:3"), spec("api-version:v2@t:4d"), spec("netdrop@t:36h/2h")}))
			Expect(sc.Invariants).To(Equal([]string{"no-duplicate-effects", "goal-reached", "effects-resolved"}))
			Expect(sc.Limits).To(Equal(scenarios.Limits{Timeout: 2 * time.Minute, Horizon: 10 * 24 * time.Hour, MaxAttempts: 20, Approval: 10 * time.Minute}))
			Expect(sc.Seed).To(HaveValue(Equal(int64(42))))
		})

		It("reads reach, with the kinds --chaos random draws from", func() {
			sc := mustParse("r.yaml", header+"reach: {steps: 5, effects: 3, llm_calls: 1, virtual: 2d, kinds: [restart, kill]}\n")
			Expect(sc.Reach).To(Equal(&chaos.Reach{Steps: 5, Effects: 3, LLMCalls: 1, Virtual: 48 * time.Hour, Kinds: []string{"restart", "kill"}}))
			Expect(mustParse("r.yaml", header+"reach: {steps: 5}\n").Reach.Kinds).To(BeNil(), "no kinds: every kind random draws")
		})

		It("resolves a relative binary path against the scenario file's directory", func() {
			sc, err := scenarios.Load("testdata/binary-agent.yaml")
			Expect(err).NotTo(HaveOccurred())
			want, err := filepath.Abs("testdata/bin/my-agent")
			Expect(err).NotTo(HaveOccurred())
			Expect(sc.Agent.Binary).To(Equal(want))
			Expect(sc.Agent.Args).To(Equal([]string{"--verbose"}))
			Expect(sc.Agents["elsewhere"].Binary).To(Equal("/opt/agents/my-agent"))
			Expect(sc.Agents["prebuilt"]).To(Equal(scenarios.AgentSpec{Image: "my-agent:dev"}))

			img := mustParse("x.yaml", header+"agents: {py: {image: py:1, command: [python3, -u], args: [/agent/agent.py]}}\n")
			Expect(img.Agents["py"]).To(Equal(scenarios.AgentSpec{Image: "py:1", Command: []string{"python3", "-u"}, Args: []string{"/agent/agent.py"}}))

			abs := mustParse("/srv/scenarios/x.yaml", header+"agents: {v: {binary: ../bin/a}}\n")
			Expect(abs.Agents["v"].Binary).To(Equal("/srv/bin/a"))
		})

		It("refuses a relative binary path in a built-in scenario", func() {
			_, err := scenarios.Parse("builtin:x", []byte(header+"agents: {v: {binary: ./a}}\n"))
			Expect(positioned("builtin:x", err)).To(ConsistOf(
				`6:22: agents.v.binary: a built-in scenario cannot use a relative path ("./a"); use builtin: or an absolute path`))
		})

		It("reads the agent's report file, with its default bound", func() {
			sc, err := scenarios.Parse("t.yaml", []byte(header+"report: {path: /workspace/out/report.md}\n"))
			Expect(err).NotTo(HaveOccurred())
			Expect(sc.Report).To(Equal(&scenarios.Report{Path: "/workspace/out/report.md", MaxBytes: scenarios.DefaultReportMaxBytes}))
			sc, err = scenarios.Parse("t.yaml", []byte(header+"report: {path: /workspace/r.md, max_bytes: 4096}\n"))
			Expect(err).NotTo(HaveOccurred())
			Expect(sc.Report.MaxBytes).To(BeEquivalentTo(4096))
			sc, err = scenarios.Parse("t.yaml", []byte(header))
			Expect(err).NotTo(HaveOccurred())
			Expect(sc.Report).To(BeNil())
		})

		It("treats null optional fields as absent", func() {
			sc := mustParse("n.yaml", header+"description:\ntask:\nagents:\nfaults:\ninvariants:\nlimits:\nseed:\n")
			Expect(sc.Task).To(Equal(map[string]any{}))
			Expect(sc.Agents).To(BeNil())
			Expect(sc.Faults).To(BeEmpty())
			Expect(sc.Invariants).To(Equal(scenarios.DefaultInvariants()))
			Expect(sc.Limits.MaxAttempts).To(Equal(scenarios.DefaultMaxAttempts))
			Expect(sc.Seed).To(BeNil())
		})

		It("keeps an explicitly empty invariant list empty", func() {
			Expect(mustParse("e.yaml", header+"invariants: []\n").Invariants).To(BeEmpty())
		})

		It("takes an invariant name it does not know, leaving which exist to the harness's registry, and keeps where each is listed", func() {
			sc := mustParse("o.yaml", header+"invariants: [goal-reached, snapshot-named-daily]\n")
			Expect(sc.Invariants).To(Equal([]string{"goal-reached", "snapshot-named-daily"}))
			Expect(sc.InvariantPointer("snapshot-named-daily")).To(Equal("/invariants/1"))
			Expect(sc.ErrorAt(sc.InvariantPointer("snapshot-named-daily"), "x").Error()).To(Equal("o.yaml:6:28: x"))
			Expect(sc.InvariantPointer("no-lost-progress")).To(Equal("/invariants"), "not listed in the file")
			Expect(mustParse("d.yaml", header).InvariantPointer("goal-reached")).To(Equal("/invariants"), "a default")
		})

		It("supports anchors, aliases and merge keys", func() {
			sc := mustParse("m.yaml", `apiVersion: overnight/v1
kind: Scenario
name: merged
world: {name: cloud, options: {size: 1.5e3, big: 99999999999999999999, when: 2001-12-14}}
agent: &base
  builtin: deployer
  env: {A: "1"}
agents:
  naive:
    <<: *base
    args: [--naive]
  other:
    <<: [{builtin: first, args: [--one]}, {builtin: second, env: {B: "2"}}]
task:
  list: &l [1, two, null, true]
  again: *l
seed: -7
`)
			Expect(sc.Agents["naive"]).To(Equal(scenarios.AgentSpec{Builtin: "deployer", Args: []string{"--naive"}, Env: map[string]string{"A": "1"}}))
			Expect(sc.Agents["other"]).To(Equal(scenarios.AgentSpec{Builtin: "first", Args: []string{"--one"}, Env: map[string]string{"B": "2"}}))
			Expect(sc.Task).To(Equal(map[string]any{
				"list":  []any{int64(1), "two", nil, true},
				"again": []any{int64(1), "two", nil, true},
			}))
			Expect(sc.World.Options).To(Equal(map[string]any{"size": 1500.0, "big": 1e20, "when": "2001-12-14"}))
			Expect(sc.Seed).To(HaveValue(Equal(int64(-7))))
		})

		It("accepts a world given as a mapping and CRLF line ends", func() {
			sc := mustParse("w.yaml", strings.ReplaceAll(`apiVersion: overnight/v1
kind: Scenario
name: w
world:
  name: fleet
agent:
  image: my-agent:dev
`, "\n", "\r\n"))
			Expect(sc.World).To(Equal(scenarios.World{Name: "fleet", Options: map[string]any{}}))
			Expect(sc.Agent).To(Equal(scenarios.AgentSpec{Image: "my-agent:dev"}))
		})
	})

	DescribeTable("reports each kind of error at its file:line:column",
		func(text string, want ...string) {
			_, err := scenarios.Parse("t.yaml", []byte(text))
			Expect(positioned("t.yaml", err)).To(Equal(want))
		},
		Entry("wrong type of a top-level field", strings.Replace(header, "name: t", "name: 5", 1),
			`3:7: name: got number, want string (quote it to make it text: "5")`),
		Entry("wrong type in a list", header+"agents:\n  v:\n    builtin: x\n    args: [--a, 1, true]\n",
			`9:17: agents.v.args[1]: got number, want string (quote it to make it text: "1")`,
			`9:20: agents.v.args[2]: got boolean, want string (quote it to make it text: "true")`),
		Entry("a report path outside the workspace", header+"report: {path: /tmp/report.md}\n",
			`6:16: report.path: "/tmp/report.md" is not a file under /workspace, the only directory kept across the agent's attempts`),
		Entry("a report path that is not clean", header+"report:\n  path: /workspace/../etc/passwd\nagents:\n  v: {builtin: x}\n",
			`7:9: report.path: "/workspace/../etc/passwd" is not a clean path (write "/etc/passwd")`),
		Entry("a report without a path, and a bound too large", header+"report: {max_bytes: 16777217}\n",
			`6:9: report: missing required field "path"`, `6:21: report.max_bytes: 16777217 is too large (at most 16777216)`),
		Entry("wrong type of a mapping field", header+"limits:\n  max_attempts: \"10\"\n",
			`7:17: limits.max_attempts: got string, want integer`),
		Entry("an empty required value", strings.Replace(header, "world: cloud", "world:", 1),
			`4:7: world: got null, want string or object (the value is empty)`),
		Entry("unknown key at top level", header+"colour: red\n",
			`6:1: unknown field "colour"; allowed: agent, agents, apiVersion, claims, description, draws, faults, gate, goal, http, invariants, kind, limits, llm, mcp, name, reach, reflect, report, rollback, sandbox, seed, task, world`),
		Entry("unknown key, nested, with a suggestion", header+"limits:\n  timeout: 1m\n  max_atempts: 3\n",
			`8:3: limits: unknown field "max_atempts" (did you mean "max_attempts"?); allowed: approval, horizon, max_attempts, recovery, timeout`),
		Entry("unknown key in an agent variant", header+"agents:\n  v: {builtin: x, argz: [a]}\n",
			`7:19: agents.v: unknown field "argz" (did you mean "args"?); allowed: args, binary, builtin, command, env, image`),
		Entry("a command for a builtin agent", header+"agents:\n  v: {builtin: x, command: [a]}\n",
			`7:19: agents.v.command: only an image agent has a command to replace (its ENTRYPOINT); a builtin or binary agent takes args`),
		Entry("missing required fields at top level", "apiVersion: overnight/v1\nkind: Scenario\nname: t\n",
			`1:1: missing required field "agent"`,
			`1:1: missing required field "world"`),
		Entry("missing required field, nested", header+"gate:\n  - {kinds: \"cloud.*\"}\n",
			`7:5: gate[0]: missing required field "policy"`),
		Entry("a world with neither a built-in's name nor a way to reach one", strings.Replace(header, "world: cloud", "world:\n  options: {}", 1),
			`5:3: world: give a built-in world's name, or one of url, command and image (a world over the world protocol)`),
		Entry("a world reached two ways", strings.Replace(header, "world: cloud", "world: {url: \"http://127.0.0.1:1\", command: [w]}", 1),
			`4:45: world: give one of url, command and image, not url and command`),
		Entry("bad fault text, plain", header+"faults:\n  - kill@step:3\n  - kill@stp:3\n",
			`8:10: faults[1]: invalid fault "kill@stp:3": unknown trigger "stp" (want step:N, effect:N[:before|after], llm:N, t:DURATION, every:DURATION, rate:R/DURATION)`),
		Entry("bad fault text, quoted", header+"faults: [\"netdrop@t:36h/0s\", 'kill@step:0']\n",
			`6:25: faults[0]: invalid fault "netdrop@t:36h/0s": fault duration must be greater than 0 (drop '/0s' for a fault that does not heal)`,
			`6:41: faults[1]: invalid fault "kill@step:0": step counts from 1; got 0`),
		Entry("bad fault text with an escape: the item's own position", header+"faults: [\"kill\\x40stp:3\"]\n",
			`6:10: faults[0]: invalid fault "kill@stp:3": unknown trigger "stp" (want step:N, effect:N[:before|after], llm:N, t:DURATION, every:DURATION, rate:R/DURATION)`),
		Entry("both binary and image", strings.Replace(header, "agent: {builtin: deployer}", "agent:\n  binary: ./a\n  image: a:dev", 1),
			`7:3: agent: binary and image are both set; set exactly one of builtin, binary or image`),
		Entry("all three agent sources", header+"agents:\n  v: {image: i, builtin: b, binary: /b}\n",
			`7:17: agents.v: image and builtin are both set; set exactly one of builtin, binary or image`,
			`7:29: agents.v: image and binary are both set; set exactly one of builtin, binary or image`),
		Entry("no agent source", strings.Replace(header, "agent: {builtin: deployer}", "agent: {args: [x]}", 1),
			`5:8: agent: set one of builtin, binary or image`),
		Entry("bad env keys", strings.Replace(header, "agent: {builtin: deployer}", "agent:\n  builtin: d\n  env:\n    1BAD: x\n    OVERNIGHT_TOKEN: y\n    OK: 3", 1),
			`8:5: agent.env: invalid key "1BAD": must match ^[A-Za-z_][A-Za-z0-9_]*$`,
			`9:5: agent.env: "OVERNIGHT_TOKEN" uses the reserved prefix OVERNIGHT_ (the harness sets those variables)`,
			`10:9: agent.env.OK: got number, want string (quote it to make it text: "3")`),
		Entry("bad variant name", header+"agents:\n  \"bad name\": {builtin: x}\n",
			`7:3: agents: invalid variant name "bad name": must match ^[A-Za-z0-9][A-Za-z0-9_.-]*$`),
		Entry("bad durations", header+"limits:\n  timeout: 5x\n  horizon: 0s\n",
			`7:13: limits.timeout: invalid duration "5x": unknown unit "x" (want ns, us, ms, s, m, h or d)`,
			`8:12: limits.horizon: must be greater than 0`),
		Entry("a duration given as a number", header+"limits: {timeout: 300}\n",
			`6:19: limits.timeout: got number, want string (write a duration with its unit, such as 90s, 5m or 30d)`),
		Entry("max_attempts out of range", header+"limits: {max_attempts: 0}\n",
			`6:24: limits.max_attempts: 0 is too small (at least 1)`),
		Entry("duplicate key at top level", header+"name: again\n",
			`6:1: duplicate key "name" (first defined at line 3 column 1)`),
		Entry("duplicate key, nested", header+"task:\n  a: 1\n  b: 2\n  a: 3\n",
			`9:3: task: duplicate key "a" (first defined at line 7 column 3)`),
		Entry("not YAML at all", "{{{\n",
			`1:1: invalid YAML: did not find expected node content`),
		Entry("a YAML syntax error on a later line", header+"task:\n  a: 1\n b: 2\n",
			`7:3: invalid YAML: did not find expected key`),
		Entry("binary data", "\x00\x01\x02",
			`1:1: character U+0000 is not allowed in YAML (is this a binary file?)`),
		Entry("invalid UTF-8", header+"task: {a: \"x\xffy\"}\n",
			`6:13: not UTF-8 text (byte 0xff); a scenario file is UTF-8 YAML`),
		Entry("empty file", "",
			`1:1: empty scenario file: want a mapping that starts with apiVersion: overnight/v1 and kind: Scenario`),
		Entry("only comments", "# nothing here\n\n",
			`1:1: empty scenario file: want a mapping that starts with apiVersion: overnight/v1 and kind: Scenario`),
		Entry("a document that is a list", "- apiVersion: overnight/v1\n- kind: Scenario\n",
			`1:1: a scenario must be a YAML mapping (apiVersion: overnight/v1, kind: Scenario, ...), not a list`),
		Entry("a document that is a string", "hello world\n",
			`1:1: a scenario must be a YAML mapping (apiVersion: overnight/v1, kind: Scenario, ...), not the string "hello world"`),
		Entry("two documents", header+"---\nname: other\n",
			`6:1: a scenario file holds one YAML document; remove this '---' and what follows, or put it in its own file`),
		Entry("another apiVersion", strings.Replace(header, "overnight/v1", "overnight/v2", 1)+"unknown: stops here\n",
			`1:13: apiVersion: unsupported version "overnight/v2"; this overnight reads overnight/v1`),
		Entry("another kind", strings.Replace(header, "kind: Scenario", "kind: Suite", 1),
			`2:7: kind: got "Suite", want "Scenario"`),
		Entry("bad name", strings.Replace(header, "name: t", "name: My_Scenario", 1),
			`3:7: name: "My_Scenario" does not match ^[a-z0-9][a-z0-9-]*$`),
		Entry("repeated invariants (which names exist is the harness's to say)", header+"invariants: [goal-reached, fast, goal-reached, fast]\n",
			`6:34: invariants[2]: "goal-reached" is already listed at line 6 column 14`,
			`6:48: invariants[3]: "fast" is already listed at line 6 column 28`),
		Entry("reach.kinds: not a kind name, empty, and a kind listed twice", header+"reach:\n  steps: 5\n  kinds: [kill, \"api-version:v2\", kill]\n",
			`8:17: reach.kinds[1]: "api-version:v2" does not match ^[a-z0-9][a-z0-9-]*$`,
			`8:35: reach.kinds[2]: "kill" is already listed at line 8 column 11`),
		Entry("reach.kinds: an empty list", header+"reach: {steps: 5, kinds: []}\n",
			`6:26: reach.kinds: a list of 0 is too short (at least 1)`),
		Entry("a seed too large for int64", header+"seed: 99999999999999999999\n",
			`6:7: seed: 99999999999999999999 does not fit in a 64-bit signed integer`),
		Entry("a fractional seed", header+"seed: 1.5\n",
			`6:7: seed: got number, want null or integer`),
		Entry("an alias that contains itself", header+"task: &t {self: *t}\n",
			`6:17: task.self: alias *t refers to a value that contains it`),
		Entry("an unknown anchor", header+"task: {a: *nope}\n",
			`6:11: invalid YAML: alias *nope refers to no anchor &nope defined before it`),
		Entry("a number JSON cannot carry", header+"task: {x: .inf}\n",
			`6:11: task.x: .inf is not a number JSON can carry; quote it if you mean the text`),
		Entry("an unsupported tag", header+"task: {x: !secret abc}\n",
			`6:11: task.x: unsupported YAML tag !secret (scenario files use plain YAML values)`),
		Entry("a non-string key", header+"task: {[a, b]: 1}\n",
			`6:8: task: a key must be a plain value such as a name, not a list`),
		Entry("a gate glob that is not one, and verify without reflection", header+"gate:\n  - {kinds: \"cloud.[\", policy: deny}\n  - {kinds: \"cloud.*\", policy: verify}\n",
			`7:13: gate[0].kinds: "cloud.[" is not a valid glob: syntax error in pattern`,
			`8:32: gate[1].policy: verify guards effects with reflection, which is off: add a reflect: block (e.g. reflect: {}) or choose allow, approve or deny`),
		Entry("an unknown gate policy", header+"gate: [{kinds: \"*\", policy: maybe}]\n",
			`6:29: gate[0].policy: got "maybe", want one of "allow", "verify", "approve", "deny"`),
		Entry("a merge of a scalar", header+"agents: {v: {<<: 5, builtin: x}}\n",
			`6:18: agents.v: << merges a mapping or a list of mappings, not the scalar 5`),
	)

	It("reports every problem of a file together, sorted by position", func() {
		_, err := scenarios.Load("testdata/broken.yaml")
		Expect(positioned("testdata/broken.yaml", err)).To(Equal([]string{
			`3:7: name: "Broken_Name" does not match ^[a-z0-9][a-z0-9-]*$`,
			`7:3: agent: binary and image are both set; set exactly one of builtin, binary or image`,
			`9:5: agent.env: "OVERNIGHT_TOKEN" uses the reserved prefix OVERNIGHT_ (the harness sets those variables)`,
			`11:10: faults[0]: invalid fault "kill@stp:3": unknown trigger "stp" (want step:N, effect:N[:before|after], llm:N, t:DURATION, every:DURATION, rate:R/DURATION)`,
			`13:13: limits.timeout: invalid duration "5x": unknown unit "x" (want ns, us, ms, s, m, h or d)`,
			`14:3: limits: unknown field "max_atempts" (did you mean "max_attempts"?); allowed: approval, horizon, max_attempts, recovery, timeout`,
		}))
		var list scenarios.ErrorList
		Expect(errors.As(err, &list)).To(BeTrue())
		Expect(strings.Split(err.Error(), "\n")).To(HaveLen(6))
		Expect(strings.Split(err.Error(), "\n")[0]).To(Equal(`testdata/broken.yaml:3:7: name: "Broken_Name" does not match ^[a-z0-9][a-z0-9-]*$`))
		var one *scenarios.Error
		Expect(errors.As(err, &one)).To(BeTrue(), "errors.As reaches each *Error of the list")
	})

	It("refuses a file larger than MaxFileSize", func() {
		big := header + "description: \"" + strings.Repeat("x", scenarios.MaxFileSize) + "\"\n"
		_, err := scenarios.Parse("big.yaml", []byte(big))
		Expect(positioned("big.yaml", err)).To(Equal([]string{"1:1: scenario file is larger than the limit of 1048576 bytes (keep large data out of the scenario)"}))
	})

	It("stops a document that explodes through aliases", func() {
		var b strings.Builder
		b.WriteString(header + "task:\n  l0: &l0 [a, a, a, a, a, a, a, a, a, a]\n")
		for i := 1; i <= 9; i++ {
			b.WriteString("  l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [")
			for j := range 10 {
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString("*l" + string(rune('0'+i-1)))
			}
			b.WriteString("]\n")
		}
		start := time.Now()
		_, err := scenarios.Parse("lol.yaml", []byte(b.String()))
		Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
		msgs := positioned("lol.yaml", err)
		Expect(msgs).To(HaveLen(1))
		Expect(msgs[0]).To(ContainSubstring("more than 100000 values once aliases are expanded"))
	})
})

var _ = Describe("Load", func() {
	It("says clearly that a file is missing", func() {
		_, err := scenarios.Load("testdata/no-such.yaml")
		Expect(err).To(MatchError(ContainSubstring("load scenario testdata/no-such.yaml: no such file")))
		Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue())
	})

	It("refuses a directory", func() {
		_, err := scenarios.Load("testdata")
		Expect(err).To(MatchError(ContainSubstring("testdata")))
	})
})

var _ = Describe("Resolve", func() {
	builtins := scenarios.BuiltinMap{
		"deploy": []byte("apiVersion: overnight/v1\nkind: Scenario\nname: deploy\nworld: cloud\nagent: {builtin: deployer}\n"),
		"broken": []byte("apiVersion: overnight/v1\nkind: Scenario\n"),
	}

	It("finds a built-in scenario by name", func() {
		sc, err := scenarios.Resolve("deploy", builtins.Lookup, builtins.Names())
		Expect(err).NotTo(HaveOccurred())
		Expect(sc.Name).To(Equal("deploy"))
		Expect(sc.Source).To(Equal("builtin:deploy"))
		Expect(sc.Raw).To(Equal(builtins["deploy"]))
	})

	It("names the built-in source in a built-in scenario's errors", func() {
		_, err := scenarios.Resolve("broken", builtins.Lookup, builtins.Names())
		Expect(err).To(MatchError(HavePrefix("builtin:broken:1:1: ")))
	})

	It("loads anything that looks like a path as a file", func() {
		sc, err := scenarios.Resolve("testdata/minimal.yaml", builtins.Lookup, builtins.Names())
		Expect(err).NotTo(HaveOccurred())
		Expect(sc.Source).To(Equal("testdata/minimal.yaml"))

		_, err = scenarios.Resolve("deploy.yaml", builtins.Lookup, builtins.Names())
		Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue(), "a .yaml name is a path even when a built-in shares its stem: %v", err)
	})

	It("prefers a file in the working directory over a built-in of the same name", func() {
		dir := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(dir, "deploy"), []byte(strings.Replace(string(builtins["deploy"]), "name: deploy", "name: local", 1)), 0o644)).To(Succeed())
		Expect(os.Mkdir(filepath.Join(dir, "broken"), 0o755)).To(Succeed())
		wd, err := os.Getwd()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.Chdir, wd)
		Expect(os.Chdir(dir)).To(Succeed())

		sc, err := scenarios.Resolve("deploy", builtins.Lookup, builtins.Names())
		Expect(err).NotTo(HaveOccurred())
		Expect(sc.Name).To(Equal("local"))
		Expect(sc.Source).To(Equal("deploy"))

		_, err = scenarios.Resolve("broken", builtins.Lookup, builtins.Names())
		Expect(err).To(MatchError(HavePrefix("builtin:broken:")), "a directory is not a scenario file")
	})

	It("lists the built-in scenarios when a name is unknown", func() {
		_, err := scenarios.Resolve("nope", builtins.Lookup, builtins.Names())
		Expect(err).To(MatchError(`no built-in scenario "nope" and no file "nope"; built-in scenarios: broken, deploy`))
		Expect(errors.Is(err, scenarios.ErrUnknownScenario)).To(BeTrue())

		_, err = scenarios.Resolve("nope", nil, nil)
		Expect(err).To(MatchError(`no built-in scenario "nope" and no file "nope"; there are no built-in scenarios`))

		_, err = scenarios.Resolve("", builtins.Lookup, builtins.Names())
		Expect(errors.Is(err, scenarios.ErrUnknownScenario)).To(BeTrue())
	})
})

var _ = Describe("SelectAgent", func() {
	sc := func() *scenarios.Scenario {
		s, err := scenarios.Load("testdata/deploy.yaml")
		Expect(err).NotTo(HaveOccurred())
		return s
	}

	It("returns the default agent for an empty name and a variant by name", func() {
		s := sc()
		Expect(s.SelectAgent("")).To(Equal(s.Agent))
		Expect(s.SelectAgent("naive")).To(Equal(scenarios.AgentSpec{Builtin: "deployer", Args: []string{"--naive"}}))
	})

	It("lists the variants when the name is unknown", func() {
		_, err := sc().SelectAgent("reckless")
		Expect(err).To(MatchError(`unknown agent variant "reckless" in scenario deploy; variants: careful, naive (or leave out --agent for the default agent)`))
		Expect(errors.Is(err, scenarios.ErrUnknownAgent)).To(BeTrue())
	})

	It("says when a scenario has no variants", func() {
		s, err := scenarios.Load("testdata/minimal.yaml")
		Expect(err).NotTo(HaveOccurred())
		_, err = s.SelectAgent("naive")
		Expect(err).To(MatchError(ContainSubstring("declares no variants")))
		Expect(errors.Is(err, scenarios.ErrUnknownAgent)).To(BeTrue())
	})
})

var _ = Describe("SchemaJSON", func() {
	It("declares the key patterns the loader checks itself", func() {
		var schema struct {
			Properties struct {
				Agents struct {
					PropertyNames struct{ Pattern string } `json:"propertyNames"`
				} `json:"agents"`
			} `json:"properties"`
			Defs struct {
				Agent struct {
					Properties struct {
						Env struct {
							PropertyNames struct{ Pattern string } `json:"propertyNames"`
						} `json:"env"`
					} `json:"properties"`
				} `json:"agent"`
			} `json:"$defs"`
		}
		Expect(json.Unmarshal(scenarios.SchemaJSON(), &schema)).To(Succeed())
		envPattern := schema.Defs.Agent.Properties.Env.PropertyNames.Pattern
		variantPattern := schema.Properties.Agents.PropertyNames.Pattern
		Expect(envPattern).NotTo(BeEmpty())
		Expect(variantPattern).NotTo(BeEmpty())

		_, err := scenarios.Parse("p.yaml", []byte(header+"agents: {\"-v\": {builtin: x, env: {9: x}}}\n"))
		Expect(positioned("p.yaml", err)).To(Equal([]string{
			`6:10: agents: invalid variant name "-v": must match ` + variantPattern,
			`6:35: agents.-v.env: invalid key "9": must match ` + envPattern,
		}))
	})

	It("is the draft 2020-12 schema the loader validates with", func() {
		Expect(string(scenarios.SchemaJSON())).To(ContainSubstring(`"$schema": "https://json-schema.org/draft/2020-12/schema"`))
		onDisk, err := os.ReadFile("scenario.schema.json")
		Expect(err).NotTo(HaveOccurred())
		Expect(scenarios.SchemaJSON()).To(Equal(onDisk))
	})
})

func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile("testdata/deploy.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := scenarios.Parse("testdata/deploy.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}
