// Package sandbox is the contract between overnight's harness and the
// infrastructure its agents run on. A Backend prepares what an agent runs
// from, starts sandboxes from a Spec, hands back a Sandbox to wait on,
// signal, read logs from, copy a file out of and remove, releases what a
// run kept across its attempts, and reaps the leftovers of dead runs by
// their labels. Optional capabilities — freeze and thaw, cut and restore
// the network link, exec, service containers — are interfaces a Sandbox
// or a Backend implements besides; fault kinds name the capabilities they
// need, and a backend's Type lists the ones it has, so a scenario is
// checked against a backend before anything starts (no engine needed).
//
// The harness calls only this package; the Docker backend lives in
// sandbox/docker, and sandbox/sandboxtest is the conformance kit every
// backend must pass. This package also owns what every backend shares:
// the paths inside a sandbox, the ownership labels, the gateway's socket
// directory, the security defaults a Spec asks for, and the sentinel errors
// callers branch on.
//
// It must not know about runs beyond their id and attempt number, and must
// not serve the gateway (that is the harness's).
package sandbox
