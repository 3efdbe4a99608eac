package docker

import (
	"github.com/overnight-dev/overnight/sandbox"

	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
)

// ImageRepo is the repository of every sandbox image; the tag is the inputs' content hash.
const ImageRepo = "overnight-sandbox"

// LabelImageHash records an image's full input hash.
const LabelImageHash = "overnight.image.hash"

// imageFormat is hashed with the inputs: change it whenever the image layout below changes, so
// an old image is never mistaken for a new one.
const imageFormat = "overnight-sandbox-image/v1"

// sandboxUID and sandboxGID own the writable directories of an image (nobody:nogroup).
const sandboxUID, sandboxGID = 65534, 65534

// ImageSpec says what goes into a sandbox image.
type ImageSpec struct {
	// InitBinary is required: a static linux/amd64 overnight binary, copied to InitPath.
	InitBinary string
	// AgentBinary is optional: a static linux/amd64 agent, copied to AgentPath and made the
	// image's default command.
	AgentBinary string
}

// ImageRef returns the reference EnsureImage gives (or gave) the image for spec, without
// building anything: to find, say, the image a test suite's binary made so as to remove it.
func (e *Engine) ImageRef(ctx context.Context, spec ImageSpec) (string, error) {
	in, err := e.inputs(ctx, spec)
	if err != nil {
		return "", err
	}
	return in.tag, nil
}

// imageInputs are what an image is built from, and the tag they hash to.
type imageInputs struct {
	bins     []imageFile
	tag, sum string
}

