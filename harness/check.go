package harness

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/invariant"
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
	// exist, a trigger, argument or duration its kind refuses, a fault
	// that needs a capability the backend lacks or a sandbox network the
	// scenario does not give, a reach kind random cannot draw for that
	// reach. Default nil: not checked here; Run checks the schedule it
	// makes, and reports a bad fault as a fault error
	// (chaos.ErrUnknownFault, chaos.ErrUnsupported).
	Faults *chaos.Registry
	// Backend is the sandbox backend's type the faults are checked
	// against (its capabilities; no engine is reached). Default:
	// DefaultBackend().
	Backend sandbox.Type
	// Invariants the scenario may list (Options.Invariants of the harness
	// that will run it). Default: invariant.Default(), the built-ins.
	Invariants *invariant.Registry
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
	if opts.Backend.Name == "" {
		opts.Backend = DefaultBackend()
	}
	if opts.Invariants == nil {
		opts.Invariants = invariant.Default()
	}
	var errs scenarios.ErrorList
	if !scen.HasWorld() {
		// Only HTTP APIs: their credentials are checked when a run starts
		// (the harness's environment), their upstreams when called.
	} else if scen.World.Remote() {
		// A world over the protocol is checked when it answers: its name,
		// goal and API versions (see reachWorld), before the run is recorded.
	} else if def, ok := opts.Worlds.Definition(scen.World.Name); !ok {
		errs = append(errs, scen.ErrorAt("/world", "world: unknown world %q (worlds: %v; see `overnight worlds`)", scen.World.Name, opts.Worlds.Names()))
	} else if def.CheckTask != nil && scen.Goal == nil {
		// The world's task check is its goal's: a scenario whose goal is a
		// probe (goal:) is judged by the probe, whatever shape its task has.
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
		errs = append(errs, checkFaults(scen, opts.Faults, opts.Backend, opts.Worlds)...)
	}
	if scen.Report != nil && !opts.Backend.Has(sandbox.CapCopyOut) {
		errs = append(errs, scen.ErrorAt("/report", "report: the agent's report file is copied out of its sandbox, which needs the sandbox backend's %s capability, which the %s backend lacks (it has: %s)",
			sandbox.CapCopyOut, opts.Backend.Name, capabilityList(opts.Backend)))
	}
	errs = append(errs, checkInvariants(scen, opts.Invariants)...)
	return errs.Err()
}

// checkInvariants checks that every invariant the scenario lists is in
// the registry, each refusal at the place the file lists it.
func checkInvariants(scen *scenarios.Scenario, reg *invariant.Registry) scenarios.ErrorList {
	var errs scenarios.ErrorList
	known := "none"
	if names := reg.Names(); len(names) > 0 {
		known = invariant.Quoted(names)
	}
	var unlisted []string
	for _, name := range scen.Invariants {
		if _, ok := reg.Lookup(name); ok {
			continue
		}
		ptr := scen.InvariantPointer(name)
		if i, listed := strings.CutPrefix(ptr, "/invariants/"); listed {
			errs = append(errs, scen.ErrorAt(ptr, "invariants[%s]: unknown invariant %q (invariants: %s)", i, name, known))
		} else {
			unlisted = append(unlisted, name)
		}
	}
	if len(unlisted) > 0 {
		errs = append(errs, scen.ErrorAt("/invariants", "invariants: not registered: %s, which the scenario checks without listing (the defaults of a scenario that lists none, or names added in Go) (invariants: %s)",
			invariant.Quoted(unlisted), known))
	}
	return errs
}

