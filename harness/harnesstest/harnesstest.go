// Package harnesstest helps tests that drive overnight end to end against
// the real Docker engine: it builds the static overnight binary a sandbox
// needs (under `go test` the running executable is the test binary, which
// cannot serve as the sandbox's init), and finds what a test left behind.
// It is for tests only; nothing in the product imports it.
package harnesstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/docker"
)

// ModuleRoot is the directory of the overnight module's go.mod.
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Build builds the package pkg (e.g. "./cmd/overnight") as a static
// linux/amd64 binary at out. A non-empty nonce is linked into
// main.buildNonce, so a suite gets a binary — and a sandbox image — of its
// own that no concurrently running suite shares or removes.
func Build(ctx context.Context, pkg, out, nonce string) error {
	return goBuild(ctx, pkg, out, nonce, "")
}

// BuildCLI builds what `make build` does into dir — the overnight CLI and
// the overnight-sandbox built with it, one build id linked into both, so
// the CLI injects that sibling — with nonce as Build's. It returns the
// paths of both.
func BuildCLI(ctx context.Context, dir, nonce string) (cli, sandboxBin string, err error) {
	cli, sandboxBin = filepath.Join(dir, "overnight"), filepath.Join(dir, "overnight-sandbox")
	id := "test-" + nonce
	if err := goBuild(ctx, "./cmd/overnight", cli, nonce, id); err != nil {
		return "", "", err
	}
	return cli, sandboxBin, goBuild(ctx, "./cmd/overnight-sandbox", sandboxBin, nonce, id)
}

// BuildSandboxAs builds the overnight-sandbox at out with the build id
// buildID (the Makefile's -X main.buildID), as a sibling that was or was
// not built with a CLI.
func BuildSandboxAs(ctx context.Context, out, nonce, buildID string) error {
	return goBuild(ctx, "./cmd/overnight-sandbox", out, nonce, buildID)
}

func goBuild(ctx context.Context, pkg, out, nonce, buildID string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	args := []string{"build", "-trimpath", "-o", out}
	var x []string
	if nonce != "" {
		x = append(x, "-X main.buildNonce="+nonce)
	}
	if buildID != "" {
		x = append(x, "-X main.buildID="+buildID)
	}
	if len(x) > 0 {
		args = append(args, "-ldflags", strings.Join(x, " "))
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Dir = ModuleRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// Containers lists the ids of every sandbox container labelled with the
// given state dir's hash (running or not): the network-namespace holders a
// live harness keeps are not sandboxes (see AllContainers).
func Containers(ctx context.Context, api client.ContainerAPIClient, stateDir string) ([]string, error) {
	return containers(ctx, api, stateDir, false)
}

// AllContainers lists every container of the state dir, the harness's
// network-namespace holders too.
func AllContainers(ctx context.Context, api client.ContainerAPIClient, stateDir string) ([]string, error) {
	return containers(ctx, api, stateDir, true)
}

func containers(ctx context.Context, api client.ContainerAPIClient, stateDir string, holders bool) ([]string, error) {
	f := filters.NewArgs(
		filters.Arg("label", sandbox.LabelManaged+"=true"),
		filters.Arg("label", sandbox.LabelState+"="+sandbox.StateHash(stateDir)),
	)
	list, err := api.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(list))
	for _, c := range list {
		if !holders && c.Labels[docker.LabelRole] == docker.RoleNetNS {
			continue
		}
		ids = append(ids, strings.TrimPrefix(c.ID, "/"))
	}
	return ids, nil
}

// Leftovers force-removes every container and volume of the state dir (so
// a failed test leaves nothing behind) and returns the ids and names it
// found: a test asserts that the list is empty.
func Leftovers(ctx context.Context, api client.APIClient, stateDir string) []string {
	ids, err := AllContainers(ctx, api, stateDir)
	if err != nil {
		return []string{"(cannot list containers: " + err.Error() + ")"}
	}
	for _, id := range ids {
		_ = api.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	}
	vols, err := api.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", sandbox.LabelManaged+"=true"),
		filters.Arg("label", sandbox.LabelState+"="+sandbox.StateHash(stateDir)),
	)})
	if err != nil {
		return append(ids, "(cannot list volumes: "+err.Error()+")")
	}
	for _, v := range vols.Volumes {
		ids = append(ids, "volume "+v.Name)
		_ = api.VolumeRemove(ctx, v.Name, true)
	}
	nets, err := api.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", sandbox.LabelManaged+"=true"),
		filters.Arg("label", sandbox.LabelState+"="+sandbox.StateHash(stateDir)),
	)})
	if err != nil {
		return append(ids, "(cannot list networks: "+err.Error()+")")
	}
	for _, n := range nets {
		ids = append(ids, "network "+n.Name)
		_ = api.NetworkRemove(ctx, n.ID)
	}
	return ids
}