func (e *Engine) inputs(ctx context.Context, spec ImageSpec) (imageInputs, error) {
	if spec.InitBinary == "" {
		return imageInputs{}, fmt.Errorf("ensure image: %w: InitBinary is required (a static linux/amd64 overnight binary)", sandbox.ErrInvalidSpec)
	}
	// The bytes hashed are the bytes built from, so the tag always names what is inside.
	bins := []imageFile{{role: "init", src: spec.InitBinary, dst: sandbox.InitPath}}
	if spec.AgentBinary != "" {
		bins = append(bins, imageFile{role: "agent", src: spec.AgentBinary, dst: sandbox.AgentPath})
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", imageFormat)
	for i := range bins {
		if err := bins[i].load(); err != nil {
			return imageInputs{}, err
		}
		fmt.Fprintf(h, "%s %d\n", bins[i].role, len(bins[i].data))
		h.Write(bins[i].data)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	return imageInputs{bins: bins, tag: ImageRepo + ":" + sum[:12], sum: sum}, nil
}

// EnsureImage returns the reference of the sandbox image for spec, building it first unless the
// engine already has it. The image is FROM scratch with InitPath (and AgentPath), WorkspacePath
// and /tmp owned by 65534, USER 65534:65534, WORKDIR WorkspacePath, ENTRYPOINT
// ["/overnight","init","--"] and the label overnight.managed=true. Its tag,
// "overnight-sandbox:<hash12>", is a hash of the binaries' contents and the image layout, so the
// build happens once per distinct input. The image is also tagged for this Engine's state
// directory ("overnight-sandbox:<hash12>-<state12>", see StateTag): ReapImages removes only the
// images of its own state directory, and an image stays while another state directory's tag
// holds it.
func (e *Engine) EnsureImage(ctx context.Context, spec ImageSpec) (string, error) {
	in, err := e.inputs(ctx, spec)
	if err != nil {
		return "", err
	}
	tag, sum, bins := in.tag, in.sum, in.bins

	e.buildMu.Lock()
	defer e.buildMu.Unlock()
	if _, err := e.api.ImageInspect(ctx, tag); err != nil {
		if !cerrdefs.IsNotFound(err) {
			return "", wrap("ensure image: inspect", tag, err)
		}
		if err := e.build(ctx, spec, bins, tag, sum); err != nil {
			return "", err
		}
	}
	err = e.api.ImageTag(ctx, tag, e.StateTag(tag))
	if cerrdefs.IsNotFound(err) {
		// Another state directory's reap removed the unclaimed image
		// between its build (or inspect) and this claim: build it again.
		if err = e.build(ctx, spec, bins, tag, sum); err == nil {
			err = e.api.ImageTag(ctx, tag, e.StateTag(tag))
		}
	}
	if err != nil {
		return "", wrap("ensure image: tag it for state "+e.state[:min(12, len(e.state))], tag, err)
	}
	return tag, nil
}

// StateTag is the tag that marks image tag ("overnight-sandbox:<hash12>") as used by this
// Engine's state directory.
func (e *Engine) StateTag(tag string) string {
	return tag + "-" + e.state[:min(12, len(e.state))]
}

// build builds tag from an in-memory context and reads the build's output to its end.
func (e *Engine) build(ctx context.Context, spec ImageSpec, bins []imageFile, tag, sum string) error {
	started := time.Now()
	buildCtx, err := buildContext(bins)
	if err != nil {
		return err
	}
	resp, err := e.api.ImageBuild(ctx, buildCtx, build.ImageBuildOptions{
		Tags:        []string{tag},
		Dockerfile:  "Dockerfile",
		Remove:      true,
		ForceRemove: true,
		Labels:      map[string]string{sandbox.LabelManaged: "true", LabelImageHash: sum},
		Version:     build.BuilderV1, // what this engine (20.10, API 1.41) builds with
	})
	if err != nil {
		return wrap("build sandbox image", tag, err)
	}
	defer resp.Body.Close()
	if err := e.readBuildOutput(resp.Body); err != nil {
		return fmt.Errorf("build sandbox image %s from %s: %w", tag, spec.InitBinary, err)
	}
	// A build stream can end without an error line when the connection drops; trust the tag.
	if _, err := e.api.ImageInspect(ctx, tag); err != nil {
		return wrap("build sandbox image: the build ended but the tag is missing:", tag, err)
	}
	e.log.Debug("built sandbox image", "image", tag, "took", time.Since(started))
	return nil
}

// buildMessage is one line of the engine's JSON build stream.
type buildMessage struct {
	Stream      string `json:"stream"`
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// readBuildOutput consumes the build stream to its end and returns the first error it reports,
// with the last output lines for context.
func (e *Engine) readBuildOutput(r io.Reader) error {
	dec := json.NewDecoder(r)
	var tail []string
	for {
		var msg buildMessage
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read build output: %w", err)
		}
		if msg.Stream != "" {
			line := strings.TrimRight(msg.Stream, "\n")
			e.log.Debug("image build", "output", line)
			tail = append(tail, line)
			if len(tail) > 5 {
				tail = tail[1:]
			}
		}
		if msg.Error != "" || msg.ErrorDetail != nil {
			text := msg.Error
			if msg.ErrorDetail != nil && msg.ErrorDetail.Message != "" {
				text = msg.ErrorDetail.Message
			}
			// Drain, so the engine is not left writing to a closed connection mid-build.
			_, _ = io.Copy(io.Discard, r)
			return fmt.Errorf("engine reported: %s (last output: %q)", text, strings.Join(tail, " | "))
		}
	}
}

// imageFile is one executable that goes into an image.
type imageFile struct {
	role, src, dst string
	data           []byte
}

// load reads the binary and checks that it can run in a scratch image.
func (b *imageFile) load() error {
	data, err := os.ReadFile(b.src)
	if err != nil && b.role == "agent" {
		// The agent as given cannot run: the scenario's agent.binary.
		return fmt.Errorf("ensure image: read agent binary: %w: %w", sandbox.ErrInvalidSpec, err)
	}
	if err != nil {
		return fmt.Errorf("ensure image: read %s binary: %w", b.role, err)
	}
	if err := checkStaticELF(data); err != nil {
		return fmt.Errorf("ensure image: %s binary %s: %w", b.role, b.src, err)
	}
	b.data = data
	return nil
}

// checkStaticELF rejects what cannot run in a FROM-scratch image: anything but a statically
// linked x86-64 ELF executable.
func checkStaticELF(data []byte) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: not a linux executable (%v); build it with GOOS=linux GOARCH=amd64 CGO_ENABLED=0", sandbox.ErrInvalidSpec, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		return fmt.Errorf("%w: built for %s, the engine runs linux/amd64; build with GOARCH=amd64", sandbox.ErrInvalidSpec, f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%w: dynamically linked, but a scratch image has no libc; build it with CGO_ENABLED=0", sandbox.ErrInvalidSpec)
		}
	}
	return nil
}

// buildContext is the in-memory build context: a Dockerfile and rootfs.tar, whose entries carry
// their final owners and modes (ADD extracts a local tar as is; COPY would chown to root).
// Everything lands in one layer.
func buildContext(bins []imageFile) (io.Reader, error) {
	var rootfs bytes.Buffer
	tw := tar.NewWriter(&rootfs)
	for _, d := range []string{"workspace/", "run/", "run/overnight/", "tmp/"} {
		mode, uid, gid := int64(0o755), sandboxUID, sandboxGID
		switch d {
		case "tmp/":
			mode = 0o1777
		case "run/", "run/overnight/":
			uid, gid = 0, 0
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode, Uid: uid, Gid: gid, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, fmt.Errorf("ensure image: build context: %w", err)
		}
	}
	for _, b := range bins {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(b.dst, "/"), Mode: 0o755, Size: int64(len(b.data)), ModTime: time.Unix(0, 0)}); err != nil {
			return nil, fmt.Errorf("ensure image: build context: %w", err)
		}
		if _, err := tw.Write(b.data); err != nil {
			return nil, fmt.Errorf("ensure image: build context: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("ensure image: build context: %w", err)
	}

	var df strings.Builder
	fmt.Fprintf(&df, "FROM scratch\nADD rootfs.tar /\nUSER %d:%d\nWORKDIR %s\n", sandboxUID, sandboxGID, sandbox.WorkspacePath)
	fmt.Fprintf(&df, "ENTRYPOINT [%q, \"init\", \"--\"]\n", sandbox.InitPath)
	if len(bins) > 1 {
		fmt.Fprintf(&df, "CMD [%q]\n", sandbox.AgentPath)
	}

	var out bytes.Buffer
	tw = tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		data []byte
	}{{"Dockerfile", []byte(df.String())}, {"rootfs.tar", rootfs.Bytes()}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)}); err != nil {
			return nil, fmt.Errorf("ensure image: build context: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("ensure image: build context: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("ensure image: build context: %w", err)
	}
	return &out, nil
}

