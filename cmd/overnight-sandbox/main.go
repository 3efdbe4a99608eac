// Command overnight-sandbox is the sandbox side of overnight alone: the
// binary the harness injects into every sandbox as PID 1 (`init`), the
// network-namespace holder's PID 1 (`pause`), the conformance kit's
// `probe` and the built-in agents (`agent NAME`), with the same argv and
// behaviour as those subcommands of the full `overnight` binary (both
// dispatch through cmd/internal/sandboxcmd).
//
// Why a second binary: Go runs the init() of every linked package before
// main, and a sandbox starts a Go process twice on the way to a resumed
// agent (the init waking, then the agent it execs). The full CLI links
// ~270 packages (the harness, Docker's client, Badger, the scenario schema
// compiler) and spends ~30 ms in package init; this one links only what
// runs in a sandbox. See BENCHMARKS.md, "Standby sandboxes (issue 21)".
//
// `overnight-sandbox --build-id` prints the id the Makefile linked into it
// (-X main.buildID=...): the overnight CLI injects this binary only when it
// sits beside it and answers the CLI's own id, so a stale one built from
// other sources is never used.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/overnight-dev/overnight/cmd/internal/sandboxcmd"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// buildID is set by the Makefile (-X main.buildID=...) to the same value
// in this binary and the overnight CLI built with it.
var buildID string

// buildNonce is set by test suites (-X main.buildNonce=...) so that each
// builds a binary, and so a sandbox image, of its own.
var buildNonce string

func main() {
	// One P, as the full binary runs its init and agents with (its
	// defaultProcs), so an agent behaves the same under either.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if code, ok := sandboxcmd.Run(args, os.Stdout, os.Stderr); ok {
		return code
	}
	if len(args) == 1 {
		switch args[0] {
		case "--build-id":
			fmt.Println(buildID)
			return 0
		case "--version":
			v := version
			if buildNonce != "" {
				v += " (test build " + buildNonce + ")"
			}
			fmt.Println("overnight-sandbox version " + v)
			return 0
		}
	}
	fmt.Fprintf(os.Stderr, "overnight-sandbox: the sandbox side of overnight; usage: overnight-sandbox %s ARGS... (or --build-id, --version); the harness runs it, see `overnight --help`\n",
		strings.Join(sandboxcmd.Commands, "|"))
	return sandboxcmd.ExitError
}
