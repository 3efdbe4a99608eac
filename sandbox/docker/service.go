package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"

	"github.com/docker/docker/api/types/container"
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
// user, its command unless spec.Cmd), on the engine's default bridge — not
// on a run's internal network, so no sandbox can reach it — with its port
// published on the host's loopback only, where the harness reaches it.
// It carries the run's labels: Release and Reap remove it with the run.
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
	if _, err := b.eng.api.ImageInspect(ctx, spec.Image); err != nil {
		return nil, wrap("start service "+spec.Name+": image", spec.Image+" (nothing is pulled: build, load or import it first)", err)
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
	}
	cfg := &container.Config{Image: spec.Image, Cmd: spec.Cmd, Env: envList(spec.Env), Labels: labels, ExposedPorts: nat.PortSet{port: {}}}
	resp, err := b.eng.api.ContainerCreate(ctx, cfg, host, nil, nil, name)
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
