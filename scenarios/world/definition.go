package world

import "encoding/json"

// Definition is a world as the harness and people see it before any run:
// how to open it, what it offers, and how it judges a task.
type Definition struct {
	Name string
	// Summary is one line for `overnight worlds`.
	Summary string
	// Open opens the world on a run's store.
	Open Factory
	// Options documents the world options a scenario may give
	// (world: {name, options}).
	Options []Field
	// Versions are the API versions the world serves, the first the one it
	// starts in (an api-version fault moves it), each with its effect kinds.
	Versions []Version
	// Goals are the goals the world can judge (goal-reached), by the
	// option that selects them, each with the task shape it needs.
	Goals []Goal
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

// Field documents one field of a task or of the options.
type Field struct {
	Name     string `json:"name"` // dotted for nested fields: "service.name"
	Type     string `json:"type"`
	Required bool   `json:"required,omitempty"`
	Doc      string `json:"doc"`
}

// Problem is what is wrong with a task, at a JSON pointer into it ("" for
// the task itself, "/service/name" for a field).
type Problem struct {
	Pointer string
	Message string
}
