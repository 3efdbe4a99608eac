package docker

import (
	"github.com/overnight-dev/overnight/sandbox"

	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
)

// List returns this state directory's sandboxes of runID (all runs when runID is ""), stopped
// ones included, ordered by run and attempt.
func (e *Engine) List(ctx context.Context, runID string) ([]Container, error) {
	f := filters.NewArgs(
		filters.Arg("label", sandbox.LabelManaged+"=true"),
		filters.Arg("label", sandbox.LabelState+"="+e.state),
	)
	if runID != "" {
		f.Add("label", sandbox.LabelRun+"="+runID)
	}
	sbs, err := e.list(ctx, f)
	if err != nil {
		return nil, wrap("list sandboxes of state", e.state, err)
	}
	return sbs, nil
}

func (e *Engine) list(ctx context.Context, f filters.Args) ([]Container, error) {
	cs, err := e.api.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, err
	}
	out := make([]Container, 0, len(cs))
	for _, c := range cs {
		sb := Container{ID: c.ID, RunID: c.Labels[sandbox.LabelRun], State: string(c.State), Service: c.Labels[LabelService]}
		if len(c.Names) > 0 {
			sb.Name = strings.TrimPrefix(c.Names[0], "/")
		}
		sb.Attempt, _ = strconv.Atoi(c.Labels[sandbox.LabelAttempt])
		out = append(out, sb)
	}
	slices.SortFunc(out, func(a, b Container) int {
		return cmp.Or(cmp.Compare(a.RunID, b.RunID), cmp.Compare(a.Attempt, b.Attempt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// Reap removes this state directory's sandboxes whose run is not live (live(runID) false; a
// nil live means none is), running or not, then the workspace volumes of those runs unless
// Options.KeepVolume keeps them. It returns the ids of the containers it removed, and every
// failure joined. It never touches another state directory's containers or volumes.
func (e *Engine) Reap(ctx context.Context, live func(runID string) bool) ([]string, error) {
	if live == nil {
		live = func(string) bool { return false }
	}
	dead := func(labels map[string]string) bool {
		run := labels[sandbox.LabelRun]
		return run != "" && !live(run)
	}
	deadVolume := func(labels map[string]string) bool {
		return dead(labels) && (e.keepVol == nil || !e.keepVol(labels[sandbox.LabelRun]))
	}
	return e.reap(ctx, "reap state "+e.state, filters.NewArgs(
		filters.Arg("label", sandbox.LabelManaged+"=true"),
		filters.Arg("label", sandbox.LabelState+"="+e.state),
	), dead, deadVolume)
}

// ReapAll removes every container and volume labelled overnight.managed=true, whatever its
// state directory or run (`overnight gc --all`). It returns the removed container ids.
func (e *Engine) ReapAll(ctx context.Context) ([]string, error) {
	all := func(map[string]string) bool { return true }
	return e.reap(ctx, "reap all", filters.NewArgs(filters.Arg("label", sandbox.LabelManaged+"=true")), all, all)
}

func (e *Engine) reap(ctx context.Context, op string, f filters.Args, doomed, doomedVolume func(labels map[string]string) bool) ([]string, error) {
	cs, err := e.api.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, wrap(op+": list", "containers", err)
	}
	var removed []string
	var errs []error
	for _, c := range cs {
		if !doomed(c.Labels) {
			continue
		}
		if ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("%s: stopped before container %s: %w", op, c.ID, ctx.Err()))
			break
		}
		if err := e.Remove(ctx, c.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		e.log.Debug("reaped sandbox", "id", c.ID, "run", c.Labels[sandbox.LabelRun])
		removed = append(removed, c.ID)
	}
	if ctx.Err() != nil {
		return removed, errors.Join(errs...)
	}
	vols, err := e.api.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return removed, errors.Join(append(errs, wrap(op+": list", "volumes", err))...)
	}
	for _, v := range vols.Volumes {
		if v == nil || !doomedVolume(v.Labels) {
			continue
		}
		if err := e.RemoveVolume(ctx, v.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		e.log.Debug("reaped workspace volume", "volume", v.Name, "run", v.Labels[sandbox.LabelRun])
	}
	if err := e.reapNetworks(ctx, op, f, doomedVolume); err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}
