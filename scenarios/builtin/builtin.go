// Package builtin holds the built-in scenarios, addressable by name
// (`overnight run deploy`). Each is an ordinary scenario file embedded in
// the binary; their agents are the example agents of scenarios/agents.
// Built-in scenarios declare no faults of their own — faults come from
// --fault or --chaos — but those whose faults are what the scenario is
// about: deploy-v2 (its API change at step 3), poison and logopt-rollback
// (a transient failure taken for success, then a kill); --fault still
// replaces them.
package builtin

import (
	"embed"
	"sort"
	"strings"
)

//go:embed *.yaml
var files embed.FS

// Lookup returns the bytes of the built-in scenario called name.
func Lookup(name string) ([]byte, bool) {
	if strings.ContainsAny(name, "/\\.") {
		return nil, false
	}
	b, err := files.ReadFile(name + ".yaml")
	if err != nil {
		return nil, false
	}
	return b, true
}

// Names lists the built-in scenarios, sorted.
func Names() []string {
	entries, _ := files.ReadDir(".")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}
