package docker

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
)

// NetworkName is the name of a run's network.
func NetworkName(runID string) string {
	run := nameUnsafe.ReplaceAllString(runID, "-")
	if len(run) > 100 {
		run = run[:100]
	}
	return "overnight-net-" + run
}

// EnsureNetwork makes the run's network if it does not exist: an internal
// bridge (containers on it reach each other, nothing beyond), labelled like
// the run's containers so the reaper finds it. It returns its name.
func (e *Engine) EnsureNetwork(ctx context.Context, runID string) (string, error) {
	name := NetworkName(runID)
	list, err := e.api.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return "", wrap("list networks", name, err)
	}
	for _, n := range list {
		if n.Name == name {
			return name, nil
		}
	}
	_, err = e.api.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Internal: true, Labels: e.labels(runID, nil)})
	if err != nil && !cerrdefs.IsConflict(err) {
		return "", wrap("create network", name, err)
	}
	return name, nil
}

// Disconnect detaches a container from a network (the disconnect fault).
func (e *Engine) Disconnect(ctx context.Context, networkName, id string) error {
	if err := e.api.NetworkDisconnect(ctx, networkName, id, true); err != nil {
		return wrap("disconnect sandbox from network "+networkName, id, err)
	}
	return nil
}

// Connect attaches a container to a network again.
func (e *Engine) Connect(ctx context.Context, networkName, id string) error {
	if err := e.api.NetworkConnect(ctx, networkName, id, nil); err != nil {
		return wrap("connect sandbox to network "+networkName, id, err)
	}
	return nil
}

// Attached reports whether a container is attached to a network now.
func (e *Engine) Attached(ctx context.Context, networkName, id string) (bool, error) {
	info, err := e.api.ContainerInspect(ctx, id)
	if err != nil {
		return false, wrap("inspect sandbox", id, err)
	}
	if info.NetworkSettings == nil {
		return false, nil
	}
	_, ok := info.NetworkSettings.Networks[networkName]
	return ok, nil
}

// RemoveNetwork removes a network; a missing one is not an error.
func (e *Engine) RemoveNetwork(ctx context.Context, networkName string) error {
	ctx, cancel := detached(ctx)
	defer cancel()
	if err := e.api.NetworkRemove(ctx, networkName); err != nil && !cerrdefs.IsNotFound(err) {
		return wrap("remove network", networkName, err)
	}
	return nil
}

// reapNetworks removes the networks doomed says to, after their containers.
func (e *Engine) reapNetworks(ctx context.Context, op string, f filters.Args, doomed func(labels map[string]string) bool) error {
	list, err := e.api.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return wrap(op+": list", "networks", err)
	}
	var errs []error
	for _, n := range list {
		if !doomed(n.Labels) {
			continue
		}
		if err := e.RemoveNetwork(ctx, n.Name); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: %v", op, errs)
	}
	return nil
}
