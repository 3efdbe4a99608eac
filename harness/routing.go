package harness

import (
	"sort"
	"strings"

	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// Route is where one family of a scenario's effect kinds goes: an effect's
// kind is served by the route with the longest prefix it starts with, and
// a kind no route claims is refused (400 unknown_kind) without reaching
// any world. `overnight validate` and `overnight worlds SCENARIO` print a
// scenario's routes.
type Route struct {
	// Prefix is what the route's kinds start with ("http.etcd."); "" is
	// the scenario's world:, which serves every kind no other route claims.
	Prefix string `json:"prefix"`
	World  string `json:"world"`  // the world's name (an HTTP API's name)
	Via    string `json:"via"`    // "built-in", "url", "command", "image", "http" or "mcp"
	Target string `json:"target"` // where it is served from: the URL, command, image, base URL or MCP server's command or URL ("" for a built-in world)
	// Kinds are the route's kinds as far as they are known before the run:
	// a built-in world's (its first API version's), an HTTP API's routes. A
	// remote world's (and an MCP server's tools) are what it describes
	// when the run starts: none here.
	Kinds []RoutedKind `json:"kinds"`
	// Note says what else to know: the API versions a built-in world
	// moves through, or that a remote world describes its own kinds.
	Note string `json:"note,omitempty"`
	// Lookups are an MCP server's declared lookups for calls in doubt
	// (mcp.servers[].lookups), by the tool looked for, sorted by it.
	Lookups []RouteLookup `json:"lookups,omitempty"`
}

// RouteLookup is one declared lookup of an MCP server: how a call of Kind
// left in doubt is looked for with the read-only tool Tool.
type RouteLookup struct {
	Kind  string `json:"kind"`           // the effect kind looked for, mcp.<server>.<tool>
	Tool  string `json:"tool"`           // the read-only tool called, as the server lists it
	Args  string `json:"args,omitempty"` // the CEL of its arguments ("" : {})
	Found string `json:"found"`          // the CEL that says the call took effect
	At    string `json:"at,omitempty"`   // where the scenario declares it (file:line:column)
}

// RoutedKind is one effect kind of a Route.
type RoutedKind struct {
	Kind        string `json:"kind"`
	Route       string `json:"route,omitempty"` // an HTTP API's "METHOD /path"
	ReadOnly    bool   `json:"read_only,omitempty"`
	Idempotent  bool   `json:"idempotent,omitempty"`
	Destructive bool   `json:"destructive,omitempty"`
	Identity    string `json:"identity,omitempty"` // what names the resource a request acts on, over args
}

// Flags are the kind's flags for people: "read-only", "idempotent",
// "destructive".
func (k RoutedKind) Flags() []string {
	var out []string
	for _, f := range []struct {
		on   bool
		name string
	}{{k.ReadOnly, "read-only"}, {k.Idempotent, "idempotent"}, {k.Destructive, "destructive"}} {
		if f.on {
			out = append(out, f.name)
		}
	}
	return out
}

// Routing is the routing of scen's effect kinds to its worlds — its HTTP
// APIs', its MCP servers' and its world:'s — longest prefix first, built-in worlds described
// from worlds (DefaultWorlds when nil). It reads the scenario only: nothing
// is started or called.
func Routing(scen *scenarios.Scenario, worlds *world.Registry) []Route {
	if worlds == nil {
		worlds = DefaultWorlds()
	}
	var out []Route
	for _, a := range scen.HTTP {
		r := Route{Prefix: a.EffectKind(""), World: a.Name, Via: "http", Target: a.BaseURL, Kinds: []RoutedKind{}}
		for _, rt := range a.Routes {
			k := RoutedKind{Kind: a.EffectKind(rt.Kind), Route: rt.String(),
				ReadOnly: rt.ReadOnly, Idempotent: rt.Idempotent, Destructive: rt.Destructive}
			if rt.Identity != nil {
				k.Identity = rt.Identity.Source()
			}
			r.Kinds = append(r.Kinds, k)
		}
		if a.Mode != "" && a.Mode != scenarios.HTTPLive {
			r.Note = "mode " + a.Mode
		}
		out = append(out, r)
	}
	for _, m := range scen.MCPServers() {
		r := Route{Prefix: m.EffectKind(""), World: m.Name, Via: "mcp", Target: m.URL, Kinds: []RoutedKind{},
			Note: "the server lists its tools when the run starts (mcp." + m.Name + ".<tool>, seen by the agent as " + m.ToolName("<tool>") + ")"}
		if len(m.Command) > 0 {
			r.Target = strings.Join(m.Command, " ")
		}
		r.Lookups = routeLookups(m)
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].Prefix) > len(out[j].Prefix) })
	if scen.HasWorld() {
		out = append(out, baseRoute(scen.World, worlds))
	}
	return out
}

// routeLookups are m's declared lookups, sorted by the tool looked for.
func routeLookups(m scenarios.MCPServer) []RouteLookup {
	var out []RouteLookup
	for tool, l := range m.Lookups {
		rl := RouteLookup{Kind: m.EffectKind(tool), Tool: l.Tool, At: l.At}
		if l.Args != nil {
			rl.Args = l.Args.Source()
		}
		if l.Found != nil {
			rl.Found = l.Found.Source()
		}
		out = append(out, rl)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

// baseRoute is the route of a scenario's world:.
func baseRoute(w scenarios.World, worlds *world.Registry) Route {
	r := Route{World: w.Name, Kinds: []RoutedKind{}}
	switch {
	case w.URL != "":
		r.Via, r.Target = "url", w.URL
	case len(w.Command) > 0:
		r.Via, r.Target = "command", strings.Join(w.Command, " ")
	case w.Image != "":
		r.Via, r.Target = "image", w.Image
	default:
		r.Via = "built-in"
	}
	if r.Via != "built-in" {
		r.Note = "the world describes its kinds when the run starts"
		return r
	}
	d, ok := worlds.Definition(w.Name)
	if !ok || len(d.Versions) == 0 {
		return r
	}
	for _, k := range d.Versions[0].Kinds {
		r.Kinds = append(r.Kinds, RoutedKind{Kind: k.Name, ReadOnly: k.ReadOnly, Idempotent: k.Idempotent,
			Destructive: k.Destructive, Identity: k.Identity})
	}
	if len(d.Versions) > 1 {
		names := make([]string, 0, len(d.Versions))
		for _, v := range d.Versions {
			names = append(names, v.Name)
		}
		r.Note = "API " + d.Versions[0].Name + "'s kinds; an api-version fault moves it through " + strings.Join(names, ", ")
	}
	return r
}
