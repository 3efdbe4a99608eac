package docker

import (
	"github.com/overnight-dev/overnight/sandbox"

	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// fakeAPI answers the calls a unit test sets up; any other call panics through the nil API.
type fakeAPI struct {
	API
	create  func(*container.Config, *container.HostConfig, string) (container.CreateResponse, error)
	kill    func(id, signal string) error
	start   func(id string) error
	remove  func(id string) error
	list    func(container.ListOptions) ([]container.Summary, error)
	vlist   func(volume.ListOptions) (volume.ListResponse, error)
	vremove func(name string) error
	inspect func(ref string) (image.InspectResponse, error)
	build   func(io.Reader) (build.ImageBuildResponse, error)
	wait    func(id string) (<-chan container.WaitResponse, <-chan error)
	ilist   func(image.ListOptions) ([]image.Summary, error)
	nlist   func(network.ListOptions) ([]network.Summary, error)
	iremove func(ref string) error
}

// NetworkList: no networks, unless a test sets nlist.
func (f *fakeAPI) NetworkList(_ context.Context, o network.ListOptions) ([]network.Summary, error) {
	if f.nlist == nil {
		return nil, nil
	}
	return f.nlist(o)
}

func (f *fakeAPI) ImageList(_ context.Context, o image.ListOptions) ([]image.Summary, error) {
	return f.ilist(o)
}
func (f *fakeAPI) ImageRemove(_ context.Context, ref string, _ image.RemoveOptions) ([]image.DeleteResponse, error) {
	return nil, f.iremove(ref)
}

func (f *fakeAPI) ContainerCreate(_ context.Context, c *container.Config, h *container.HostConfig, _ *network.NetworkingConfig, _ *ocispec.Platform, name string) (container.CreateResponse, error) {
	return f.create(c, h, name)
}
func (f *fakeAPI) ContainerKill(_ context.Context, id, signal string) error {
	return f.kill(id, signal)
}
func (f *fakeAPI) ContainerStart(_ context.Context, id string, _ container.StartOptions) error {
	return f.start(id)
}
func (f *fakeAPI) ContainerRemove(_ context.Context, id string, _ container.RemoveOptions) error {
	return f.remove(id)
}
func (f *fakeAPI) ContainerList(_ context.Context, o container.ListOptions) ([]container.Summary, error) {
	return f.list(o)
}
func (f *fakeAPI) VolumeList(_ context.Context, o volume.ListOptions) (volume.ListResponse, error) {
	return f.vlist(o)
}
func (f *fakeAPI) VolumeRemove(_ context.Context, name string, _ bool) error { return f.vremove(name) }
func (f *fakeAPI) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (image.InspectResponse, error) {
	return f.inspect(ref)
}
func (f *fakeAPI) ImageBuild(_ context.Context, r io.Reader, _ build.ImageBuildOptions) (build.ImageBuildResponse, error) {
	return f.build(r)
}
func (f *fakeAPI) ContainerWait(_ context.Context, id string, _ container.WaitCondition) (<-chan container.WaitResponse, <-chan error) {
	return f.wait(id)
}

// staticELF writes the smallest file checkStaticELF accepts: an x86-64 executable header with
// one PT_LOAD segment and no interpreter.
func staticELF() string {
	var b bytes.Buffer
	hdr := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Entry: 0x400078, Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: 1,
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS], hdr.Ident[elf.EI_DATA], hdr.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	Expect(binary.Write(&b, binary.LittleEndian, hdr)).To(Succeed())
	prog := elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Vaddr: 0x400000, Paddr: 0x400000, Filesz: 0x80, Memsz: 0x80, Align: 0x1000}
	Expect(binary.Write(&b, binary.LittleEndian, prog)).To(Succeed())
	b.Write(make([]byte, 8))
	path := filepath.Join(GinkgoT().TempDir(), "static")
	Expect(os.WriteFile(path, b.Bytes(), 0o755)).To(Succeed())
	Expect(checkStaticELF(b.Bytes())).To(Succeed())
	return path
}

func notFound(what string) error { return fmt.Errorf("No such %s: %w", what, cerrdefs.ErrNotFound) }

