package httpworld

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// Where a run's worlds keep what they write, under the run's world prefix:
// the scenario's world: at the prefix itself (as in a run of it alone), the
// journal of each HTTP API's answers at "~http/<name>/", the journal of
// each MCP server's at "~mcp/<name>/", and the arrival order of all their
// ledgers at "~order/". A model's keys never begin with "~".
const (
	apiSpace   = "~http/"
	mcpSpace   = "~mcp/"
	orderSpace = "~order/"
)

// MCPPrefix is where the journal of MCP server name's answers lives under
// a run's world prefix.
func MCPPrefix(prefix []byte, name string) []byte {
	return append(bytes.Clone(prefix), mcpSpace+name+"/"...)
}

// OpenMCP opens the world of an MCP server in store under prefix
// (mcpworld.Open, or mcpworld.OpenJournal for a view of what was
// journaled).
type OpenMCP func(s scenarios.MCPServer, store world.Store, prefix []byte) (world.World, error)

// APIPrefix is where the journal of HTTP API api's answers lives under a
// run's world prefix.
func APIPrefix(prefix []byte, api string) []byte {
	return append(bytes.Clone(prefix), apiSpace+api+"/"...)
}

// OpenBase opens a scenario's world: in store under prefix.
type OpenBase func(store world.Store, prefix []byte) (world.World, error)

// OpenAPI opens the world of an HTTP API in store under prefix (Open, or
// OpenJournal for a view of what was journaled).
type OpenAPI func(api scenarios.HTTPAPI, store world.Store, prefix []byte) (*World, error)

// Assemble builds the world of a run of scen, which declares http: APIs
// or mcp: servers (each MCP server's world opened by mcp, serving
// mcp.<name>.*, beside the APIs),
// in store under the run's world prefix — the APIs' journals written
// through apiStore (nil: store), the same keys written another way (see
// harness/history's AnswersStore) —: a world.Router of the scenario's
// world: (opened by base, unprefixed: it serves every kind no API claims)
// and each API's world (opened by api, serving http.<name>.*), one ledger
// in arrival order, and the scenario's goal: — if it declares one —
// judging goal-reached (JudgeGoal).
func Assemble(scen *scenarios.Scenario, store, apiStore world.Store, prefix []byte, base OpenBase, api OpenAPI, mcp OpenMCP) (world.World, error) {
	order, err := world.NewOrder(store, append(bytes.Clone(prefix), orderSpace...))
	if err != nil {
		return nil, err
	}
	var routes []world.Route
	name := "http"
	if len(scen.HTTP) == 0 {
		name = "mcp"
	}
	if scen.HasWorld() {
		b, err := base(order.Store(0, prefix, nil), prefix)
		if err != nil {
			return nil, err
		}
		routes = append(routes, world.Route{World: b})
		name = b.Name()
	}
	apis := map[string]*World{}
	for i, a := range scen.HTTP {
		sub := APIPrefix(prefix, a.Name)
		w, err := api(a, order.Store(i+1, sub, apiStore), sub)
		if err != nil {
			return nil, fmt.Errorf("HTTP API %s: %w", a.Name, err)
		}
		apis[a.Name] = w
		routes = append(routes, world.Route{Prefix: a.EffectKind(""), World: w, Slot: i + 1})
	}
	for i, m := range scen.MCPServers() {
		slot := len(scen.HTTP) + i + 1
		sub := MCPPrefix(prefix, m.Name)
		w, err := mcp(m, order.Store(slot, sub, apiStore), sub)
		if err != nil {
			return nil, fmt.Errorf("MCP server %s: %w", m.Name, err)
		}
		routes = append(routes, world.Route{Prefix: m.EffectKind(""), World: w, Slot: slot})
	}
	var goal func(ctx context.Context, task json.RawMessage) (world.Check, error)
	if g := scen.Goal; g != nil {
		goal = func(ctx context.Context, task json.RawMessage) (world.Check, error) {
			w, ok := apis[g.API]
			if !ok {
				return world.Check{}, fmt.Errorf("goal: no HTTP API %q", g.API)
			}
			for _, a := range scen.HTTP {
				// Once any API's replay diverged, the probe's recorded
				// answer describes the recorded world, not this run's.
				if err := apis[a.Name].notDiverged(ctx, "goal-reached"); err != nil {
					return world.Check{}, err
				}
			}
			return JudgeGoal(ctx, w, g, task)
		}
	}
	return world.NewRouter(name, order, routes, goal), nil
}
