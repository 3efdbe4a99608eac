package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/scenarios/builtin"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// These specs run scenarios against worlds over the world protocol: the
// built-in cloud served by `overnight world serve`, and as a command world
// the harness starts itself.
var _ = Describe("a run against a world over the world protocol", func() {
	DescribeTable("gets, through `--world URL` on `overnight world serve cloud`, the verdict, reason, effects and history digest the in-process world gets",
		func(ctx SpecContext, scenario string, serveArgs []string, runArgs ...string) {
			ws := startWorld(ctx, nil, append([]string{"--addr", "127.0.0.1:0"}, serveArgs...)...)
			// Each in a state dir of its own: neither remembers the other's lessons.
			state, localState := stateDir(), stateDir()
			args := append([]string{"run", scenario, "-o", "json", "-q"}, runArgs...)
			local := overnight(ctx, localState, nil, args...)
			over := overnight(ctx, state, nil, append(args, "--world", ws.url)...)
			Expect(over.code).To(Equal(local.code), "local: %s\nover the protocol: %s", local.stderr, over.stderr)
			lr, or := decodeResult(local.stdout), decodeResult(over.stdout)
			Expect(or.Verdict).To(Equal(harness.VerdictPass), or.Reason)
			Expect(or.Verdict).To(Equal(lr.Verdict))
			Expect(or.Reason).To(Equal(lr.Reason))
			Expect(or.Effects).To(Equal(lr.Effects))
			Expect(or.HistoryDigest).To(Equal(lr.HistoryDigest))

			// Every effect the run journaled is in the world under the
			// run's scope, answered as journaled; no shadow instance is left.
			cl, err := remote.Dial(ctx, ws.url, remote.Config{Scope: or.RunID})
			Expect(err).NotTo(HaveOccurred())
			effects := journaledEffects(ctx, state, or.RunID)
			Expect(effects).NotTo(BeEmpty())
			for _, e := range effects {
				out, found, err := cl.Lookup(ctx, e.ID)
				Expect(err).NotTo(HaveOccurred())
				Expect(found).To(BeTrue(), "effect %s is not in the world", e.ID)
				Expect(out.Status).To(Equal(e.Status), "effect %s", e.ID)
			}

			// Every isolated re-run's shadow instance is gone.
			ls := overnight(ctx, state, nil, "runs", "--all", "-o", "json")
			Expect(ls.code).To(Equal(0), ls.stderr)
			var list struct {
				Runs []struct {
					ID     string `json:"run_id"`
					Parent string `json:"parent"`
				} `json:"runs"`
			}
			Expect(json.Unmarshal([]byte(ls.stdout), &list)).To(Succeed())
			for _, r := range list.Runs {
				if r.Parent == "" {
					continue
				}
				_, err := cl.Instance("shadow-" + r.ID).Ledger(ctx)
				var refused *remote.RefusedError
				Expect(errors.As(err, &refused)).To(BeTrue(), "the shadow of isolated run %s is still there (%v)", r.ID, err)
				Expect(refused.Code).To(Equal(remote.CodeUnknownInstance))
			}

			// The world goes: the report still reads.
			ws.terminate()
			rep := overnight(ctx, state, nil, "report", or.RunID, "--format", "md")
			Expect(rep.code).To(Equal(0), rep.stderr)
			Expect(rep.stdout).To(ContainSubstring(or.HistoryDigest))
		},
		Entry("deploy, the agent killed after step 3", "deploy", nil, "--fault", "kill@step:3", SpecTimeout(3*time.Minute)),
		Entry("week, its maintenance goal", "week", []string{"--option", "goal=maintenance"}, SpecTimeout(4*time.Minute)),
		Entry("deploy-v2: an API version change, a reflection, its shadows on instances", "deploy-v2", nil, SpecTimeout(5*time.Minute)),
	)

	It("refuses, before recording a run, a world that does not answer, is another, or lacks a fault's API version", func(ctx SpecContext) {
		state := stateDir()
		o := overnight(ctx, state, nil, "run", "deploy", "--world", "http://127.0.0.1:9", "-o", "json")
		Expect(o.code).To(Equal(3), o.stderr)
		Expect(o.stdout).To(ContainSubstring(`"code": "world_unreachable"`))

		ws := startWorld(ctx, nil, "--addr", "127.0.0.1:0")
		o = overnight(ctx, state, nil, "run", "week", "--world", ws.url, "-o", "json")
		Expect(o.code).To(Equal(3), o.stderr)
		Expect(o.stdout).To(ContainSubstring(`"code": "world_mismatch"`))
		Expect(o.stdout).To(ContainSubstring("goal=maintenance"))

		o = overnight(ctx, state, nil, "run", "deploy", "--world", ws.url, "--fault", "api-version:v9@step:2", "-o", "json")
		Expect(o.code).To(Equal(3), o.stderr)
		Expect(o.stdout).To(ContainSubstring(`"code": "fault_invalid"`))
		Expect(o.stdout).To(ContainSubstring(`no API version \"v9\"`))

		ls := overnight(ctx, state, nil, "runs", "-o", "json")
		Expect(ls.code).To(Equal(0), ls.stderr)
		Expect(ls.stdout).NotTo(ContainSubstring(`"id"`), "no run is recorded")
	}, SpecTimeout(2*time.Minute))

	It("starts a command world per run, which dies with the harness and comes back on its data for the resume", func(ctx SpecContext) {
		state := stateDir()
		scen := filepath.Join(GinkgoT().TempDir(), "deploy-command-world.yaml")
		Expect(os.WriteFile(scen, []byte(commandWorldDeploy(bin)), 0o644)).To(Succeed())
		o := overnight(ctx, state, nil, "run", scen, "--fault", "harness-crash@step:3", "-o", "json")
		Expect(o.code).To(Equal(137), "the harness SIGKILLs itself: %s", o.stderr)
		id := runIDOf(o.stderr)
		Expect(worldProcesses(state)).To(BeEmpty(), "the command world died with its harness")

		r := overnight(ctx, state, nil, "resume", id, "-o", "json")
		Expect(r.code).To(Equal(0), r.stderr)
		res := decodeResult(r.stdout)
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Effects.Duplicates).To(Equal(0))
		log, err := os.ReadFile(filepath.Join(state, "worlds", "cloud-"+id, "world.log"))
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Count(string(log), "--- overnight: starting")).To(Equal(2), "started for the run, then again for its resume:\n%s", log)
		Expect(worldProcesses(state)).To(BeEmpty(), "the command world is stopped with its run")

		// The same digest as in-process.
		local := overnight(ctx, state, nil, "run", "deploy", "--fault", "harness-crash@step:3", "-o", "json")
		Expect(local.code).To(Equal(137))
		lr := overnight(ctx, state, nil, "resume", runIDOf(local.stderr), "-o", "json")
		Expect(decodeResult(lr.stdout).HistoryDigest).To(Equal(res.HistoryDigest))
	}, SpecTimeout(4*time.Minute))
})