var _ = Describe("engine errors (fake API)", func() {
	It("names the operation and the sandbox, and keeps the sentinel callers branch on", func(ctx SpecContext) {
		f := &fakeAPI{
			start: func(string) error { return notFound("container") },
			kill:  func(string, string) error { return fmt.Errorf("container is not running: %w", cerrdefs.ErrConflict) },
			wait: func(string) (<-chan container.WaitResponse, <-chan error) {
				errC := make(chan error, 1)
				errC <- notFound("container")
				return nil, errC
			},
		}
		e := New(f, Options{StateHash: "s"})
		err := e.Start(ctx, "abc123")
		Expect(err).To(MatchError(sandbox.ErrNotFound))
		Expect(err.Error()).To(HavePrefix("start sandbox abc123: not found on the Docker engine: No such container"))
		err = e.Kill(ctx, "abc123", "")
		Expect(err).To(MatchError(sandbox.ErrNotRunning))
		Expect(err.Error()).To(HavePrefix("kill sandbox abc123 with SIGKILL: "))
		_, err = e.Wait(ctx, "abc123")
		Expect(err).To(MatchError(sandbox.ErrNotFound))
	})

	It("treats a missing or already-vanishing container as removed, and wraps other failures", func(ctx SpecContext) {
		var next error
		e := New(&fakeAPI{remove: func(string) error { return next }}, Options{StateHash: "s"})
		next = notFound("container")
		Expect(e.Remove(ctx, "abc")).To(Succeed())
		next = fmt.Errorf("removal of container abc is already in progress: %w", cerrdefs.ErrConflict)
		Expect(e.Remove(ctx, "abc")).To(Succeed())
		next = errors.New("disk on fire")
		Expect(e.Remove(ctx, "abc")).To(MatchError("remove sandbox abc: disk on fire"))
	})

	It("builds the container from the spec alone: env from the map, ownership labels that cannot be overridden", func(ctx SpecContext) {
		var cfg *container.Config
		var host *container.HostConfig
		f := &fakeAPI{create: func(c *container.Config, h *container.HostConfig, name string) (container.CreateResponse, error) {
			cfg, host = c, h
			if name == ContainerName("taken", 1) {
				return container.CreateResponse{}, fmt.Errorf("Conflict. The container name is already in use: %w", cerrdefs.ErrConflict)
			}
			return container.CreateResponse{ID: "id-1"}, nil
		}}
		e := New(f, Options{StateHash: "state-1"})
		sb, err := e.Create(ctx, ContainerSpec{
			RunID: "run/1", Attempt: 2, Image: "img",
			Env:    map[string]string{"B": "2", "A": "1"},
			Labels: map[string]string{sandbox.LabelState: "forged", sandbox.LabelRun: "forged", "team": "x"},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(*sb).To(Equal(Container{ID: "id-1", Name: "overnight-run-1-2", RunID: "run/1", Attempt: 2}))
		Expect(cfg.Env).To(Equal([]string{"A=1", "B=2"}))
		Expect(cfg.Labels).To(Equal(map[string]string{
			sandbox.LabelManaged: "true", sandbox.LabelRun: "run/1", sandbox.LabelState: "state-1", sandbox.LabelAttempt: "2", "team": "x",
		}))
		Expect(host.Mounts).To(BeEmpty(), "no socket dir, no workspace: no mounts at all")
		Expect(host.Tmpfs["/tmp"]).To(Equal("rw,nosuid,nodev,size=67108864,mode=1777"))
		Expect(host.Tmpfs["/workspace"]).To(Equal("rw,nosuid,nodev,size=67108864,mode=755,uid=65534,gid=65534"))

		_, err = e.Create(ctx, ContainerSpec{RunID: "taken", Attempt: 1, Image: "img"})
		Expect(err).To(MatchError(sandbox.ErrNameInUse))
		_, err = e.Create(ctx, ContainerSpec{RunID: "r", Image: "img", Env: map[string]string{"A=B": "x"}})
		Expect(err).To(MatchError(sandbox.ErrInvalidSpec))
		_, err = e.Create(ctx, ContainerSpec{Image: "img"})
		Expect(err).To(MatchError(sandbox.ErrInvalidSpec))
	})

	It("surfaces an error the build stream reports, and checks the image before building", func(ctx SpecContext) {
		bin := staticELF()
		builds := 0
		f := &fakeAPI{
			inspect: func(string) (image.InspectResponse, error) { return image.InspectResponse{}, notFound("image") },
			build: func(r io.Reader) (build.ImageBuildResponse, error) {
				builds++
				_, _ = io.Copy(io.Discard, r)
				stream := `{"stream":"Step 1/4 : FROM scratch\n"}` + "\n" +
					`{"stream":"Step 2/4 : ADD rootfs.tar /\n"}` + "\n" +
					`{"errorDetail":{"message":"no space left on device"},"error":"no space left on device"}` + "\n"
				return build.ImageBuildResponse{Body: io.NopCloser(strings.NewReader(stream))}, nil
			},
		}
		e := New(f, Options{StateHash: "s"})
		_, err := e.EnsureImage(ctx, ImageSpec{InitBinary: bin})
		Expect(err).To(MatchError(ContainSubstring("engine reported: no space left on device")))
		Expect(err.Error()).To(ContainSubstring("Step 2/4 : ADD rootfs.tar /"))
		Expect(builds).To(Equal(1))
	})

	It("reaps what it can and reports every failure, joined", func(ctx SpecContext) {
		f := &fakeAPI{
			list: func(container.ListOptions) ([]container.Summary, error) {
				return []container.Summary{
					{ID: "a", Labels: map[string]string{sandbox.LabelRun: "dead"}},
					{ID: "b", Labels: map[string]string{sandbox.LabelRun: "dead"}},
					{ID: "c", Labels: map[string]string{sandbox.LabelRun: "live"}},
				}, nil
			},
			remove: func(id string) error {
				if id == "a" {
					return errors.New("device busy")
				}
				return nil
			},
			vlist: func(volume.ListOptions) (volume.ListResponse, error) {
				return volume.ListResponse{Volumes: []*volume.Volume{
					{Name: "ws-dead", Labels: map[string]string{sandbox.LabelRun: "dead"}},
					{Name: "shared", Labels: map[string]string{}},
				}}, nil
			},
			vremove: func(name string) error {
				Expect(name).To(Equal("ws-dead"), "only a dead run's volume is reaped")
				return fmt.Errorf("volume is in use: %w", cerrdefs.ErrConflict)
			},
		}
		removed, err := New(f, Options{StateHash: "s"}).Reap(ctx, func(run string) bool { return run == "live" })
		Expect(removed).To(Equal([]string{"b"}))
		Expect(err).To(MatchError(ContainSubstring("remove sandbox a: device busy")))
		Expect(err).To(MatchError(ContainSubstring("remove volume ws-dead: volume is in use")))
	})

	It("keeps the tail of a stream", func() {
		t := &tailBuffer{max: 4}
		for _, s := range []string{"ab", "cd", "ef", "g"} {
			_, _ = t.Write([]byte(s))
		}
		Expect(string(t.Bytes())).To(Equal("defg"))
		_, _ = t.Write([]byte("0123456789"))
		Expect(string(t.Bytes())).To(Equal("6789"))
	})
})

var _ = Describe("ReapImages (unit, fake API)", func() {
	images := func() []image.Summary {
		r := func(t ...string) []string {
			for i := range t {
				t[i] = ImageRepo + ":" + t[i]
			}
			return t
		}
		return []image.Summary{
			{ID: "old", RepoTags: r("old", "old-s")},
			{ID: "kept", RepoTags: r("kept", "kept-s")},
			{ID: "busy", RepoTags: r("busy", "busy-s")},
			{ID: "shared", RepoTags: r("shared", "shared-s", "shared-t")},
			{ID: "theirs", RepoTags: r("theirs", "theirs-t")},
			{ID: "legacy", RepoTags: r("legacy")},
			{ID: "other", RepoTags: []string{"someone-else:1"}},
		}
	}
	reap := func(ctx context.Context, all bool) (got, removed []string) {
		f := &fakeAPI{
			ilist: func(o image.ListOptions) ([]image.Summary, error) {
				Expect(o.Filters.Get("label")).To(ConsistOf(sandbox.LabelManaged + "=true"))
				return images(), nil
			},
			list: func(o container.ListOptions) ([]container.Summary, error) {
				Expect(o.All).To(BeTrue(), "a stopped container holds its image too")
				if o.Filters.Get("ancestor")[0] == "busy" {
					return []container.Summary{{ID: "c"}}, nil
				}
				return nil, nil
			},
			iremove: func(ref string) error { removed = append(removed, ref); return nil },
		}
		got, err := New(f, Options{StateHash: "s"}).ReapImages(ctx, all, ImageRepo+":kept")
		Expect(err).NotTo(HaveOccurred())
		return got, removed
	}

	It("removes its own state's claims on unused images, and an image once nobody claims it", func(ctx SpecContext) {
		got, removed := reap(ctx, false)
		Expect(got).To(Equal([]string{ImageRepo + ":old-s", ImageRepo + ":old", ImageRepo + ":shared-s", ImageRepo + ":legacy"}))
		Expect(removed).To(Equal(got), "theirs (claimed by another state), busy (in use) and kept stay; legacy (claimed by nobody) goes")
	})

	It("with all, removes every unused sandbox image whoever claims it", func(ctx SpecContext) {
		got, _ := reap(ctx, true)
		Expect(got).To(ConsistOf(
			ImageRepo+":old-s", ImageRepo+":old",
			ImageRepo+":shared-s", ImageRepo+":shared-t", ImageRepo+":shared",
			ImageRepo+":theirs-t", ImageRepo+":theirs",
			ImageRepo+":legacy"))
	})
})
