// Command overnight runs long-lived AI agents inside Docker sandboxes,
// injects faults, and judges what really happened. See README.md.
//
// Exit codes of every command: 0 pass, 1 fail, 2 unknown, 3 error (bad
// input, Docker unreachable, a locked or damaged state dir, Ctrl-C). With
// --output json, an error is also one JSON object on stdout,
// {"error": {"code", "message", "file", "line", "column"}} (errjson.go
// lists the codes); the message stays on stderr.
package main

import (
	"os"
	"runtime"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// buildID is set by the Makefile (-X main.buildID=...) to the same value
// in this binary and the overnight-sandbox built beside it, which is then
// the binary injected into sandboxes (harness.InitBinaryBeside).
var buildID string

// buildNonce is set by test suites (-X main.buildNonce=...) so that each
// builds a binary, and so a sandbox image, of its own.
var buildNonce string

func main() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(defaultProcs)
	}
	os.Exit(execute(os.Args[1:]))
}

// defaultProcs is the binary's GOMAXPROCS unless $GOMAXPROCS says
// otherwise. The harness's work is a chain of hand-offs between goroutines
// — the gateway's connection, the provider's HTTP transport, the journal's
// sync — not computation: with one P they switch on one thread, with more
// each hand-off may wake another thread (on the 2-vCPU reference machine,
// about 0.15 ms per LLM call through the gateway). One P measured faster
// for every latency in BENCHMARKS.md and no slower elsewhere, and it leaves
// the other cores to the agents under test.
const defaultProcs = 1
