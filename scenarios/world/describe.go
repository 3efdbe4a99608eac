package world

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// ErrDescription is wrapped by Describe's error when a world's description
// of an error differs from what the world answers.
var ErrDescription = errors.New("the world's description of its errors differs from its answers")

// exampleTime is the virtual time of the requests of an error example.
var exampleTime = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Describe returns the definition as `overnight worlds` shows it: every
// error example answered by the world itself. Each example is sent — its
// setup, then its request — to a fresh instance of the world opened in
// memory with no options and moved to the example's API version (a world
// with more than one version must be Versioned), and the answer is checked
// against the description: a failure with the described code and status,
// of a kind the error lists, whose details hold the described fields (the
// required ones at least), each of its type, and nothing else. Any difference is an error wrapping
// ErrDescription that names the world, version and code: the description
// cannot drift from what the world answers. The definition's Examples are
// checked too: sent in order to a fresh instance in the first version,
// each must succeed. d itself is not changed.
func (d Definition) Describe(ctx context.Context) (Definition, error) {
	if err := d.checkExamples(ctx); err != nil {
		return Definition{}, err
	}
	out := d
	out.Versions = slices.Clone(d.Versions)
	for vi, v := range out.Versions {
		v.Errors = slices.Clone(v.Errors)
		for ei, e := range v.Errors {
			got, err := d.answer(ctx, vi, e.Example)
			if err != nil {
				return Definition{}, fmt.Errorf("world %s, API %s, error %s: example: %w", d.Name, v.Name, e.Code, err)
			}
			if err := e.check(got); err != nil {
				return Definition{}, fmt.Errorf("world %s, API %s, error %s: %w: %v", d.Name, v.Name, e.Code, ErrDescription, err)
			}
			e.Example.Error = got
			v.Errors[ei] = e
		}
		out.Versions[vi] = v
	}
	return out, nil
}

// checkExamples sends d.Examples in order to a fresh instance of the
// world and checks each succeeds.
func (d Definition) checkExamples(ctx context.Context) error {
	if len(d.Examples) == 0 {
		return nil
	}
	w, err := d.Instance(ctx, NewMemStore(), []byte("examples/"), nil)
	if err != nil {
		return fmt.Errorf("world %s: examples: open the world: %w", d.Name, err)
	}
	for i, c := range d.Examples {
		o, err := w.Execute(ctx, Request{Key: fmt.Sprintf("example-%d", i+1), Kind: c.Kind, Args: c.Args, Now: exampleTime})
		if err != nil {
			return fmt.Errorf("world %s: example %d (%s): %w", d.Name, i+1, c.Kind, err)
		}
		if o.Status != protocol.StatusDone {
			return fmt.Errorf("world %s: %w: example %d, %s %s, answered %s (%s); the examples must succeed in order on a fresh instance",
				d.Name, ErrDescription, i+1, c.Kind, c.Args, o.Status, errorText(o.Error))
		}
	}
	return nil
}

// answer sends ex to a fresh instance of the world in version vi and
// returns the error it answers the request with (nil: it succeeded).
func (d Definition) answer(ctx context.Context, vi int, ex ErrorExample) (*protocol.EffectError, error) {
	w, err := d.Instance(ctx, NewMemStore(), []byte("describe/"), nil)
	if err != nil {
		return nil, fmt.Errorf("open the world: %w", err)
	}
	if vi > 0 {
		vw, ok := w.(Versioned)
		if !ok {
			return nil, fmt.Errorf("the world describes %d API versions but cannot switch between them (it is not Versioned)", len(d.Versions))
		}
		if _, err := vw.SetAPIVersion(ctx, d.Versions[vi].Name, exampleTime); err != nil {
			return nil, err
		}
	}
	for i, c := range ex.Setup {
		o, err := w.Execute(ctx, Request{Key: fmt.Sprintf("example-setup-%d", i+1), Kind: c.Kind, Args: c.Args, Now: exampleTime})
		if err != nil {
			return nil, fmt.Errorf("setup %s: %w", c.Kind, err)
		}
		if o.Status != protocol.StatusDone {
			return nil, fmt.Errorf("setup %s %s: want done, got %s: %s", c.Kind, c.Args, o.Status, errorText(o.Error))
		}
	}
	o, err := w.Execute(ctx, Request{Key: "example", Kind: ex.Request.Kind, Args: ex.Request.Args, Now: exampleTime})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ex.Request.Kind, err)
	}
	return o.Error, nil
}

// check compares the error the example drew with the description.
func (e ErrorInfo) check(got *protocol.EffectError) error {
	req := e.Example.Request
	switch {
	case got == nil:
		return fmt.Errorf("the example %s %s succeeded", req.Kind, req.Args)
	case got.Code != e.Code || got.Status != e.Status:
		return fmt.Errorf("the example %s %s drew %s %d (%s), not %s %d", req.Kind, req.Args, got.Code, got.Status, got.Message, e.Code, e.Status)
	case len(e.Kinds) > 0 && !slices.Contains(e.Kinds, req.Kind):
		return fmt.Errorf("the example's kind %s is not among the kinds the error lists (%s)", req.Kind, strings.Join(e.Kinds, ", "))
	}
	if len(e.Details) == 0 {
		if len(got.Details) > 0 && string(got.Details) != "null" {
			return fmt.Errorf("it describes no details, and the world answers details %s", got.Details)
		}
		return nil
	}
	var details map[string]any
	if err := json.Unmarshal(got.Details, &details); err != nil || details == nil {
		return fmt.Errorf("it describes details {%s}, and the world answers details %q", fieldNames(e.Details), got.Details)
	}
	for _, f := range e.Details {
		v, ok := details[f.Name]
		switch {
		case !ok && !f.Required:
			continue
		case !ok:
			return fmt.Errorf("details.%s is described as required, and missing from the world's details %s", f.Name, got.Details)
		case !f.Holds(v):
			return fmt.Errorf("details.%s is described as %s, and the world answers %s", f.Name, f.Type, got.Details)
		}
		delete(details, f.Name)
	}
	if len(details) > 0 {
		var extra []string
		for k := range details {
			extra = append(extra, k)
		}
		sort.Strings(extra)
		return fmt.Errorf("the world's details %s hold %s, which the description does not", got.Details, strings.Join(extra, ", "))
	}
	return nil
}

// DetailsShape writes the details' fields as a JSON-like shape, e.g.
// {"replacement": string}; "" when there are none.
func (e ErrorInfo) DetailsShape() string {
	if len(e.Details) == 0 {
		return ""
	}
	parts := make([]string, len(e.Details))
	for i, f := range e.Details {
		parts[i] = fmt.Sprintf("%q: %s", f.Name, f.Type)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func fieldNames(fs []Field) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

func errorText(e *protocol.EffectError) string {
	if e == nil {
		return "no error"
	}
	return e.Code + ": " + e.Message
}
