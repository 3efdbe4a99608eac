package harnesstest

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// WorldImage builds tag, an image world made without a registry: FROM
// scratch around the static overnight binary at bin, whose entrypoint is
// `overnight world serve NAME --addr 0.0.0.0:PORT --allow-remote` (its
// state in $OVERNIGHT_WORLD_DATA, which the harness mounts). The caller
// removes it (RemoveImage) when done.
func WorldImage(ctx context.Context, api client.ImageAPIClient, bin, tag, name string, port int) error {
	return BinaryImage(ctx, api, bin, tag, port, "world", "serve", name, "--addr", fmt.Sprintf("0.0.0.0:%d", port), "--allow-remote")
}

// BinaryImage builds tag without a registry: FROM scratch around the static
// binary at bin, copied to /<its base name>, which is the entrypoint with
// args; port is exposed. The caller removes it (RemoveImage) when done.
func BinaryImage(ctx context.Context, api client.ImageAPIClient, bin, tag string, port int, args ...string) error {
	data, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("image %s: %w", tag, err)
	}
	base := filepath.Base(bin)
	entry, _ := json.Marshal(append([]string{"/" + base}, args...))
	dockerfile := fmt.Sprintf("FROM scratch\nCOPY %s /%s\nEXPOSE %d\nENTRYPOINT %s\n", base, base, port, entry)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, []byte(dockerfile)}, {base, 0o755, data}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data))}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	resp, err := api.ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true, Version: build.BuilderV1})
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("build image %s: read its output: %w", tag, err)
	}
	if bytes.Contains(out, []byte(`"error"`)) {
		return fmt.Errorf("build image %s: %s", tag, strings.TrimSpace(string(out)))
	}
	if _, err := api.ImageInspect(ctx, tag); err != nil {
		return errors.Join(fmt.Errorf("build image %s: the build ended without the tag", tag), err)
	}
	return nil
}

// RemoveImage removes tag (and its untagged layers), whether or not it is
// there.
func RemoveImage(ctx context.Context, api client.ImageAPIClient, tag string) error {
	_, err := api.ImageRemove(ctx, tag, image.RemoveOptions{Force: true, PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	return nil
}
