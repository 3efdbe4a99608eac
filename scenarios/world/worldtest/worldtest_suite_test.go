package worldtest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
	"github.com/overnight-dev/overnight/scenarios/world/worldtest"
)

// helperEnv makes this test binary a command world instead of the tests:
// "durable" serves the cloud world with its state in a Badger store in
// $OVERNIGHT_WORLD_DATA, "memory" keeps it in memory whatever it is given
// (a world that loses what it answered when it is killed).
const helperEnv = "WORLDTEST_HELPER"

// helperLifetime bounds a helper world whose parent forgot it.
const helperLifetime = 2 * time.Minute

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(serveHelper(mode))
	}
	os.Exit(m.Run())
}

func serveHelper(mode string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, helperLifetime)
	defer cancel()
	var store world.Store = world.NewMemStore()
	if mode == "durable" {
		bs, err := remote.OpenBadgerStore(os.Getenv(worldtest.EnvWorldData), nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper world:", err)
			return 2
		}
		defer bs.Close()
		store = bs
	}
	srv, err := remote.NewServer(ctx, cloud.Definition(), store, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper world:", err)
		return 2
	}
	l, err := net.Listen("tcp", os.Getenv(worldtest.EnvWorldAddr))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper world:", err)
		return 2
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = hs.Close() }()
	fmt.Printf("serving world cloud on http://%s (%s)\n", l.Addr(), mode)
	if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "helper world:", err)
		return 2
	}
	return 0
}

func TestWorldtest(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Worldtest Suite")
}
