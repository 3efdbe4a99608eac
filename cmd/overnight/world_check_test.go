package main

import (
	"encoding/json"
	"net"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/world/worldtest"
)

// checkLines are the lines `world check` printed for its rules, by rule.
func checkLines(stdout string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		verdict, rest, _ := strings.Cut(line, " ")
		rule, _, ok := strings.Cut(rest, ": ")
		if ok && (verdict == "PASS" || verdict == "FAIL" || verdict == "SKIP") {
			out[rule] = verdict
		}
	}
	return out
}

// allRules is every rule with verdict v, but those in others.
func allRules(v string, others map[string]string) map[string]string {
	out := map[string]string{}
	for _, r := range worldtest.Rules() {
		out[r] = v
	}
	for r, x := range others {
		out[r] = x
	}
	return out
}

var _ = Describe("overnight world check", func() {
	It("passes the cloud world at a URL (exit 0), as text and as JSON", func(ctx SpecContext) {
		ws := startWorld(ctx, nil)
		o := overnight(ctx, GinkgoT().TempDir(), nil, "world", "check", ws.url)
		Expect(o.code).To(Equal(0), o.stdout+o.stderr)
		Expect(checkLines(o.stdout)).To(Equal(allRules("PASS", map[string]string{"crash-reconciled": "SKIP"})), o.stdout)
		Expect(o.stdout).To(ContainSubstring("PASS same-key-twice: 7 examples each applied twice under one key"))
		Expect(o.stdout).To(HaveSuffix("world cloud (" + ws.url + "): 8 passed, 0 failed, 1 skipped\n"))

		o = overnight(ctx, GinkgoT().TempDir(), nil, "world", "check", "-o", "json", ws.url)
		Expect(o.code).To(Equal(0), o.stdout+o.stderr)
		var report struct {
			URL     string `json:"url"`
			World   string `json:"world"`
			Results []struct {
				Rule     string `json:"rule"`
				Verdict  string `json:"verdict"`
				Evidence string `json:"evidence"`
			} `json:"results"`
		}
		Expect(json.Unmarshal([]byte(o.stdout), &report)).To(Succeed(), "stdout is one JSON object: %s", o.stdout)
		Expect(report.URL).To(Equal(ws.url))
		Expect(report.World).To(Equal("cloud"))
		Expect(report.Results).To(HaveLen(len(worldtest.Rules())))
		Expect(report.Results[1].Rule).To(Equal("examples"))
		Expect(report.Results[1].Verdict).To(Equal("pass"))
		Expect(report.Results[1].Evidence).To(HavePrefix("7 examples answered done"))
	})

	It("starts `overnight world serve cloud` itself and passes every rule, crash-reconciled included (exit 0)", func(ctx SpecContext) {
		data := filepath.Join(GinkgoT().TempDir(), "cloud-world")
		o := overnight(ctx, GinkgoT().TempDir(), nil, "world", "check", "--data", data, "--", bin, "world", "serve", "cloud")
		Expect(o.code).To(Equal(0), o.stdout+o.stderr)
		Expect(checkLines(o.stdout)).To(Equal(allRules("PASS", nil)), o.stdout)
		Expect(o.stdout).To(ContainSubstring("PASS crash-reconciled: SIGKILLed right after answering 7 applies and started again on the same data"))
		Expect(filepath.Join(data, "MANIFEST")).To(BeAnExistingFile(), "the world kept its Badger database in --data")
	})

	It("starts `overnight world serve fleet` itself and passes every rule: the fleet world over the protocol", func(ctx SpecContext) {
		data := filepath.Join(GinkgoT().TempDir(), "fleet-world")
		o := overnight(ctx, GinkgoT().TempDir(), nil, "world", "check", "--data", data, "--", bin, "world", "serve", "fleet")
		Expect(o.code).To(Equal(0), o.stdout+o.stderr)
		Expect(checkLines(o.stdout)).To(Equal(allRules("PASS", nil)), o.stdout)
		Expect(o.stdout).To(ContainSubstring("made a second resource for fleet.try_candidate, which describe declares not idempotent, and duplicates names it"))
		Expect(o.stdout).To(ContainSubstring("PASS crash-reconciled: SIGKILLed right after answering 6 applies and started again on the same data"))
		Expect(o.stdout).To(HaveSuffix("9 passed, 0 failed, 0 skipped\n"))
	})

	It("passes the Python inventory world (exit 0)", func(ctx SpecContext) {
		if _, err := exec.LookPath("python3"); err != nil {
			Skip("python3 is not on PATH: the inventory world is a Python 3 program")
		}
		// The interpreter python3 runs, named directly: a version
		// manager's shim (pyenv's) costs a second at each of the kit's
		// three starts of the world.
		out, err := exec.CommandContext(ctx, "python3", "-c", "import sys; print(sys.executable)").Output()
		Expect(err).NotTo(HaveOccurred())
		python := strings.TrimSpace(string(out))
		script, err := filepath.Abs("../../examples/pyworld/inventory.py")
		Expect(err).NotTo(HaveOccurred())
		o := overnight(ctx, GinkgoT().TempDir(), nil, "world", "check", "--", python, script)
		Expect(o.code).To(Equal(0), o.stdout+o.stderr)
		Expect(checkLines(o.stdout)).To(Equal(allRules("PASS", nil)), o.stdout)
		Expect(o.stdout).To(ContainSubstring("PASS describe: overnight-world/1, world \"inventory\""))
		Expect(o.stdout).To(ContainSubstring("): 9 passed, 0 failed, 0 skipped\n"))
	})

	It("fails a world that loses what it answered when killed, naming crash-reconciled (exit 1)", func(ctx SpecContext) {
		// world serve in memory: the data dir it is given is dropped.
		o := overnight(ctx, GinkgoT().TempDir(), nil, "world", "check", "--",
			"sh", "-c", `unset OVERNIGHT_WORLD_DATA; exec "$0" world serve cloud`, bin)
		Expect(o.code).To(Equal(1), o.stdout+o.stderr)
		Expect(checkLines(o.stdout)).To(Equal(allRules("PASS", map[string]string{"crash-reconciled": "FAIL"})), o.stdout)
		Expect(o.stdout).To(MatchRegexp(`FAIL crash-reconciled: SIGKILLed right after it answered example 1 \(cloud.create_network key worldtest/[0-9a-f]+/crash-reconciled/1\) .* lookup answers found=false`))
		Expect(o.stdout).To(ContainSubstring("8 passed, 1 failed, 0 skipped"))
	})

	It("exits 3 when nothing answers, or the command never serves, and on bad arguments", func(ctx SpecContext) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		url := "http://" + l.Addr().String()
		Expect(l.Close()).To(Succeed())
		state := GinkgoT().TempDir()

		o := overnight(ctx, state, nil, "world", "check", url)
		Expect(o.code).To(Equal(3), o.stdout+o.stderr)
		Expect(o.stderr).To(ContainSubstring("overnight: the world does not answer at " + url))
		Expect(o.stdout).To(ContainSubstring("SKIP describe: not run: nothing answers at " + url))

		o = overnight(ctx, state, nil, "world", "check", "-o", "json", url)
		Expect(o.code).To(Equal(3))
		var report map[string]any
		Expect(json.Unmarshal([]byte(o.stdout), &report)).To(Succeed(), "stdout is one JSON object: %s", o.stdout)
		Expect(report["error"]).To(ContainSubstring("the world does not answer"))

		o = overnight(ctx, state, nil, "world", "check", "--", "sh", "-c", "echo not a world; exit 0")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring("did not answer describe"))
		Expect(o.stderr).To(ContainSubstring("its output ends: not a world"))

		for _, args := range [][]string{
			{"world", "check"},
			{"world", "check", "127.0.0.1:8088"},
			{"world", "check", url, "--", "python3", "w.py"},
			{"world", "check", "--data", state, url},
			{"world", "check", "--"},
		} {
			o = overnight(ctx, state, nil, args...)
			Expect(o.code).To(Equal(3), "%q: %s", args, o.stderr)
			Expect(o.stderr).To(HavePrefix("overnight: world check: "), "%q", args)
		}
	})
})
