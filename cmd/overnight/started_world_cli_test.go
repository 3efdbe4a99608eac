package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/docker"
)

// deployWorldFile writes the deploy scenario with its world replaced by
// world (a YAML flow mapping) and returns its path.
func deployWorldFile(world string) string {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join(harnesstest.ModuleRoot(), "scenarios", "builtin", "deploy.yaml"))
	Expect(err).NotTo(HaveOccurred())
	text := strings.Replace(string(raw), "\nworld: cloud\n", "\nworld: "+world+"\n", 1)
	Expect(text).NotTo(Equal(string(raw)))
	file := filepath.Join(GinkgoT().TempDir(), "deploy-world.yaml")
	Expect(os.WriteFile(file, []byte(text), 0o644)).To(Succeed())
	return file
}

// worldContainers lists the state dir's image-world containers: id ->
// state.
func worldContainers(ctx context.Context, state string) map[string]string {
	GinkgoHelper()
	list, err := dockerCli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", sandbox.LabelManaged+"=true"),
		filters.Arg("label", sandbox.LabelState+"="+sandbox.StateHash(state)),
		filters.Arg("label", docker.LabelRole+"="+docker.RoleService),
	)})
	Expect(err).NotTo(HaveOccurred())
	out := map[string]string{}
	for _, c := range list {
		Expect(c.Labels).To(HaveKeyWithValue(docker.LabelService, "world.cloud"))
		out[c.ID] = string(c.State)
	}
	return out
}

var _ = Describe("an image world across the harness's death", func() {
	It("outlives a SIGKILLed harness, is reaped with its output kept (on resume, and by gc), and the resumed run finds its data", func(ctx SpecContext) {
		tag := fmt.Sprintf("overnight-test/cloud-world:cli-%d", time.Now().UnixNano())
		DeferCleanup(func(ctx SpecContext) { Expect(harnesstest.RemoveImage(ctx, dockerCli, tag)).To(Succeed()) })
		Expect(harnesstest.WorldImage(ctx, dockerCli, bin, tag, "cloud", 8080)).To(Succeed())
		scenario := deployWorldFile("{name: cloud, image: " + tag + ", port: 8080}")
		state := stateDir()
		crash := func() string {
			o := overnight(ctx, state, nil, "run", scenario, "--seed", "1", "--fault", "harness-crash@effect:2", "-o", "json")
			Expect(o.code).To(Equal(128+int(syscall.SIGKILL)), "the harness must really die by SIGKILL:\n%s", o.stderr)
			id := runIDOf(o.stderr)
			Expect(id).NotTo(BeEmpty())
			Expect(worldContainers(ctx, state)).To(ContainElement("running"), "nobody stopped the world after the crash")
			return id
		}
		logOf := func(id string) string {
			b, err := os.ReadFile(filepath.Join(state, "worlds", "cloud-"+id, "world.log"))
			Expect(err).NotTo(HaveOccurred())
			return string(b)
		}

		// Resumed: the dead harness's world goes (its output kept), a new
		// one starts on the same data, where effect 2 — applied, its
		// answer never journaled — is found.
		id := crash()
		r := overnight(ctx, state, nil, "resume", id, "-o", "json")
		Expect(r.code).To(Equal(0), r.stderr)
		res := decodeResult(r.stdout)
		Expect(res.Verdict).To(Equal("pass"), res.Reason)
		Expect(res.Effects.Executed).To(Equal(5), "no effect ran twice across the crash")
		Expect(res.Effects.Duplicates).To(Equal(0))
		log := logOf(id)
		Expect(strings.Count(log, "--- overnight: starting image "+tag)).To(Equal(2), log)
		Expect(log).To(ContainSubstring("orphaned: the harness died while it ran; reaped"))
		Expect(worldContainers(ctx, state)).To(BeEmpty())

		// Left for gc: it goes, its output kept.
		id = crash()
		o := overnight(ctx, state, nil, "gc", "-o", "json")
		Expect(o.code).To(Equal(0), o.stderr)
		Expect(worldContainers(ctx, state)).To(BeEmpty(), "gc removes the world of a dead run")
		Expect(logOf(id)).To(ContainSubstring("orphaned: the harness died while it ran; reaped"))
		Expect(logOf(id)).To(MatchRegexp(`serving world cloud on http://\S+:8080, state in /data\n`))
		// The run is still resumable (gc kept its workspace), on its data.
		r = overnight(ctx, state, nil, "resume", id, "-o", "json")
		Expect(r.code).To(Equal(0), r.stderr)
		Expect(decodeResult(r.stdout).Effects.Executed).To(Equal(5))
	}, SpecTimeout(4*time.Minute))
})

var _ = Describe("overnight run with world-crash", func() {
	It("refuses it on a built-in world, as fault_invalid, before any run", func(ctx SpecContext) {
		state := stateDir()
		o := overnight(ctx, state, nil, "run", "deploy", "--fault", "world-crash@effect:2", "-o", "json")
		Expect(o.code).To(Equal(3), o.stderr)
		Expect(errorJSON(o)["code"]).To(Equal("fault_invalid"))
		Expect(o.stderr).To(ContainSubstring("world-crash acts on a world the harness starts for the run, and this scenario's world cloud is built into the harness"))
		o = overnight(ctx, state, nil, "runs", "-o", "json")
		Expect(o.stdout).To(MatchJSON(`{"runs": []}`), "no run was recorded")
	})
})
