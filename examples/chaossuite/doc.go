// Package chaossuite is an example chaos test suite, for a team to copy:
// Ginkgo specs that run the built-in deployer agent through a kill, an API
// version change and random chaos over a few seeds (judged by pass^k), and
// a negative example that proves the checks catch a broken agent. It runs
// with plain `go test ./examples/...`; see README.md.
//
// Its code is all in its tests; this file only documents it.
package chaossuite
