package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-connections/nat"

	"github.com/overnight-dev/overnight/sandbox"
)

// RoleService marks a service container (LabelRole): a world or an MCP
// server beside a run's sandboxes.
const RoleService = "service"

// LabelService names a run's service (ServiceSpec.Name).
const LabelService = "overnight.service"

var serviceName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// service is a started service container.
type service struct {
	*box
	addr string
}

func (s *service) Addr() string { return s.addr }

// StartService implements sandbox.Services: the image runs as it is (its
// user unless spec.User, its command unless spec.Cmd), on the engine's
// default bridge — not on a run's internal network, so no sandbox can
// reach it — with its port published on the host's loopback only, where
// the harness reaches it. It carries the run's labels: Release and Reap
// remove it with the run. A container of the same run and name still
// there is removed first.
func (b *Backend) StartService(ctx context.Context, spec sandbox.ServiceSpec) (sandbox.Service, error) {
	switch {
	case spec.RunID == "":
		return nil, fmt.Errorf("start service: %w: RunID is required", sandbox.ErrInvalidSpec)
	case !serviceName.MatchString(spec.Name):
		return nil, fmt.Errorf("start service %q: %w: a name is letters, digits, '-', '_' and '.'", spec.Name, sandbox.ErrInvalidSpec)
	case spec.Image == "":
		return nil, fmt.Errorf("start service %s: %w: Image is required", spec.Name, sandbox.ErrInvalidSpec)
	case spec.Port <= 0 || spec.Port > 65535:
		return nil, fmt.Errorf("start service %s: %w: Port %d is not a TCP port", spec.Name, sandbox.ErrInvalidSpec, spec.Port)
	}
	var mounts []mount.Mount
	for _, target := range slices.Sorted(maps.Keys(spec.Binds)) {
		source := spec.Binds[target]
		if !path.IsAbs(target) || !filepath.IsAbs(source) {
			return nil, fmt.Errorf("start service %s: %w: bind %s -> %s: both paths must be absolute", spec.Name, sandbox.ErrInvalidSpec, source, target)
		}
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: source, Target: target})
	}
	if _, err := b.eng.api.ImageInspect(ctx, spec.Image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, &imageMissing{fmt.Sprintf("start service %s: image %s is not on the engine, which pulls nothing: build, load or import it first (%v)", spec.Name, spec.Image, err)}
		}
		return nil, wrap("start service "+spec.Name+": image", spec.Image, err)
	}
	name := "overnight-svc-" + nameUnsafe.ReplaceAllString(spec.RunID, "-") + "-" + spec.Name
	labels := b.eng.labels(spec.RunID, map[string]string{LabelRole: RoleService, LabelService: spec.Name})
	port := nat.Port(strconv.Itoa(spec.Port) + "/tcp")
	pids := int64(512)
	host := &container.HostConfig{
		NetworkMode:   "bridge",
		CapDrop:       []string{"ALL"},
		SecurityOpt:   []string{"no-new-privileges"},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		PortBindings:  nat.PortMap{port: {{HostIP: "127.0.0.1", HostPort: ""}}},
		LogConfig:     container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "8m", "max-file": "2"}},
		Resources:     container.Resources{PidsLimit: &pids},
		Mounts:        mounts,
	}
	cfg := &container.Config{Image: spec.Image, Cmd: spec.Cmd, Env: envList(spec.Env), Labels: labels, ExposedPorts: nat.PortSet{port: {}}, User: spec.User}
	resp, err := b.eng.api.ContainerCreate(ctx, cfg, host, nil, nil, name)
	if cerrdefs.IsConflict(err) {
		// A service of this run and name left behind (a dead harness's, or
		// one that exited): it goes, and this one takes its name.
		if rerr := b.eng.Remove(ctx, name); rerr != nil {
			return nil, errors.Join(wrap("create service", name+" from image "+spec.Image, err), rerr)
		}
		resp, err = b.eng.api.ContainerCreate(ctx, cfg, host, nil, nil, name)
	}
	if err != nil {
		return nil, wrap("create service", name+" from image "+spec.Image, err)
	}
	s := &service{box: &box{b: b, id: resp.ID}}
	if err := b.eng.Start(ctx, resp.ID); err != nil {
		return nil, errors.Join(err, s.Remove(ctx))
	}
	info, err := b.eng.api.ContainerInspect(ctx, resp.ID)
	if err != nil {
		return nil, errors.Join(wrap("inspect service", name, err), s.Remove(ctx))
	}
	if info.NetworkSettings != nil {
		for _, bind := range info.NetworkSettings.Ports[port] {
			if bind.HostPort != "" {
				s.addr = net.JoinHostPort("127.0.0.1", bind.HostPort)
				break
			}
		}
	}
	if s.addr == "" {
		return nil, errors.Join(fmt.Errorf("start service %s: the engine published no host port for %s", name, port), s.Remove(ctx))
	}
	return s, nil
}

// imageMissing is a service's image that is not on the engine: it is
// sandbox.ErrImageNotFound, with a message about the service.
type imageMissing struct{ msg string }

func (e *imageMissing) Error() string { return e.msg }
func (e *imageMissing) Unwrap() error { return sandbox.ErrImageNotFound }
