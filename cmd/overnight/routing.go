package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/overnight-dev/overnight/harness"
)

// printRouting prints a scenario's routing (harness.Routing) for people:
// each route's prefix and world, then its kinds, indented by indent.
func printRouting(w io.Writer, indent string, routes []harness.Route) {
	if len(routes) == 0 {
		fmt.Fprintf(w, "%sno world: every effect is refused\n", indent)
		return
	}
	fmt.Fprintf(w, "%seffect kinds, routed by prefix (the longest that matches; a kind no route claims is refused):\n", indent)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range routes {
		prefix := r.Prefix + "*"
		if r.Prefix == "" {
			prefix = "every other kind"
			if len(routes) == 1 {
				prefix = "every kind"
			}
		}
		where := "world " + r.World
		switch r.Via {
		case "http":
			where = "HTTP API " + r.World + " at " + r.Target
		case "mcp":
			where = "MCP server " + r.World + " (" + r.Target + ")"
		case "built-in":
			where += " (built-in)"
		default:
			if r.World == "" {
				where = "world"
			}
			where += " (" + r.Via + " " + r.Target + ")"
		}
		fmt.Fprintf(tw, "%s  %s\t-> %s\n", indent, prefix, where)
		if r.Note != "" {
			fmt.Fprintf(tw, "%s      %s\n", indent, r.Note)
		}
		for _, k := range r.Kinds {
			var about []string
			if k.Route != "" {
				about = append(about, k.Route)
			}
			about = append(about, k.Flags()...)
			if k.Identity != "" {
				about = append(about, "identity "+k.Identity)
			}
			fmt.Fprintf(tw, "%s    %s\t%s\n", indent, k.Kind, strings.Join(about, ", "))
		}
		for _, l := range r.Lookups {
			args := l.Args
			if args == "" {
				args = "{}"
			}
			fmt.Fprintf(tw, "%s    lookup %s\tin doubt: calls %s(%s), done when %s\n", indent, l.Kind, l.Tool, args, l.Found)
		}
	}
	tw.Flush()
}
