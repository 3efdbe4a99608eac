package harness_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/scenarios"
)

// Run the built-in deploy scenario with its agent SIGKILLed once step 3 is
// durable, then read what really happened from the run's history. It needs
// a Docker engine and the Go toolchain (to build the sandbox's init).
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "overnight-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "overnight")
	if err := harness.BuildInitBinary(ctx, bin); err != nil {
		fmt.Println(err)
		return
	}
	defer removeImage(ctx, bin)

	h, err := harness.Open(ctx, harness.Options{StateDir: filepath.Join(dir, "state"), InitBinary: bin})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	scen, err := harness.LoadScenario("deploy")
	if err != nil {
		fmt.Println(err)
		return
	}
	kill, _ := chaos.ParseSpec("kill@step:3")
	res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, Faults: []chaos.Spec{kill}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("verdict:", res.Verdict, "after", res.Attempts, "attempts")

	run, err := h.History().Load(ctx, res.RunID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("the world received", len(run.Ledger), "requests; the last checkpoint is step", run.LastCheckpoint().Step)
	for _, f := range run.Faults {
		fmt.Println(f.Spec, "met:", f.Met)
	}
	// Output:
	// verdict: pass after 2 attempts
	// the world received 5 requests; the last checkpoint is step 5
	// kill@step:3 met: true
}

// A scenario made of Go values is checked as a file is: here its task is
// one the cloud world cannot judge, and nothing runs.
func ExampleHarness_Check() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "overnight-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	h, err := harness.Open(ctx, harness.Options{StateDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	scen, err := scenarios.FromValue(map[string]any{
		"apiVersion": "overnight/v1", "kind": "Scenario", "name": "mine",
		"world": "cloud", "agent": map[string]any{"builtin": "deployer"},
		"task": map[string]any{"dns": "api.example.com"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(h.Check(scen))
	// Output:
	// go:mine:7:5: task.service.name: missing: the cloud world's deployment goal needs service.name (string: the service's name); the task's shape is {"network":"prod-net","database":"prod-db","migration":3,"service":{"name":"api","image":"registry.local/api:1.4.2"},"dns":"api.example.com"}
}

// removeImage removes the sandbox image the example's init binary made.
func removeImage(ctx context.Context, bin string) {
	api, err := docker.Connect(ctx)
	if err != nil {
		return
	}
	eng := docker.New(api, docker.Options{})
	if ref, err := eng.ImageRef(ctx, docker.ImageSpec{InitBinary: bin}); err == nil {
		_ = eng.RemoveImage(ctx, ref)
	}
}