// RemoveImage removes the sandbox image ref (as EnsureImage returned it) and every image built
// from the same inputs (the same LabelImageHash: an earlier build that lost its tag to a rebuild,
// say), with every tag on them — each state directory's claim (StateTag) included — and their
// untagged parents. A missing image is not an error; an image still used by a container is
// (remove the container first).
func (e *Engine) RemoveImage(ctx context.Context, ref string) error {
	ctx, cancel := detached(ctx)
	defer cancel()
	hash, ok := strings.CutPrefix(ref, ImageRepo+":")
	if !ok || hash == "" || strings.Contains(hash, "-") {
		return fmt.Errorf("remove image %s: %w: not a sandbox image reference (%s:<hash>)", ref, sandbox.ErrInvalidSpec, ImageRepo)
	}
	list, err := e.api.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelManaged+"=true"))})
	if err != nil {
		return wrap("remove image: list", ref, err)
	}
	var errs []error
	remove := func(what string) {
		if _, err := e.api.ImageRemove(ctx, what, image.RemoveOptions{PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, wrap("remove image", what, err))
		}
	}
	for _, img := range list {
		if !strings.HasPrefix(img.Labels[LabelImageHash], hash) {
			continue
		}
		tagged := false
		for _, tag := range img.RepoTags {
			if tag != "<none>:<none>" {
				tagged = true
				remove(tag)
			}
		}
		if !tagged {
			remove(img.ID)
		}
	}
	return errors.Join(errs...)
}

// ReapImages removes this Engine's state directory's claim on the sandbox
// images no container uses (its StateTag), except the references in keep —
// typically the image of the running overnight binary — and then each
// image no other state directory claims, including images nobody claims
// (made by versions of overnight before claims existed). Every build of overnight makes an
// image of its own; this is how old ones go. With all, it removes every
// sandbox image (labelled overnight.managed=true) no container uses,
// whoever claims it. It returns the removed tags.
func (e *Engine) ReapImages(ctx context.Context, all bool, keep ...string) ([]string, error) {
	list, err := e.api.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelManaged+"=true"))})
	if err != nil {
		return nil, wrap("list sandbox images", "", err)
	}
	var removed []string
	var errs []error
	remove := func(tag string) bool {
		if _, err := e.api.ImageRemove(ctx, tag, image.RemoveOptions{PruneChildren: true}); err != nil {
			if !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
				errs = append(errs, wrap("remove image", tag, err))
			}
			return false
		}
		removed = append(removed, tag)
		return true
	}
	for _, img := range list {
		var bare, mine, others []string
		for _, tag := range img.RepoTags {
			rest, ok := strings.CutPrefix(tag, ImageRepo+":")
			switch {
			case !ok:
			case !strings.Contains(rest, "-"):
				bare = append(bare, tag)
			case strings.HasSuffix(tag, "-"+e.state[:min(12, len(e.state))]):
				mine = append(mine, tag)
			default:
				others = append(others, tag)
			}
		}
		if slices.ContainsFunc(img.RepoTags, func(t string) bool { return slices.Contains(keep, t) }) {
			continue
		}
		if !all && len(mine) == 0 && len(others) > 0 {
			continue // another state directory's, not this one's
		}
		// No claim at all: an image an earlier version of overnight made
		// (before claims existed), or one whose last claim went; anybody's.
		// An image a container (running or not) was made from stays, with
		// every claim on it.
		if inUse(ctx, e, img.ID) {
			continue
		}
		if !all && len(others) > 0 {
			for _, t := range mine {
				remove(t)
			}
			continue // another state directory still claims it
		}
		for _, t := range append(append(mine, others...), bare...) {
			remove(t)
		}
	}
	return removed, errors.Join(errs...)
}

// inUse reports whether any container, running or not, was created from
// image id (when in doubt: yes).
func inUse(ctx context.Context, e *Engine, id string) bool {
	cs, err := e.api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("ancestor", id))})
	return err != nil || len(cs) > 0
}
