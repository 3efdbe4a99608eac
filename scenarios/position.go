package scenarios

import (
	"encoding/json"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// position is where a value is written in a scenario file.
type position struct{ line, column int }

// positions keeps the position of every value of the tree, by JSON pointer.
func (t *tree) positions() map[string]position {
	out := make(map[string]position, len(t.at))
	for ptr, loc := range t.at {
		out[ptr] = position{loc.value.Line, loc.value.Column}
	}
	return out
}

// ErrorAt is a problem with the value at a JSON pointer (for example
// "/task/service/name"), positioned where that value — or, when it is not
// written, the nearest enclosing value — is in the file. Checks that run
// after Parse (a world judging the task, a harness knowing its agents) use
// it to report file:line:column.
func (s *Scenario) ErrorAt(pointer, format string, args ...any) *Error {
	e := &Error{File: s.Source, Line: 1, Column: 1, Msg: fmt.Sprintf(format, args...), Pointer: pointer}
	for p := pointer; ; {
		if pos, ok := s.positions[p]; ok {
			e.Line, e.Column = max(pos.line, 1), max(pos.column, 1)
			return e
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return e
		}
		p = p[:i]
	}
}

// Err is nil for an empty list, the single *Error of a list of one, and
// the list sorted by position otherwise — the way Parse reports.
func (l ErrorList) Err() error {
	sink := &errorSink{errs: l}
	return sink.result()
}

// TaskJSON is the task as the agent receives it in GET /v1/run.
func (s *Scenario) TaskJSON() json.RawMessage {
	b, err := json.Marshal(s.Task)
	if err != nil {
		return json.RawMessage("{}") // Parse admits only JSON-compatible values
	}
	return b
}

// InvariantPointer returns the JSON pointer where the invariant called name
// is listed in the file ("/invariants/2"), or "/invariants" for one the
// file does not list (a default, or a name added to Invariants in Go): where
// a check that refuses the name reports it (see ErrorAt).
func (s *Scenario) InvariantPointer(name string) string {
	if ptr, ok := s.invariantAt[name]; ok {
		return ptr
	}
	return "/invariants"
}

// AgentsByPointer returns the default agent and every variant, keyed by
// the JSON pointer where each is written ("/agent", "/agents/NAME").
func (s *Scenario) AgentsByPointer() map[string]AgentSpec {
	out := map[string]AgentSpec{"/agent": s.Agent}
	for name, a := range s.Agents {
		out["/agents/"+name] = a
	}
	return out
}

// GoPrefix starts the Source of a scenario made of Go values: "go:NAME".
const GoPrefix = "go:"

// FromValue makes a scenario of Go values: v is what a scenario file would
// hold — a ScenarioFile (spec.go), a map[string]any, or another struct with
// yaml tags — and is checked as Parse checks a file (errors are positioned
// in its YAML form). Its Source is "go:" + the scenario's name; a relative
// binary path is relative to the working directory.
func FromValue(v any) (*Scenario, error) {
	data, err := yaml.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("scenario from Go values: %w", err)
	}
	var head struct {
		Name string `yaml:"name"`
	}
	_ = yaml.Unmarshal(data, &head)
	name := head.Name
	if name == "" {
		name = "unnamed"
	}
	return Parse(GoPrefix+name, data)
}
