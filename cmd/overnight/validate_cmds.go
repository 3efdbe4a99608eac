package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/agents"
	"github.com/overnight-dev/overnight/scenarios/builtin"
)

// fileReport is what validate says of one file: {"file", "valid", "errors"}.
type fileReport struct {
	File   string          `json:"file"` // as given on the command line
	Valid  bool            `json:"valid"`
	Errors []problemReport `json:"errors"` // empty when valid
	// Routing is where the scenario's effect kinds go (harness.Routing),
	// when it is valid.
	Routing []harness.Route `json:"routing,omitempty"`
}

// problemReport is one problem of a file. Line, Column and Pointer are set
// for a problem in the file (Pointer "" is the document as a whole), and
// left out when the file could not be read at all.
type problemReport struct {
	Message  string  `json:"message"`
	Line     int     `json:"line,omitempty"`
	Column   int     `json:"column,omitempty"`
	Pointer  *string `json:"pointer,omitempty"`
	Expected string  `json:"expected,omitempty"` // the shape the schema expects there, when it says
	text     string  // the line printed for people: file:line:column: message
}

// validateCmd checks scenario files as run would before it starts, but
// with no state dir and no Docker engine, and reports every problem.
func validateCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check scenario files (or built-in scenarios by name) without running them; every problem as file:line:column",
		Long: `validate checks each scenario file as run does before it starts — the
schema (overnight schema prints it), fault syntax and kinds, durations,
agents, the llm block, the world and the task's shape, the built-in agents,
the faults against the capabilities of the --backend's sandboxes — without a
state dir or a Docker engine. For a valid file it prints the routing of its
effect kinds: which world (its world:, each HTTP API) serves which prefix. Every problem of every file is
reported, each as file:line:column: message, with the shape expected there
when the schema says. Exit 0 when every file is valid, 3 when any is not.`,
		Example: `  overnight validate my-scenario.yaml
  overnight validate scenarios/*.yaml deploy week --output json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			backend, err := g.sandboxType()
			if err != nil {
				return err
			}
			reports := make([]fileReport, 0, len(args))
			valid := true
			for _, arg := range args {
				r := validateFile(arg, backend)
				valid = valid && r.Valid
				reports = append(reports, r)
			}
			if output == "json" {
				if err := writeJSON(g.stdout, map[string]any{"files": reports}); err != nil {
					return &codeError{exitError, err}
				}
			} else {
				for _, r := range reports {
					if r.Valid {
						fmt.Fprintf(g.stdout, "%s: valid\n", r.File)
						printRouting(g.stdout, "  ", r.Routing)
					}
					for _, p := range r.Errors {
						fmt.Fprintln(g.stdout, p.text)
						if p.Expected != "" {
							fmt.Fprintf(g.stdout, "    expected: %s\n", p.Expected)
						}
					}
				}
			}
			if !valid {
				return &codeError{code: exitError} // the report is the output
			}
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

// loadScenario finds a scenario (a path or a built-in name) and checks it
// as validate does, against what this binary offers: every problem, those
// of the file and those of what it names — its world and task, its
// built-in agents, its faults, its invariants — each at file:line:column (see
// scenarios.Validate). run and suite load their scenarios with it before
// they open the state dir, so they report what validate reports, and a
// scenario with problems records nothing.
func loadScenario(arg string, backend sandbox.Type) (*scenarios.Scenario, error) {
	scen, err := scenarios.Validate(arg, builtin.Lookup, builtin.Names(), func(scen *scenarios.Scenario) error {
		// The harness g.open makes checks against the same: its default
		// worlds, invariants and fault catalog, this binary's built-in
		// agents, and the --backend's capabilities.
		return harness.CheckScenario(scen, harness.CheckOptions{
			Worlds: harness.DefaultWorlds(), BuiltinAgents: agents.Names(), Faults: chaos.Default(), Backend: backend,
		})
	})
	if err != nil {
		return nil, &scenarioLoadError{err}
	}
	return scen, nil
}

// validateFile loads one scenario (a path or a built-in name) with
// loadScenario and reports its problems.
func validateFile(arg string, backend sandbox.Type) fileReport {
	r := fileReport{File: arg, Errors: []problemReport{}}
	scen, err := loadScenario(arg, backend)
	if err == nil {
		r.Valid = true
		r.Routing = harness.Routing(scen, nil)
		return r
	}
	list, ok := scenarios.Problems(err)
	if !ok {
		// Not read at all: a missing file, a directory, an unknown name.
		r.Errors = append(r.Errors, problemReport{Message: err.Error(), text: err.Error()})
		return r
	}
	for _, e := range list {
		ptr := e.Pointer
		r.Errors = append(r.Errors, problemReport{Message: e.Msg, Line: e.Line, Column: e.Column, Pointer: &ptr,
			Expected: scenarios.Expected(e.Pointer), text: e.Error()})
	}
	return r
}

// schemaCmd prints the JSON Schema of scenario files, for editors.
func schemaCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema (draft 2020-12) of scenario files, for editors and other tools",
		Long: `schema prints the JSON Schema of apiVersion overnight/v1 scenario files —
the one validate and run check files with, generated from the Go types of the
file format — so that an editor can validate and complete scenario files:

  overnight schema > scenario.schema.json
  # then, first line of a scenario file (the YAML language server, e.g. in VS Code):
  # yaml-language-server: $schema=./scenario.schema.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := g.stdout.Write(scenarios.SchemaJSON()); err != nil {
				return &codeError{exitError, err}
			}
			return nil
		},
	}
}
