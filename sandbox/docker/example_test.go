package docker_test

import (
	"github.com/overnight-dev/overnight/sandbox/docker"

	"context"
	"fmt"
	"log"
	"net/http"
	"path/filepath"
	"time"

	"github.com/overnight-dev/overnight/sandbox"
)

func ExampleContainerName() {
	fmt.Println(docker.ContainerName("2026-05-07/deploy#3", 2))
	// Output: overnight-2026-05-07-deploy-3-2
}

// The whole life of one attempt: a gateway socket on the host, the image, a hardened sandbox
// that reaches the gateway through its init's relay, its exit code and its logs, and cleanup.
func ExampleEngine() {
	ctx := context.Background()
	cli, err := docker.Connect(ctx) // wraps docker.ErrEngineUnreachable when dockerd is down
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	e := docker.New(cli, docker.Options{StateHash: sandbox.StateHash(".overnight")})

	// Leftovers of runs that are no longer live in this state dir.
	if _, err := e.Reap(ctx, func(runID string) bool { return false }); err != nil {
		log.Print(err)
	}

	dir, cleanup, err := sandbox.NewSocketDir()
	if err != nil {
		log.Fatal(err)
	}
	defer cleanup()
	ln, err := sandbox.ListenSocket(filepath.Join(dir, sandbox.SocketName))
	if err != nil {
		log.Fatal(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, `{"run_id":"r1"}`) // the harness's gateway goes here
	}))

	img, err := e.EnsureImage(ctx, docker.ImageSpec{InitBinary: "./bin/overnight"})
	if err != nil {
		log.Fatal(err)
	}
	sb, err := e.Create(ctx, docker.ContainerSpec{
		RunID: "r1", Attempt: 1, Image: img,
		Cmd: []string{sandbox.InitPath, "agent", "deployer"},
		Env: map[string]string{
			"OVERNIGHT_URL":    sandbox.RelayURL,
			"OVERNIGHT_SOCKET": sandbox.GatewaySocket,
			"OVERNIGHT_TOKEN":  "per-attempt-token",
		},
		SocketDir: dir,
		Workspace: "overnight-ws-r1",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Remove(ctx, sb.ID)
	if err := e.Start(ctx, sb.ID); err != nil {
		log.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	code, err := e.Wait(waitCtx, sb.ID)
	if err != nil {
		_ = e.Stop(ctx, sb.ID, 10*time.Second)
	}
	stdout, stderr, _ := e.Logs(ctx, sb.ID)
	fmt.Printf("exit %d, %d bytes of stdout, %d of stderr\n", code, len(stdout), len(stderr))
}
