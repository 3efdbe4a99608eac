package docker_test

import (
	"github.com/overnight-dev/overnight/sandbox/docker"

	"context"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// scopedAPI narrows every list ReapAll makes to one label, so the test exercises the real
// removal on the shared engine without touching anyone else's overnight containers.
type scopedAPI struct {
	*countingAPI
	label string
}

func (s scopedAPI) ContainerList(ctx context.Context, o container.ListOptions) ([]container.Summary, error) {
	o.Filters = o.Filters.Clone()
	o.Filters.Add("label", s.label)
	return s.countingAPI.ContainerList(ctx, o)
}

func (s scopedAPI) VolumeList(ctx context.Context, o volume.ListOptions) (volume.ListResponse, error) {
	o.Filters = o.Filters.Clone()
	o.Filters.Add("label", s.label)
	return s.countingAPI.VolumeList(ctx, o)
}

func exists(ctx context.Context, id string) bool {
	_, err := cli.ContainerInspect(ctx, id)
	return err == nil
}

func volumeExists(ctx context.Context, name string) bool {
	_, err := cli.VolumeInspect(ctx, name)
	return err == nil
}

var _ = Describe("List and Reap", func() {
	It("lists and reaps only this state dir's sandboxes of runs that are not live, with their workspaces", func(ctx SpecContext) {
		mine, other := newEngine(), newEngine()
		Expect(mine.StateHash()).NotTo(Equal(other.StateHash()))

		dead := agentSpec("sleep", "60s")
		dead.Workspace = "ovn-test-ws-" + dead.RunID
		dead1 := start(ctx, mine, dead)
		dead.Attempt = 2
		dead2 := create(ctx, mine, dead) // created, never started

		alive := agentSpec("sleep", "60s")
		alive.Workspace = "ovn-test-ws-" + alive.RunID
		alive1 := start(ctx, mine, alive)

		// Another state dir's sandbox, even of a run with the same id, is never ours to reap.
		foreign := agentSpec("sleep", "60s")
		foreign.RunID = dead.RunID
		foreign.Attempt = 9
		foreign1 := start(ctx, other, foreign)

		all, err := mine.List(ctx, "")
		Expect(err).NotTo(HaveOccurred())
		Expect(all).To(HaveLen(3))
		Expect(all).To(ContainElement(docker.Container{ID: dead1.ID, Name: dead1.Name, RunID: dead.RunID, Attempt: 1, State: "running"}))
		Expect(all).To(ContainElement(docker.Container{ID: dead2.ID, Name: dead2.Name, RunID: dead.RunID, Attempt: 2, State: "created"}))
		ofRun, err := mine.List(ctx, dead.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(ofRun).To(HaveLen(2))
		Expect(ofRun[0].Attempt).To(Equal(1))
		Expect(ofRun[1].Attempt).To(Equal(2))

		removed, err := mine.Reap(ctx, func(run string) bool { return run == alive.RunID })
		Expect(err).NotTo(HaveOccurred())
		Expect(removed).To(ConsistOf(dead1.ID, dead2.ID))
		Expect(exists(ctx, dead1.ID)).To(BeFalse())
		Expect(exists(ctx, dead2.ID)).To(BeFalse())
		Expect(volumeExists(ctx, dead.Workspace)).To(BeFalse(), "a dead run's workspace goes with it")
		Expect(exists(ctx, alive1.ID)).To(BeTrue())
		Expect(volumeExists(ctx, alive.Workspace)).To(BeTrue())
		Expect(exists(ctx, foreign1.ID)).To(BeTrue(), "another state dir's sandbox is left alone")

		removed, err = mine.Reap(ctx, func(run string) bool { return run == alive.RunID })
		Expect(err).NotTo(HaveOccurred())
		Expect(removed).To(BeEmpty())
	})

	It("keeps the workspace volume of a dead run that KeepVolume says is resumable", func(ctx SpecContext) {
		resumable := agentSpec("sleep", "60s")
		resumable.Workspace = "ovn-test-ws-" + resumable.RunID
		finished := agentSpec("sleep", "60s")
		finished.Workspace = "ovn-test-ws-" + finished.RunID
		e := newEngine(func(o *docker.Options) {
			o.KeepVolume = func(run string) bool { return run == resumable.RunID }
		})
		r1 := start(ctx, e, resumable)
		f1 := start(ctx, e, finished)

		removed, err := e.Reap(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(removed).To(ConsistOf(r1.ID, f1.ID), "containers of dead runs go, resumable or not")
		Expect(volumeExists(ctx, resumable.Workspace)).To(BeTrue(), "a resumable run keeps its workspace")
		Expect(volumeExists(ctx, finished.Workspace)).To(BeFalse())
	})

	It("ReapAll removes every managed container and volume, whatever the state dir", func(ctx SpecContext) {
		scope := "overnight.test.reapall=" + nextRun()
		var scoped docker.API = scopedAPI{countingAPI: api, label: scope}
		a := docker.New(scoped, docker.Options{StateHash: "reapall-a-" + suiteID})
		b := docker.New(scoped, docker.Options{StateHash: "reapall-b-" + suiteID})

		s1 := agentSpec("sleep", "60s")
		s1.Labels["overnight.test.reapall"] = scope[len("overnight.test.reapall="):]
		s1.Workspace = "ovn-test-ws-" + s1.RunID
		c1 := start(ctx, a, s1)
		s2 := agentSpec("sleep", "60s")
		s2.Labels["overnight.test.reapall"] = scope[len("overnight.test.reapall="):]
		c2 := create(ctx, b, s2)
		outside := create(ctx, a, agentSpec("sleep", "60s")) // managed, but outside the test's scope

		removed, err := a.ReapAll(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(removed).To(ConsistOf(c1.ID, c2.ID))
		Expect(exists(ctx, c1.ID)).To(BeFalse())
		Expect(exists(ctx, c2.ID)).To(BeFalse())
		Expect(volumeExists(ctx, s1.Workspace)).To(BeFalse())
		Expect(exists(ctx, outside.ID)).To(BeTrue())

		left, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", scope))})
		Expect(err).NotTo(HaveOccurred())
		Expect(left).To(BeEmpty())
	})
})