// checkFaults checks the scenario's faults and the kinds of its draws
// against a fault registry.
func checkFaults(scen *scenarios.Scenario, reg *chaos.Registry, backend sandbox.Type, worlds *world.Registry) scenarios.ErrorList {
	var errs scenarios.ErrorList
	lacks := func(ptr, path string, k chaos.Kind) {
		for _, why := range lacking(scen, k, backend, worlds) {
			errs = append(errs, scen.ErrorAt(ptr, "%s: %s", path, why))
		}
	}
	for i, spec := range scen.Faults {
		ptr, path := fmt.Sprintf("/faults/%d", i), fmt.Sprintf("faults[%d]", i)
		if _, err := reg.Build(spec); err != nil {
			errs = append(errs, scen.ErrorAt(ptr, "%s: %v", path, err))
			continue
		}
		k, _ := reg.Lookup(spec.Kind)
		lacks(ptr, path, k)
		if k.MCP && len(scen.MCPServers()) > 0 {
			for _, why := range lacksMCPServer(scen, spec) {
				errs = append(errs, scen.ErrorAt(ptr, "%s: %s", path, why))
			}
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
			lacks(ptr, path, k)
		}
	}
	if scen.Reach != nil {
		reach := *scen.Reach
		reach.MCP = len(scen.MCPServers()) > 0
		for i, name := range reach.Kinds {
			if err := reg.CheckDrawable(name, reach); err != nil {
				errs = append(errs, scen.ErrorAt(fmt.Sprintf("/reach/kinds/%d", i), "reach.kinds[%d]: %v", i, err))
			}
		}
	}
	return errs
}

// lacking says what a fault of kind k needs that the scenario on backend
// does not offer: a capability of the backend's type, the sandbox network
// a link fault cuts, a world the harness starts (and can kill), or a world
// (built in, from worlds) that undergoes the event the fault fires. Empty:
// nothing.
func lacking(scen *scenarios.Scenario, k chaos.Kind, backend sandbox.Type, worlds *world.Registry) []string {
	var out []string
	if k.MCP && len(scen.MCPServers()) == 0 {
		out = append(out, fmt.Sprintf("%s acts on the scenario's MCP servers, and this scenario has no mcp: block (docs/mcp.md)", k.Name))
	}
	if k.WorldEvent != "" {
		if why := lacksEvent(scen, k, worlds); why != "" {
			out = append(out, why)
		}
	}
	if w := scen.World; k.StartedWorld && len(w.Command) == 0 && w.Image == "" {
		what := fmt.Sprintf("world %s is built into the harness", w.Name)
		if w.URL != "" {
			what = fmt.Sprintf("world at %s is reached by URL, and the harness cannot restart it", w.URL)
		}
		out = append(out, fmt.Sprintf("%s acts on a world the harness starts for the run, and this scenario's %s: give it world: {command: [...]} or {image: ..., port: N} (docs/worlds.md)", k.Name, what))
	}
	for _, need := range k.Needs {
		c := sandbox.Capability(need)
		if !backend.Has(c) {
			out = append(out, fmt.Sprintf("%s needs the sandbox backend's %s capability, which the %s backend lacks (it has: %s)", k.Name, need, backend.Name, capabilityList(backend)))
		}
		if c == sandbox.CapLink && scen.Sandbox.Network != "internal" {
			out = append(out, fmt.Sprintf("%s acts on the sandbox's network, and this scenario gives its sandbox none: add `sandbox: {network: internal}`", k.Name))
		}
	}
	return out
}

// lacksEvent says why the scenario's world cannot take the world event a
// fault of kind k fires ("": it can). A world over the protocol is
// checked as the run reaches it: its describe must declare the event
// (capability events).
func lacksEvent(scen *scenarios.Scenario, k chaos.Kind, worlds *world.Registry) string {
	w := scen.World
	switch {
	case !scen.HasWorld():
		return fmt.Sprintf("%s fires the world event %s, and this scenario has no world: (only HTTP APIs)", k.Name, k.WorldEvent)
	case w.Remote():
		return ""
	}
	d, ok := worlds.Definition(w.Name)
	if !ok {
		return "" // an unknown world is refused on its own
	}
	if world.HasEvent(d.Events, k.WorldEvent) {
		return ""
	}
	var takes []string
	for _, other := range worlds.Definitions() {
		if world.HasEvent(other.Events, k.WorldEvent) {
			takes = append(takes, other.Name)
		}
	}
	return fmt.Sprintf("%s fires the world event %s, which world %s does not undergo (the worlds that do: %s; see `overnight worlds`)", k.Name, k.WorldEvent, w.Name, strings.Join(takes, ", "))
}

func capabilityList(t sandbox.Type) string {
	if len(t.Capabilities) == 0 {
		return "none"
	}
	names := make([]string, len(t.Capabilities))
	for i, c := range t.Capabilities {
		names[i] = string(c)
	}
	return strings.Join(names, ", ")
}
