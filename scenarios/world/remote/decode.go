package remote

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// decodeBody decodes body, a call's request, into v: one JSON object of
// v's fields and no others, and nothing after it. The error names the
// field that is wrong, if one is.
func decodeBody(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errors.New("body: empty; want a JSON object")
	}
	if body := bytes.TrimSpace(body); body[0] != '{' {
		return fmt.Errorf("body: want a JSON object, got %s", excerpt(body))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeDecodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("body: more after the JSON object; want one object")
	}
	return nil
}

func describeDecodeError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var tp *time.ParseError
	switch {
	case errors.As(err, &syntax):
		return fmt.Errorf("body: not JSON: %v (at byte %d)", syntax, syntax.Offset)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		return fmt.Errorf("field %q: want %s, got a JSON %s", field, typ.Type, typ.Value)
	case errors.As(err, &tp):
		return fmt.Errorf("a time field (now, at): want RFC 3339, e.g. \"2025-01-01T00:00:00Z\": %v", err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("body: the JSON object is cut short")
	}
	if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("field %s: unknown; the call's fields are its JSON names in docs/world-protocol.md", msg)
	}
	return fmt.Errorf("body: %v", err)
}

// decodeApply decodes and checks an apply body.
func decodeApply(body []byte) (ApplyRequest, error) {
	var r ApplyRequest
	if err := decodeBody(body, &r); err != nil {
		return r, err
	}
	switch {
	case r.Key == "":
		return r, errors.New(`field "key": required (the harness's identity of the effect)`)
	case r.Kind == "":
		return r, errors.New(`field "kind": required`)
	case strings.HasPrefix(r.Kind, "world."):
		return r, fmt.Errorf(`field "kind": %q is a world event's kind, not an effect's`, r.Kind)
	}
	return r, nil
}

// decodeLookup decodes and checks a lookup body.
func decodeLookup(body []byte) (LookupRequest, error) {
	var r LookupRequest
	if err := decodeBody(body, &r); err != nil {
		return r, err
	}
	if r.Key == "" {
		return r, errors.New(`field "key": required`)
	}
	return r, nil
}

// decodeInstance decodes an instance-only body (ledger, state, duplicates).
func decodeInstance(body []byte) (InstanceRequest, error) {
	var r InstanceRequest
	err := decodeBody(body, &r)
	return r, err
}

// decodeGoal decodes a goal body; no task is a null one.
func decodeGoal(body []byte) (GoalRequest, error) {
	var r GoalRequest
	if err := decodeBody(body, &r); err != nil {
		return r, err
	}
	if len(r.Task) == 0 {
		r.Task = json.RawMessage("null")
	}
	return r, nil
}

// decodeSetVersion decodes and checks a set_version body.
func decodeSetVersion(body []byte) (SetVersionRequest, error) {
	var r SetVersionRequest
	if err := decodeBody(body, &r); err != nil {
		return r, err
	}
	if r.Version == "" {
		return r, errors.New(`field "version": required`)
	}
	return r, nil
}

// decodeEvent decodes and checks an event body.
func decodeEvent(body []byte) (EventRequest, error) {
	var r EventRequest
	if err := decodeBody(body, &r); err != nil {
		return r, err
	}
	switch {
	case !strings.HasPrefix(r.Kind, "world."):
		return r, fmt.Errorf(`field "kind": a world event's kind begins with "world.", got %q`, r.Kind)
	case r.Kind == world.EventAPIVersion:
		return r, fmt.Errorf(`field "kind": %s is set_version's`, r.Kind)
	}
	if len(r.Args) == 0 {
		r.Args = json.RawMessage("{}")
	}
	return r, nil
}

// maxInstanceName bounds an instance's name.
const maxInstanceName = 200

func checkInstanceName(name, what string) error {
	switch {
	case name == "":
		return fmt.Errorf(`field "instance": required; the world itself ("") cannot be %s`, what)
	case len(name) > maxInstanceName:
		return fmt.Errorf(`field "instance": %d bytes; at most %d`, len(name), maxInstanceName)
	}
	return nil
}

// decodeCreateInstance decodes and checks a create_instance body.
func decodeCreateInstance(body []byte) (CreateInstanceRequest, error) {
	var r CreateInstanceRequest
	if err := decodeBody(body, &r); err != nil {
		return r, err
	}
	if err := checkInstanceName(r.Instance, "created"); err != nil {
		return r, err
	}
	for i, e := range r.Ledger {
		if e.Kind == "" {
			return r, fmt.Errorf(`field "ledger[%d].kind": required`, i)
		}
		if strings.HasPrefix(e.Kind, "world.") && !e.IsEvent() {
			return r, fmt.Errorf(`field "ledger[%d].key": a world event (kind %s) has the key ""`, i, e.Kind)
		}
		if e.Kind == world.EventAPIVersion {
			var args struct {
				Version string `json:"version"`
			}
			if json.Unmarshal(e.Args, &args) != nil || args.Version == "" {
				return r, fmt.Errorf(`field "ledger[%d].args": a %s event's args are {"version": "..."}, got %s`, i, e.Kind, excerpt(e.Args))
			}
		}
	}
	return r, nil
}

// decodeDropInstance decodes and checks a drop_instance body.
func decodeDropInstance(body []byte) (InstanceRequest, error) {
	var r InstanceRequest
	if err := decodeBody(body, &r); err != nil {
		return r, err
	}
	return r, checkInstanceName(r.Instance, "dropped")
}
