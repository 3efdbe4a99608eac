package world

import (
	"encoding/json"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// Definition is a world as the harness and people see it before any run:
// how to open it, what it offers, and how it judges a task.
type Definition struct {
	Name string
	// Summary is one line for `overnight worlds`.
	Summary string
	// Open opens the world's model on its key space (see Instance, which
	// wraps it in the durable ledger).
	Open ModelFactory
	// Options documents the world options a scenario may give
	// (world: {name, options}).
	Options []Field
	// Versions are the API versions the world serves, the first the one it
	// starts in (an api-version fault moves it), each with its effect kinds
	// and the errors it answers with (see Describe).
	Versions []Version
	// Events are the world events the world undergoes besides API
	// version changes (its model is an EventModel), each with the chaos
	// fault that fires it: a scenario that schedules that fault on a
	// world without the event is refused before it runs.
	Events []EventInfo
	// Goals are the goals the world can judge (goal-reached), by the
	// option that selects them, each with the task shape it needs.
	Goals []Goal
	// Examples are requests that succeed, in this order, on a fresh
	// instance of the world (in its first version, opened with no
	// options): what the world's conformance kit (scenarios/world/worldtest)
	// applies to check that the world keeps the protocol's promises, and
	// what describe answers as "examples" over the world protocol. Each
	// kind the world offers should appear in one. Describe checks that
	// they succeed.
	Examples []Call
	// CheckTask checks a scenario's task against the goal options select,
	// before anything runs; each problem names a JSON pointer into the
	// task. Nil: any task.
	CheckTask func(options map[string]any, task json.RawMessage) []Problem
}

// Version is one API version of a world.
type Version struct {
	Name    string     `json:"name"`
	Summary string     `json:"summary"`
	Kinds   []KindInfo `json:"kinds"`
	// Errors are the refusals the version can answer an effect with, in
	// the order the world checks them: what an agent finds in an effect
	// result's error (code, status, details), for the author who writes
	// the agent's handling of each. Definition.Describe answers their
	// examples.
	Errors []ErrorInfo `json:"errors"`
}

// ErrorInfo describes one error code a version of a world answers an
// effect with.
type ErrorInfo struct {
	// Code is error.code, e.g. "field_renamed".
	Code string `json:"code"`
	// Status is error.status: 4xx a permanent refusal of those arguments,
	// 5xx a transient failure.
	Status int `json:"status"`
	// Kinds are the effect kinds that can answer it; empty: any kind.
	Kinds []string `json:"kinds,omitempty"`
	// Fields are the arguments it is about; empty: no argument in
	// particular.
	Fields []string `json:"fields,omitempty"`
	// When says when the world answers it and what an agent should change,
	// for a person.
	When string `json:"when"`
	// Details are the fields of error.details, an object; none: the error
	// carries no details. A field's Type is one of string, integer,
	// object, array.
	Details []Field `json:"details,omitempty"`
	// Example is a request that draws the error.
	Example ErrorExample `json:"example"`
}

// ErrorExample is a request that draws an error from a fresh world in
// the error's version, and the error it draws.
type ErrorExample struct {
	// Setup are requests sent first, in order, each of which must succeed
	// (e.g. issuing the key the request then carries).
	Setup []Call `json:"setup,omitempty"`
	// Request is the request that draws the error.
	Request Call `json:"request"`
	// Error is the world's answer to Request, the error exactly as an
	// agent receives it. A world's definition leaves it out:
	// Definition.Describe fills it in by sending the example to the world.
	Error *protocol.EffectError `json:"error,omitempty"`
}

// Call is one effect request of an example: its kind and arguments.
type Call struct {
	Kind string          `json:"kind"`
	Args json.RawMessage `json:"args"`
}

// Goal is a goal a world judges from its own state.
type Goal struct {
	// Name is the value of the option that selects it ("" when the world
	// has one goal).
	Name    string `json:"name"`
	Default bool   `json:"default,omitempty"`
	// Judged says how goal-reached is decided, for a person.
	Judged string `json:"judged"`
	// Task is the shape the scenario's task must have.
	Task []Field `json:"task"`
	// Example is a task that satisfies the shape.
	Example json.RawMessage `json:"example"`
}

// Field documents one field of a task, of the options or of an error's
// details.
type Field struct {
	Name     string `json:"name"` // dotted for nested fields: "service.name"
	Type     string `json:"type"` // string, integer, number, object or array
	Required bool   `json:"required,omitempty"`
	Doc      string `json:"doc"`
}

// Holds reports whether v, a value encoding/json decoded into an any, is
// of the field's Type; a Type not among those above holds nothing.
func (f Field) Holds(v any) bool {
	switch f.Type {
	case "string":
		_, ok := v.(string)
		return ok
	case "integer":
		n, ok := v.(float64)
		return ok && n == float64(int64(n))
	case "number":
		_, ok := v.(float64)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	}
	return false
}

// Problem is what is wrong with a task, at a JSON pointer into it ("" for
// the task itself, "/service/name" for a field).
type Problem struct {
	Pointer string
	Message string
}
