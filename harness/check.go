package harness

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// CheckOptions say what CheckScenario checks a scenario against.
type CheckOptions struct {
	// Worlds the scenario may name. Default: DefaultWorlds().
	Worlds *world.Registry
	// BuiltinAgents are the built-in agents the init binary serves
	// (agents.Names() for the overnight binary). Default nil: not checked.
	BuiltinAgents []string
	// Faults, when set, also checks the scenario's own faults, the kinds
	// of its draws and of its reach (those --chaos random draws) against
	// this registry, each at its place in the file: a kind that does not
	// exist, a trigger, argument or duration its kind refuses, a network
	// fault without a sandbox network, a reach kind random cannot draw for
	// that reach. Default nil: not
	// checked here; Run checks the schedule it makes, and reports a bad
	// fault as a fault error (chaos.ErrUnknownFault, chaos.ErrUnsupported).
	Faults *chaos.Registry
}

// CheckScenario validates a parsed scenario against what a harness offers
// — see (*Harness).Check — without one: it opens no state dir and reaches
// no Docker engine, so `overnight validate` can use it anywhere. Every
// problem is reported together, each at its file:line:column.
func CheckScenario(scen *scenarios.Scenario, opts CheckOptions) error {
	if scen == nil {
		return errors.New("no scenario")
	}
	if opts.Worlds == nil {
		opts.Worlds = DefaultWorlds()
	}
	var errs scenarios.ErrorList
	if def, ok := opts.Worlds.Definition(scen.World.Name); !ok {
		errs = append(errs, scen.ErrorAt("/world", "world: unknown world %q (worlds: %v; see `overnight worlds`)", scen.World.Name, opts.Worlds.Names()))
	} else if def.CheckTask != nil {
		for _, p := range def.CheckTask(scen.World.Options, scen.TaskJSON()) {
			errs = append(errs, scen.ErrorAt("/task"+p.Pointer, "task%s: %s", dotted(p.Pointer), p.Message))
		}
	}
	if known := opts.BuiltinAgents; known != nil {
		for name, a := range scen.AgentsByPointer() {
			if a.Builtin != "" && !slices.Contains(known, a.Builtin) {
				errs = append(errs, scen.ErrorAt(name+"/builtin", "%s.builtin: no built-in agent %q (built-in agents: %v)", dotted(name)[1:], a.Builtin, known))
			}
		}
	}
	if opts.Faults != nil {
		errs = append(errs, checkFaults(scen, opts.Faults)...)
	}
	return errs.Err()
}

// checkFaults checks the scenario's faults and the kinds of its draws
// against a fault registry.
func checkFaults(scen *scenarios.Scenario, reg *chaos.Registry) scenarios.ErrorList {
	var errs scenarios.ErrorList
	noNetwork := func(ptr, path, kind string) {
		errs = append(errs, scen.ErrorAt(ptr, "%s: %s acts on the sandbox's network, and this scenario gives its sandbox none: add `sandbox: {network: internal}`", path, kind))
	}
	for i, spec := range scen.Faults {
		ptr, path := fmt.Sprintf("/faults/%d", i), fmt.Sprintf("faults[%d]", i)
		if _, err := reg.Build(spec); err != nil {
			errs = append(errs, scen.ErrorAt(ptr, "%s: %v", path, err))
			continue
		}
		if k, _ := reg.Lookup(spec.Kind); k.NeedsNetwork && scen.Sandbox.Network != "internal" {
			noNetwork(ptr, path, spec.Kind)
		}
	}
	for i, d := range scen.Draws {
		for j, text := range d.Kinds {
			ptr, path := fmt.Sprintf("/draws/%d/kinds/%d", i, j), fmt.Sprintf("draws[%d].kinds[%d]", i, j)
			kind, _, _ := strings.Cut(text, ":")
			k, ok := reg.Lookup(kind)
			if !ok {
				names := []string{}
				for _, k := range reg.Kinds() {
					names = append(names, k.Name)
				}
				errs = append(errs, scen.ErrorAt(ptr, "%s: %v %q (known kinds: %s; see `overnight faults`)", path, chaos.ErrUnknownFault, kind, strings.Join(names, ", ")))
				continue
			}
			if k.NeedsNetwork && scen.Sandbox.Network != "internal" {
				noNetwork(ptr, path, kind)
			}
		}
	}
	if scen.Reach != nil {
		for i, name := range scen.Reach.Kinds {
			if err := reg.CheckDrawable(name, *scen.Reach); err != nil {
				errs = append(errs, scen.ErrorAt(fmt.Sprintf("/reach/kinds/%d", i), "reach.kinds[%d]: %v", i, err))
			}
		}
	}
	return errs
}
