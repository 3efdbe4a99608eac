package suite_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/docker"
)

// rawLoop is the floor a suite is measured against: `docker run --rm
// --network none IMAGE /overnight --version`, n times, par at a time,
// through the same Engine API client the harness uses (no docker CLI
// process per run, so the floor is the engine's work alone). The image is
// the suite's own sandbox image, so each container execs the same binary
// twice as a built-in agent's sandbox does (the init, then the command),
// and pays what `--network none` costs: a network namespace of its own.
// As `docker run --rm` does, it waits for the removal, registered before
// the start. Each container carries the ownership labels of state, so a
// benchmark that dies leaves nothing `harnesstest.Leftovers` misses.
func rawLoop(ctx context.Context, api docker.ContainerAPI, image, state string, n, par int) (time.Duration, error) {
	labels := map[string]string{sandbox.LabelManaged: "true", sandbox.LabelState: sandbox.StateHash(state)}
	jobs := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				errs <- rawRun(ctx, api, image, labels, i)
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	wall := time.Since(start)
	close(errs)
	var failed []string
	for err := range errs {
		if err != nil {
			failed = append(failed, err.Error())
		}
	}
	if len(failed) > 0 {
		return wall, fmt.Errorf("raw loop: %d of %d runs failed: %s", len(failed), n, strings.Join(failed, "; "))
	}
	return wall, nil
}

// rawRun is one `docker run --rm`: create, wait for removal, start, and the
// exit code, which must be 0.
func rawRun(ctx context.Context, api docker.ContainerAPI, image string, labels map[string]string, i int) error {
	created, err := api.ContainerCreate(ctx, &container.Config{Image: image, Cmd: []string{sandbox.InitPath, "--version"}, Labels: labels},
		&container.HostConfig{NetworkMode: network.NetworkNone, AutoRemove: true}, nil, nil, "")
	if err != nil {
		return fmt.Errorf("run %d: create: %w", i, err)
	}
	respC, errC := api.ContainerWait(ctx, created.ID, container.WaitConditionRemoved)
	if err := api.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		_ = api.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true})
		return fmt.Errorf("run %d: start %.12s: %w", i, created.ID, err)
	}
	select {
	case resp := <-respC:
		if resp.StatusCode != 0 || resp.Error != nil {
			return fmt.Errorf("run %d: %.12s exited %d (%v)", i, created.ID, resp.StatusCode, resp.Error)
		}
		return nil
	case err := <-errC:
		return fmt.Errorf("run %d: wait for %.12s: %w", i, created.ID, err)
	}
}

// standbyCount is the real engine, counting the standby sandboxes it is
// asked to create (a container whose environment names EnvStandby): a
// suite's plain runs must start none.
type standbyCount struct {
	docker.API
	n atomic.Int64
}

func (c *standbyCount) ContainerCreate(ctx context.Context, cfg *container.Config, host *container.HostConfig, net *network.NetworkingConfig, p *ocispec.Platform, name string) (container.CreateResponse, error) {
	if slices.ContainsFunc(cfg.Env, func(kv string) bool { return strings.HasPrefix(kv, sandbox.EnvStandby+"=") }) {
		c.n.Add(1)
	}
	return c.API.ContainerCreate(ctx, cfg, host, net, p, name)
}
