package docker

import (
	"github.com/overnight-dev/overnight/sandbox"

	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
)

// InspectAgentImage reads the configuration of an image already on the
// engine (nothing can be pulled). An image that is not there is ErrNotFound.
func (e *Engine) InspectAgentImage(ctx context.Context, ref string) (sandbox.ImageConfig, error) {
	info, err := e.api.ImageInspect(ctx, ref)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return sandbox.ImageConfig{}, fmt.Errorf("agent image %s is not on the engine, which can pull nothing: build, load or import it first: %w", ref, sandbox.ErrImageNotFound)
		}
		return sandbox.ImageConfig{}, wrap("inspect agent image", ref, err)
	}
	c := sandbox.ImageConfig{ID: info.ID}
	if info.Config != nil {
		c.Entrypoint, c.Cmd, c.WorkingDir, c.Env = info.Config.Entrypoint, info.Config.Cmd, info.Config.WorkingDir, info.Config.Env
	}
	return c, nil
}

// seedWorkspace creates the workspace volume of spec from seed, a sandbox
// image whose /workspace is owned by the sandbox user, unless it exists:
// Docker copies an image's content at a mount point into a new, empty
// volume — ownership included — when a container using it is created. An
// agent image without /workspace would otherwise get a volume owned by
// root, which the agent cannot write.
func (e *Engine) seedWorkspace(ctx context.Context, spec ContainerSpec, labels map[string]string) error {
	if _, err := e.api.VolumeInspect(ctx, spec.Workspace); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return wrap("inspect workspace volume", spec.Workspace, err)
	}
	name := ContainerName(spec.RunID, 0) + "-seed"
	create := func() (container.CreateResponse, error) {
		return e.api.ContainerCreate(ctx, &container.Config{Image: spec.SeedImage, Labels: labels},
			&container.HostConfig{
				NetworkMode: "none",
				Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: spec.Workspace, Target: sandbox.WorkspacePath,
					VolumeOptions: &mount.VolumeOptions{Labels: labels}}},
			}, nil, nil, name)
	}
	resp, err := create()
	if cerrdefs.IsConflict(err) {
		// A seed container a killed harness left behind.
		_ = e.api.ContainerRemove(ctx, name, container.RemoveOptions{Force: true})
		resp, err = create()
	}
	if err != nil {
		return wrap("seed workspace volume "+spec.Workspace+" from", spec.SeedImage, err)
	}
	if err := e.api.ContainerRemove(ctx, resp.ID, container.RemoveOptions{Force: true}); err != nil {
		return wrap("remove the workspace seed container", name, err)
	}
	// The volume exists now; make sure (it is created with the container).
	if _, err := e.api.VolumeInspect(ctx, spec.Workspace); err != nil {
		return wrap("inspect seeded workspace volume", spec.Workspace, err)
	}
	return nil
}