// commandWorldDeploy is the built-in deploy scenario whose world is the
// cloud served by the overnight binary at bin, as a command world.
func commandWorldDeploy(bin string) string {
	raw, ok := builtin.Lookup("deploy")
	Expect(ok).To(BeTrue())
	line := fmt.Sprintf("world: {name: cloud, command: [%q, world, serve, cloud, --data, $OVERNIGHT_WORLD_DATA]}", bin)
	Expect(string(raw)).To(ContainSubstring("\nworld: cloud\n"))
	return strings.Replace(string(raw), "\nworld: cloud\n", "\n"+line+"\n", 1)
}

// journaledEffects reads run id's effects from state's journal (no
// harness holds it once the CLI has exited).
func journaledEffects(ctx context.Context, state, id string) []history.EffectRecord {
	GinkgoHelper()
	h, err := harness.Open(ctx, harness.Options{StateDir: state, Existing: true})
	Expect(err).NotTo(HaveOccurred())
	defer h.Close()
	effects, err := h.History().Effects(id)
	Expect(err).NotTo(HaveOccurred())
	return effects
}

// worldProcesses lists the pids of command worlds of state that are alive:
// processes whose environment names a data dir under state.
func worldProcesses(state string) []string {
	GinkgoHelper()
	var out []string
	procs, err := filepath.Glob("/proc/[0-9]*/environ")
	Expect(err).NotTo(HaveOccurred())
	want := []byte("OVERNIGHT_WORLD_DATA=" + filepath.Join(state, "worlds"))
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), string(want)) {
			out = append(out, strings.Split(p, "/")[2])
		}
	}
	return out
}
