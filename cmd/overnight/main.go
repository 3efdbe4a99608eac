// Command overnight runs long-lived AI agents inside Docker sandboxes,
// injects faults, and judges what really happened. See README.md.
//
// Exit codes of every command: 0 pass, 1 fail, 2 unknown, 3 error (bad
// input, Docker unreachable, a locked or damaged state dir, Ctrl-C).
package main

import (
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// buildNonce is set by test suites (-X main.buildNonce=...) so that each
// builds a binary, and so a sandbox image, of its own.
var buildNonce string

func main() {
	os.Exit(execute(os.Args[1:]))
}
