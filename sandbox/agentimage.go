package sandbox

import (
	"context"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
)

// ImageConfig is what an agent's own image says it runs, as the engine
// reports it.
type ImageConfig struct {
	// ID is the image's content id (sha256:...): a sandbox runs exactly
	// the image that was inspected, even if its tag moves.
	ID         string
	Entrypoint []string // ENTRYPOINT
	Cmd        []string // CMD
	WorkingDir string   // WORKDIR ("" when unset)
	Env        []string // ENV, KEY=VALUE
}

// HasEnv reports whether the image's ENV sets key.
func (c ImageConfig) HasEnv(key string) bool {
	for _, kv := range c.Env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			return true
		}
	}
	return false
}

// InspectAgentImage reads the configuration of an image already on the
// engine (nothing can be pulled). An image that is not there is ErrNotFound.
func (e *Engine) InspectAgentImage(ctx context.Context, ref string) (ImageConfig, error) {
	info, err := e.api.ImageInspect(ctx, ref)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return ImageConfig{}, fmt.Errorf("agent image %s is not on the engine, which can pull nothing: build, load or import it first: %w", ref, ErrImageNotFound)
		}
		return ImageConfig{}, wrap("inspect agent image", ref, err)
	}
	c := ImageConfig{ID: info.ID}
	if info.Config != nil {
		c.Entrypoint, c.Cmd, c.WorkingDir, c.Env = info.Config.Entrypoint, info.Config.Cmd, info.Config.WorkingDir, info.Config.Env
	}
	return c, nil
}

// AgentCommand is the command a container of img runs, with command and
// args as Kubernetes and Compose mean them: command replaces the image's
// ENTRYPOINT, args its CMD, and a command without args drops the CMD. So
// an image with no ENTRYPOINT runs args as its whole command, as Docker
// does. note, when not empty, says how the meaning args had in earlier
// versions (the whole command, in place of the entrypoint) differs for
// this image, and how to get it. An empty command is an error: the
// image has nothing to run.
func AgentCommand(ref string, command, args []string, img ImageConfig) (cmd []string, note string, err error) {
	switch {
	case command != nil:
		cmd = append(append(cmd, command...), args...)
	case args != nil:
		cmd = append(append(cmd, img.Entrypoint...), args...)
		if len(img.Entrypoint) > 0 {
			note = fmt.Sprintf("agent.args follow the ENTRYPOINT %q of image %s, as in Kubernetes and Compose: the agent runs %q. (Earlier versions of overnight ran the args alone, in place of the entrypoint: to do that, set them as agent.command. To keep this meaning without this warning, give the entrypoint as agent.command.)", img.Entrypoint, ref, cmd)
		}
	default:
		cmd = append(append(cmd, img.Entrypoint...), img.Cmd...)
	}
	if len(cmd) == 0 {
		return nil, "", fmt.Errorf("%w: image %s has no ENTRYPOINT or CMD, and the scenario gives no agent.command: nothing to run; set agent.command (and args) to the agent's command line", ErrInvalidSpec, ref)
	}
	return cmd, note, nil
}

// seedWorkspace creates the workspace volume of spec from seed, a sandbox
// image whose /workspace is owned by the sandbox user, unless it exists:
// Docker copies an image's content at a mount point into a new, empty
// volume — ownership included — when a container using it is created. An
// agent image without /workspace would otherwise get a volume owned by
// root, which the agent cannot write.
func (e *Engine) seedWorkspace(ctx context.Context, spec Spec, labels map[string]string) error {
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
				Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: spec.Workspace, Target: WorkspacePath,
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
