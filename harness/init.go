package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// InitPackage is the package of the slim sandbox binary, overnight-sandbox:
// the sandbox's PID 1, whose `agent NAME` subcommands are the built-in
// agents. The full overnight CLI (cmd/overnight) serves the same
// subcommands and may be injected instead.
const InitPackage = "github.com/overnight-dev/overnight/cmd/overnight-sandbox"

// SandboxBinaryName is the slim sandbox binary's file name, looked for
// beside the overnight CLI (`make build` puts both in bin/).
const SandboxBinaryName = "overnight-sandbox"

// BuildInitBinary builds the static linux/amd64 sandbox binary
// (overnight-sandbox, InitPackage) that every sandbox runs as PID 1
// (Options.InitBinary) at out, with the Go toolchain, from the overnight
// module this program was built against. The overnight CLI needs none (it
// injects the overnight-sandbox built beside it, else its own executable);
// a Go program or test that drives runs through this package calls this
// once. ldflags are passed to the linker (e.g. "-X main.version=1.2").
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

// InitBinaryBeside chooses the binary to inject for the executable exe
// whose build id is buildID: the overnight-sandbox beside exe when it
// answers `--build-id` with the same non-empty id (the two were built
// together), else exe itself. why says which and why, for a debug line.
// A stale sibling — built from other sources, or by hand without an id —
// is never injected: the agents it serves could differ from the ones this
// harness validates scenarios against. The sibling is asked once per
// process and answer.
func InitBinaryBeside(exe, buildID string) (bin, why string) {
	sibling := filepath.Join(filepath.Dir(exe), SandboxBinaryName)
	if _, err := os.Stat(sibling); err != nil {
		return exe, "no " + SandboxBinaryName + " beside " + exe + ": injecting the executable itself"
	}
	if buildID == "" {
		return exe, "this executable has no build id (built without make), so " + sibling + " cannot be shown to be its build-mate: injecting the executable itself"
	}
	got, err := siblingBuildID(sibling)
	switch {
	case err != nil:
		return exe, fmt.Sprintf("%s --build-id failed (%v): injecting the executable itself", sibling, err)
	case got != buildID:
		return exe, fmt.Sprintf("%s has build id %q, this executable %q (a stale sibling): injecting the executable itself", sibling, got, buildID)
	}
	return sibling, sibling + " was built with this executable (build id " + buildID + ")"
}

// siblingIDs caches each sibling's answer for the process's life.
var siblingIDs sync.Map // path → func() (string, error)

// siblingBuildID asks the binary at path for its build id, once per
// process.
func siblingBuildID(path string) (string, error) {
	f, _ := siblingIDs.LoadOrStore(path, sync.OnceValues(func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, path, "--build-id").Output()
		return strings.TrimSpace(string(out)), err
	}))
	return f.(func() (string, error))()
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
