package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// worldsCmd prints what each world offers: its options, the effect kinds
// of each API version with their arguments and results, and how its goals
// are judged from the task.
func worldsCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "worlds",
		Short: "Print the simulated worlds: effect kinds (arguments, results) per API version, and how goal-reached is judged",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			defs := harness.DefaultWorlds().Definitions()
			if output == "json" {
				type entry struct {
					Name     string          `json:"name"`
					Summary  string          `json:"summary"`
					Options  []world.Field   `json:"options"`
					Versions []world.Version `json:"versions"`
					Goals    []world.Goal    `json:"goals"`
				}
				list := make([]entry, 0, len(defs))
				for _, d := range defs {
					list = append(list, entry{d.Name, d.Summary, d.Options, d.Versions, d.Goals})
				}
				return writeJSON(g.stdout, map[string]any{"worlds": list})
			}
			w := g.stdout
			for _, d := range defs {
				fmt.Fprintf(w, "%s\n  %s\n", d.Name, d.Summary)
				if len(d.Options) > 0 {
					fmt.Fprintf(w, "\n  options (world: {name: %s, options: {...}}):\n", d.Name)
					for _, o := range d.Options {
						fmt.Fprintf(w, "    %s (%s): %s\n", o.Name, o.Type, o.Doc)
					}
				}
				for _, v := range d.Versions {
					fmt.Fprintf(w, "\n  API %s: %s\n", v.Name, v.Summary)
					for _, k := range v.Kinds {
						var tags []string
						if k.Idempotent {
							tags = append(tags, "idempotent")
						}
						if k.ReadOnly {
							tags = append(tags, "read-only")
						}
						tag := ""
						if len(tags) > 0 {
							tag = " [" + strings.Join(tags, ", ") + "]"
						}
						fmt.Fprintf(w, "    %s %s -> %s%s\n      %s\n", k.Name, k.Args, k.Result, tag, k.Doc)
					}
				}
				for _, goal := range d.Goals {
					name := goal.Name
					if goal.Default {
						name += " (default)"
					}
					fmt.Fprintf(w, "\n  goal %s: goal-reached holds when %s\n    task:\n", name, goal.Judged)
					for _, f := range goal.Task {
						req := ""
						if f.Required {
							req = ", required"
						}
						fmt.Fprintf(w, "      %s (%s%s): %s\n", f.Name, f.Type, req, f.Doc)
					}
					fmt.Fprintf(w, "    example: %s\n", goal.Example)
				}
				fmt.Fprintln(w)
			}
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}
