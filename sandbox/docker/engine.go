// Package docker is overnight's Docker sandbox backend (sandbox.Backend, see Backend): it owns
// overnight's side of the Docker Engine: the sandbox images (a FROM-scratch
// image around the harness's own static binary, which runs as PID 1), the containers agents run
// in, with their hardening defaults and resource limits, their lifecycle (create, start, wait,
// kill, stop, restart, pause, unpause, logs, remove), the ownership labels every container and
// volume carries, and the reaper that removes leftovers by those labels.
//
// Everything goes through the Docker Go SDK behind the small interfaces declared here (API); the
// docker CLI is never run. The package must not know about runs beyond their id and attempt
// number, must not serve the gateway (that is the harness's; this package only provides the
// short socket directory it is bind-mounted from), and must never touch a container or volume
// that does not carry its labels — nor, outside ReapAll, one of another state directory.
package docker

import (
	"github.com/overnight-dev/overnight/sandbox"

	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// ErrEngineUnreachable: the Docker engine could not be reached (Connect, or any call that lost
// the connection). It is also sandbox.ErrUnavailable.
var ErrEngineUnreachable error = unreachable{}

type unreachable struct{}

func (unreachable) Error() string        { return "cannot reach the Docker engine" }
func (unreachable) Is(target error) bool { return target == sandbox.ErrUnavailable }

// errGone is sandbox.ErrNotFound, said of the engine.
var errGone = fmt.Errorf("%w on the Docker engine", sandbox.ErrNotFound)

// ImageAPI is the part of the Docker client that builds and removes images.
type ImageAPI interface {
	ImageInspect(ctx context.Context, imageID string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	ImageBuild(ctx context.Context, buildContext io.Reader, options build.ImageBuildOptions) (build.ImageBuildResponse, error)
	ImageRemove(ctx context.Context, imageID string, options image.RemoveOptions) ([]image.DeleteResponse, error)
	ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error)
	ImageTag(ctx context.Context, source, target string) error
}

// ContainerAPI is the part of the Docker client that runs containers.
type ContainerAPI interface {
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, containerID string, options container.StartOptions) error
	ContainerWait(ctx context.Context, containerID string, condition container.WaitCondition) (<-chan container.WaitResponse, <-chan error)
	ContainerKill(ctx context.Context, containerID, signal string) error
	ContainerStop(ctx context.Context, containerID string, options container.StopOptions) error
	ContainerRestart(ctx context.Context, containerID string, options container.StopOptions) error
	ContainerPause(ctx context.Context, containerID string) error
	ContainerUnpause(ctx context.Context, containerID string) error
	ContainerLogs(ctx context.Context, containerID string, options container.LogsOptions) (io.ReadCloser, error)
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	CopyFromContainer(ctx context.Context, containerID, srcPath string) (io.ReadCloser, container.PathStat, error)
	ContainerExecCreate(ctx context.Context, containerID string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecAttach(ctx context.Context, execID string, config container.ExecAttachOptions) (types.HijackedResponse, error)
	ContainerExecInspect(ctx context.Context, execID string) (container.ExecInspect, error)
}

// VolumeAPI is the part of the Docker client that manages workspace volumes.
type VolumeAPI interface {
	VolumeCreate(ctx context.Context, options volume.CreateOptions) (volume.Volume, error)
	VolumeInspect(ctx context.Context, volumeID string) (volume.Volume, error)
	VolumeList(ctx context.Context, options volume.ListOptions) (volume.ListResponse, error)
	VolumeRemove(ctx context.Context, volumeID string, force bool) error
}

// API is the narrow subset of *client.Client the package calls; *client.Client satisfies it.
// NetworkAPI is the part of the Docker client the sandbox's optional
// network (and the disconnect fault) use.
type NetworkAPI interface {
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	NetworkConnect(ctx context.Context, networkID, containerID string, config *network.EndpointSettings) error
	NetworkDisconnect(ctx context.Context, networkID, containerID string, force bool) error
	NetworkRemove(ctx context.Context, networkID string) error
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	ContainerInspect(ctx context.Context, containerID string) (container.InspectResponse, error)
}

type API interface {
	ImageAPI
	ContainerAPI
	VolumeAPI
	NetworkAPI
}

var _ API = (*client.Client)(nil)

// connectTimeout bounds Connect's ping, so an unreachable engine fails fast.
const connectTimeout = 5 * time.Second

// cleanupTimeout bounds removals, which run detached from the caller's cancellation.
const cleanupTimeout = 30 * time.Second

// Connect returns a client for the engine named by the environment (DOCKER_HOST, DOCKER_CERT_PATH,
// ...), negotiating the API version down to the engine's, after a ping bounded by a few seconds.
// Any failure wraps ErrEngineUnreachable. The caller closes the client.
func Connect(ctx context.Context) (*client.Client, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("%w: invalid Docker client configuration: %w; check DOCKER_HOST=%q",
			ErrEngineUnreachable, err, os.Getenv(client.EnvOverrideHost))
	}
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		host := cli.DaemonHost()
		_ = cli.Close()
		return nil, fmt.Errorf("%w at %s: %w; is dockerd running? (DOCKER_HOST=%q)",
			ErrEngineUnreachable, host, err, os.Getenv(client.EnvOverrideHost))
	}
	return cli, nil
}

// Options configures an Engine. The zero value is usable.
type Options struct {
	// StateHash is the state directory's identity, written to LabelState on everything created
	// and the scope of List and Reap. Default: sandbox.StateHash(sandbox.DefaultStateDir), relative to the
	// working directory when New is called.
	StateHash string
	// Logger receives build output and engine warnings at Debug/Warn. Default: discard.
	Logger *slog.Logger
	// LogLimit is how many bytes of each of stdout and stderr Logs keeps (the last ones).
	// Default: 4 MiB.
	LogLimit int
	// KeepVolume, if set, says which dead runs' workspace volumes Reap must keep: runs that
	// are not live but can still be resumed. Their containers are reaped all the same.
	// Default: none are kept. ReapAll ignores it.
	KeepVolume func(runID string) bool
}

// Engine creates and manages sandboxes of one state directory on one Docker engine.
// It is safe for concurrent use.
type Engine struct {
	api      API
	state    string
	log      *slog.Logger
	logLimit int
	keepVol  func(runID string) bool

	buildMu sync.Mutex // one image build at a time; a concurrent EnsureImage then finds the tag
}

// New returns an Engine over api (usually the *client.Client from Connect).
func New(api API, opts Options) *Engine {
	if opts.StateHash == "" {
		opts.StateHash = sandbox.StateHash(sandbox.DefaultStateDir)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.LogLimit <= 0 {
		opts.LogLimit = 4 << 20
	}
	return &Engine{api: api, state: opts.StateHash, log: opts.Logger, logLimit: opts.LogLimit, keepVol: opts.KeepVolume}
}

// StateHash returns the state identity this Engine labels and reaps.
func (e *Engine) StateHash() string { return e.state }

// wrap gives an engine error its operation and subject, and the sentinel callers branch on.
func wrap(op, subject string, err error) error {
	switch {
	case err == nil:
		return nil
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("%s %s: %w: %w", op, subject, errGone, err)
	case client.IsErrConnectionFailed(err):
		return fmt.Errorf("%s %s: %w: %w", op, subject, ErrEngineUnreachable, err)
	}
	return fmt.Errorf("%s %s: %w", op, subject, err)
}

// detached returns a context for cleanup that must finish even when ctx is cancelled.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}
