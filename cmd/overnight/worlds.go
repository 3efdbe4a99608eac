package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// worldsCmd prints what each world offers: its options, the effect kinds
// of each API version with their arguments and results, the errors each
// version answers with (the shape of their details, and an example the
// world itself answered), and how its goals are judged from the task.
func worldsCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "worlds [SCENARIO...]",
		Short: "Print the built-in worlds (effect kinds, errors, goals per API version), or a scenario's routing of effect kinds to its worlds",
		Long: `worlds prints the built-in worlds: each API version's effect kinds with
their arguments and results, the errors it answers with (codes, details, an
example the world itself answered), and how goal-reached is judged.

Given scenarios (files or built-in names), it prints instead where each
one's effect kinds go: its world: and each HTTP API, by prefix — what
validate prints for a valid file. A scenario with problems is reported as
validate reports it (exit 3).`,
		Example: `  overnight worlds
  overnight worlds examples/etcd/scenario.yaml deploy -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return printScenarioRouting(g, args, output)
			}
			var defs []world.Definition
			for _, d := range harness.DefaultWorlds().Definitions() {
				described, err := d.Describe(cmd.Context())
				if err != nil {
					return &codeError{exitError, err}
				}
				defs = append(defs, described)
			}
			if output == "json" {
				type entry struct {
					Name     string            `json:"name"`
					Summary  string            `json:"summary"`
					Options  []world.Field     `json:"options"`
					Versions []world.Version   `json:"versions"`
					Events   []world.EventInfo `json:"events,omitempty"`
					Goals    []world.Goal      `json:"goals"`
				}
				list := make([]entry, 0, len(defs))
				for _, d := range defs {
					list = append(list, entry{d.Name, d.Summary, d.Options, d.Versions, d.Events, d.Goals})
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
					printErrors(w, v)
				}
				if len(d.Events) > 0 {
					fmt.Fprintln(w, "\n  world events (what happens to the world, recorded in its ledger; a fault fires each):")
					for _, e := range d.Events {
						fmt.Fprintf(w, "    %s %s -> %s (fault %s)\n      %s\n", e.Name, e.Args, e.Result, e.Fault, e.Doc)
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

// printErrors prints the refusals of one API version: each error code with
// its status and the kinds it applies to, when it is answered, the shape
// of its details, and an example request with the error the world answers.
func printErrors(w io.Writer, v world.Version) {
	if len(v.Errors) == 0 {
		return
	}
	fmt.Fprintf(w, "\n  errors of API %s (an effect's error: code, status, details), in the order the world checks them:\n", v.Name)
	for _, e := range v.Errors {
		on := "any kind"
		if len(e.Kinds) > 0 {
			on = strings.Join(e.Kinds, ", ")
		}
		fmt.Fprintf(w, "    %s (%d) on %s\n      %s\n", e.Code, e.Status, on, e.When)
		if len(e.Fields) > 0 {
			fmt.Fprintf(w, "      about: %s\n", strings.Join(e.Fields, ", "))
		}
		if shape := e.DetailsShape(); shape != "" {
			fmt.Fprintf(w, "      details: %s\n", shape)
			for _, f := range e.Details {
				fmt.Fprintf(w, "        %s: %s\n", f.Name, f.Doc)
			}
		} else {
			fmt.Fprintln(w, "      details: none (the message says what is wrong)")
		}
		ex := e.Example
		for _, c := range ex.Setup {
			fmt.Fprintf(w, "      after:   %s %s\n", c.Kind, c.Args)
		}
		fmt.Fprintf(w, "      example: %s %s\n", ex.Request.Kind, ex.Request.Args)
		if ex.Error != nil {
			b, err := json.Marshal(ex.Error)
			if err != nil {
				b = []byte(err.Error())
			}
			fmt.Fprintf(w, "      answers: {\"status\": \"failed\", \"error\": %s}\n", b)
		}
	}
}

// printScenarioRouting prints the routing of each scenario named (see
// harness.Routing): {"scenarios": [{"file", "routing"}]} in JSON.
func printScenarioRouting(g *globals, args []string, output string) error {
	backend, err := g.sandboxType()
	if err != nil {
		return err
	}
	type entry struct {
		File    string          `json:"file"`
		Routing []harness.Route `json:"routing"`
	}
	list := make([]entry, 0, len(args))
	for _, arg := range args {
		scen, err := loadScenario(arg, backend)
		if err != nil {
			return err
		}
		list = append(list, entry{arg, harness.Routing(scen, nil)})
	}
	if output == "json" {
		return writeJSON(g.stdout, map[string]any{"scenarios": list})
	}
	for _, e := range list {
		fmt.Fprintf(g.stdout, "%s\n", e.File)
		printRouting(g.stdout, "", e.Routing)
	}
	return nil
}
