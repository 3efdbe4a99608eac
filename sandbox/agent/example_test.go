package agent_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/overnight-dev/overnight/sandbox/agent"
)

// Example shows the shape of a well-behaved agent: resume from the last
// checkpoint, act under step-derived keys, checkpoint after each step, and
// report done. Inside a sandbox, agent.FromEnv() finds the gateway; here a
// stand-in gateway on a temporary socket plays its part.
func Example() {
	sock, stop := exampleGateway()
	defer stop()
	ctx := context.Background()

	c, err := agent.New(agent.Options{Socket: sock, Token: "tok"}) // in a sandbox: agent.FromEnv()
	if err != nil {
		panic(err)
	}
	cp, err := c.Resume(ctx)
	if err != nil {
		panic(err)
	}
	for step := cp.Step + 1; step <= 2; step++ {
		fmt.Println("effect key:", c.NextKey())
		res, err := c.Effect(ctx, "cloud.create_network", map[string]string{"name": fmt.Sprintf("net-%d", step)})
		if err != nil || res.Status != "done" {
			panic(fmt.Sprint(err, res.Error))
		}
		seq, err := c.Checkpoint(ctx, step, map[string]int{"done": step})
		if err != nil {
			panic(err)
		}
		fmt.Println("checkpoint seq:", seq)
	}
	// Output:
	// effect key: step-1/0
	// checkpoint seq: 1
	// effect key: step-2/0
	// checkpoint seq: 2
}

func exampleGateway() (string, func()) {
	dir, err := os.MkdirTemp("", "ovn-example-")
	if err != nil {
		panic(err)
	}
	sock := filepath.Join(dir, "gateway.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: &standIn{}}
	go func() { _ = srv.Serve(l) }()
	return sock, func() { _ = srv.Close(); _ = os.RemoveAll(dir) }
}
