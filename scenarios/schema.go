package scenarios

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"go.yaml.in/yaml/v3"
)

// scenario.schema.json is generated from the types of spec.go; a test fails when it is stale.
//go:generate go run ./internal/schemagen/cmd/schemagen -o scenario.schema.json

//go:embed scenario.schema.json
var schemaJSON []byte

// SchemaJSON returns the JSON Schema (draft 2020-12) of apiVersion overnight/v1 scenario files,
// for editors and documentation. It describes structure and types; Parse checks more.
func SchemaJSON() []byte { return bytes.Clone(schemaJSON) }

// compiledSchema is the schema compiled once, and its raw form for looking up property names.
var compiledSchema = sync.OnceValue(func() *schemaSet {
	var doc map[string]any
	if err := json.Unmarshal(schemaJSON, &doc); err != nil {
		panic(fmt.Sprintf("scenarios: embedded scenario.schema.json is not a JSON object: %v", err))
	}
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		panic(fmt.Sprintf("scenarios: embedded scenario.schema.json is not JSON: %v", err))
	}
	id, _ := doc["$id"].(string) // https://overnight.dev/schemas/scenario/v1.json (schemagen.ID)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(id, raw); err != nil {
		panic(fmt.Sprintf("scenarios: embedded scenario.schema.json: %v", err))
	}
	sch, err := c.Compile(id)
	if err != nil {
		panic(fmt.Sprintf("scenarios: embedded scenario.schema.json does not compile: %v", err))
	}
	return &schemaSet{schema: sch, doc: doc}
})

type schemaSet struct {
	schema *jsonschema.Schema
	doc    map[string]any
}

// validateSchema validates the tree and reports each failure at the YAML node it concerns.
func validateSchema(t *tree, sink *errorSink) {
	s := compiledSchema()
	err := s.schema.Validate(t.root)
	if err == nil {
		return
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		sink.add(1, 1, "validating the scenario: %v", err)
		return
	}
	s.report(t, ve, sink)
}

// report walks the error tree down to the failures that say something (leaves, and property
// name failures, whose causes only repeat the pattern) and reports each.
func (s *schemaSet) report(t *tree, e *jsonschema.ValidationError, sink *errorSink) {
	if _, ok := e.ErrorKind.(*kind.PropertyNames); ok || len(e.Causes) == 0 {
		s.reportOne(t, e, sink)
		return
	}
	for _, cause := range e.Causes {
		s.report(t, cause, sink)
	}
}

func (s *schemaSet) reportOne(t *tree, e *jsonschema.ValidationError, sink *errorSink) {
	ptr := pointer(e.InstanceLocation)
	for _, p := range t.poisoned {
		if ptr == p || strings.HasPrefix(ptr, p+"/") {
			return // the value is already reported as unconvertible
		}
	}
	loc := t.at[ptr]
	if loc == nil {
		loc = t.at[""]
	}
	pos := func(n *yaml.Node) (int, int) { return n.Line, n.Column }
	line, col := pos(loc.value)
	name := at(loc.path)
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		for _, m := range k.Missing {
			// At the mapping, which is what is written; about the member, which is what is wanted.
			sink.addAt(ptr+"/"+escapePointer(m), line, col, "%smissing required field %q", name, m)
		}
	case *kind.AdditionalProperties:
		allowed := s.properties(e.SchemaURL)
		for _, p := range k.Properties {
			child := t.at[ptr+"/"+escapePointer(p)]
			l, c := line, col
			if child != nil && child.key != nil {
				l, c = pos(child.key)
			}
			msg := fmt.Sprintf("%sunknown field %q", name, p)
			if guess := closest(p, allowed); guess != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", guess)
			}
			if len(allowed) > 0 {
				msg += "; allowed: " + strings.Join(allowed, ", ")
			}
			sink.addAt(ptr+"/"+escapePointer(p), l, c, "%s", msg)
		}
	case *kind.PropertyNames:
		// jsonschema v6.0.3 does not copy the instance location of a propertyNames failure
		// (it aliases a slice that later siblings overwrite), so it cannot be trusted here.
		// The builder checks the same patterns on the keys, with their positions.
	case *kind.Type:
		msg := fmt.Sprintf("%sgot %s, want %s", name, k.Got, strings.Join(k.Want, " or "))
		switch {
		case loc.path == "limits.timeout" || loc.path == "limits.horizon":
			msg += " (write a duration with its unit, such as 90s, 5m or 30d)"
		case k.Got == "null":
			msg += " (the value is empty)"
		case slices.Contains(k.Want, "string") && (k.Got == "number" || k.Got == "integer" || k.Got == "boolean"):
			msg += fmt.Sprintf(" (quote it to make it text: %q)", loc.value.Value)
		}
		sink.addAt(ptr, line, col, "%s", msg)
	case *kind.Const:
		sink.addAt(ptr, line, col, "%sgot %s, want %s", name, display(k.Got), display(k.Want))
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = display(w)
		}
		sink.addAt(ptr, line, col, "%sgot %s, want one of %s", name, display(k.Got), strings.Join(want, ", "))
	case *kind.Pattern:
		sink.addAt(ptr, line, col, "%s%q does not match %s", name, k.Got, k.Want)
	case *kind.MinLength:
		sink.addAt(ptr, line, col, "%smust not be empty", name)
	case *kind.MaxLength:
		sink.addAt(ptr, line, col, "%s%d characters is too long (at most %d)", name, k.Got, k.Want)
	case *kind.Minimum:
		sink.addAt(ptr, line, col, "%s%s is too small (at least %s)", name, k.Got.RatString(), k.Want.RatString())
	case *kind.Maximum:
		sink.addAt(ptr, line, col, "%s%s is too large (at most %s)", name, k.Got.RatString(), k.Want.RatString())
	case *kind.ExclusiveMinimum:
		sink.addAt(ptr, line, col, "%s%s is too small (it must be greater than %s)", name, ratText(k.Got), ratText(k.Want))
	case *kind.MinItems:
		sink.addAt(ptr, line, col, "%sa list of %d is too short (at least %d)", name, k.Got, k.Want)
	default:
		msg := e.Error()
		if i := strings.Index(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		sink.addAt(ptr, line, col, "%s%s", name, msg)
	}
}

// properties lists, sorted, the properties the schema at location (an absolute schema URL with a
// JSON pointer fragment) declares.
func (s *schemaSet) properties(location string) []string {
	_, frag, _ := strings.Cut(location, "#")
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	var node any = s.doc
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		node = m[tok]
	}
	m, _ := node.(map[string]any)
	props, _ := m["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for p := range props {
		names = append(names, p)
	}
	slices.Sort(names)
	return names
}

// ratText prints a schema number as written in a file: 0.5, not 1/2.
func ratText(r *big.Rat) string {
	if r.IsInt() {
		return r.RatString()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// display prints a JSON value for a message.
func display(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case nil:
		return "null"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return fmt.Sprint(v)
}

// closest returns the candidate within a small edit distance of s, if there is exactly one best.
func closest(s string, candidates []string) string {
	best, bestDist, ties := "", 3, 0
	for _, c := range candidates {
		d := editDistance(strings.ToLower(s), strings.ToLower(c))
		switch {
		case d < bestDist:
			best, bestDist, ties = c, d, 0
		case d == bestDist:
			ties++
		}
	}
	if ties > 0 || bestDist > len(s)/2 {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes; keys are ASCII in practice).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
