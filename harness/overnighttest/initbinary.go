package overnighttest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/sandbox/docker"
)

// EnvInitBinary names the environment variable that gives an overnight
// binary built beforehand (`go build -o bin/overnight
// github.com/overnight-dev/overnight/cmd/overnight` with CGO_ENABLED=0),
// the same variable the overnight CLI reads.
const EnvInitBinary = "OVERNIGHT_INIT_BINARY"

// ErrNoInitBinary is returned by Run and RunTrials when no overnight
// binary was given for the sandboxes.
var ErrNoInitBinary = errors.New("no overnight binary for the sandboxes' init")

// TB is what BuildInitBinary needs of a test: *testing.T, *testing.B and
// GinkgoT() all have it.
type TB interface {
	Helper()
	TempDir() string
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// built is the binary BuildInitBinary made last, Run's default.
var built struct {
	sync.Mutex
	path string
}

// BuildInitBinary builds the static sandbox binary the sandboxes run as
// PID 1 (overnight-sandbox, harness.BuildInitBinary's) into tb.TempDir() (with the Go toolchain, from the overnight
// module this test is built against), makes it the default of Run and
// RunTrials in this process, and returns its path. When tb's cleanup runs
// — after the suite, called in Ginkgo's BeforeSuite — the sandbox image
// made from it is removed with it; each build is a binary (and an image)
// of its own, which no other suite shares or removes. With
// $OVERNIGHT_INIT_BINARY set, it builds nothing and returns that.
//
// A build takes a few seconds with a warm build cache; call it once per
// suite, not per spec.
func BuildInitBinary(ctx context.Context, tb TB) string {
	tb.Helper()
	if p := os.Getenv(EnvInitBinary); p != "" {
		return p
	}
	bin := filepath.Join(tb.TempDir(), harness.SandboxBinaryName)
	nonce := fmt.Sprintf("overnighttest-%d-%d", os.Getpid(), time.Now().UnixNano())
	if err := harness.BuildInitBinary(ctx, bin, "-X main.buildNonce="+nonce); err != nil {
		tb.Fatalf("overnighttest: %v", err)
		return ""
	}
	built.Lock()
	built.path = bin
	built.Unlock()
	tb.Cleanup(func() {
		built.Lock()
		if built.path == bin {
			built.path = ""
		}
		built.Unlock()
		if err := removeImage(bin); err != nil {
			tb.Errorf("overnighttest: remove the sandbox image of %s: %v", bin, err)
		}
	})
	return bin
}

// removeImage removes the sandbox image made from the init binary bin.
func removeImage(bin string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	api, err := docker.Connect(ctx)
	if err != nil {
		return err
	}
	defer api.Close()
	eng := docker.New(api, docker.Options{})
	ref, err := eng.ImageRef(ctx, docker.ImageSpec{InitBinary: bin})
	if err != nil {
		return err
	}
	return eng.RemoveImage(ctx, ref)
}

// initBinaryPath is the binary a run injects: the InitBinary option, else
// BuildInitBinary's, else $OVERNIGHT_INIT_BINARY.
func (c *config) initBinaryPath() (string, error) {
	bin := c.initBinary
	if bin == "" {
		built.Lock()
		bin = built.path
		built.Unlock()
	}
	if bin == "" {
		bin = os.Getenv(EnvInitBinary)
	}
	if bin == "" {
		return "", fmt.Errorf("%w: under go test the running executable is the test binary, which cannot serve; call overnighttest.BuildInitBinary(ctx, GinkgoT()) in BeforeSuite (or TestMain), pass InitBinary(path), or set %s", ErrNoInitBinary, EnvInitBinary)
	}
	if fi, err := os.Stat(bin); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is not a file (%v); build one with overnighttest.BuildInitBinary", ErrNoInitBinary, bin, err)
	}
	return bin, nil
}
