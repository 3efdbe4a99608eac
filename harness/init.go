package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"
)

// InitPackage is the package of the overnight binary: the sandbox's PID 1,
// whose subcommands are the built-in agents.
const InitPackage = "github.com/overnight-dev/overnight/cmd/overnight"

// BuildInitBinary builds the static linux/amd64 overnight binary that
// every sandbox runs as PID 1 (Options.InitBinary) at out, with the Go
// toolchain, from the overnight module this program was built against.
// The overnight CLI needs none (it injects its own executable); a Go
// program or test that drives runs through this package calls this once.
// ldflags are passed to the linker (e.g. "-X main.version=1.2").
func BuildInitBinary(ctx context.Context, out string, ldflags ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	args := []string{"build", "-trimpath", "-o", abs}
	for _, f := range ldflags {
		args = append(args, "-ldflags", f)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, InitPackage)...)
	// From this module's own source when it is on disk (a checkout, or the
	// module cache), else from the working directory's module, which then
	// requires this one.
	if dir := moduleDir(); dir != "" {
		cmd.Dir = dir
	}
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the init binary (go build %s): %w\n%s", InitPackage, err, bytes.TrimSpace(b))
	}
	return nil
}

// moduleDir is the root of this module's source, when it is on disk.
func moduleDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "" // built with -trimpath: no source path
	}
	dir := filepath.Dir(filepath.Dir(file))
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return ""
	}
	return dir
}
