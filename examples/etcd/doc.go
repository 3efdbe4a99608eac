// Package etcd is the example of an agent calling a real HTTP API through
// the gateway's pass-through: scenario.yaml declares etcd's JSON gateway
// as the HTTP API "etcd" (routes, a lookup, the credential from the
// harness's environment, a goal probing etcd itself), and ./agent writes
// keys into it with Go's net/http client alone. See README.md and
// docs/http-apis.md.
//
// The harness's own specs run this scenario and agent against a real etcd
// (harness/http_e2e_test.go); this file only documents it.
package etcd
