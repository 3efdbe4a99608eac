// Package schemagen generates scenario.schema.json, the JSON Schema of scenario files, from the
// Go types of package scenarios that describe the file as written (scenarios/spec.go):
// `go generate ./scenarios` runs it, and a test of package scenarios fails when the committed
// file differs from what Generate returns.
//
// github.com/invopop/jsonschema reflects the types; the generator then rewrites what that
// library cannot say, or says in a form that would make the loader's messages worse (see
// rewrite). It only writes bytes: it never validates a scenario.
package schemagen

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"unicode"

	"github.com/invopop/jsonschema"

	"github.com/overnight-dev/overnight/scenarios"
)

// The schema's identity and its header, for editors.
const (
	// ID is the schema's $id, under which package scenarios compiles it.
	ID    = "https://overnight.dev/schemas/scenario/v1.json"
	title = "overnight scenario (apiVersion overnight/v1, kind Scenario)"
	about = "Structure and types only. The loader also checks what a schema cannot say well: fault spec syntax, durations, " +
		"exactly one of builtin/binary/image, reserved env keys, duplicate keys and invariants, the LLM model spec, " +
		"exactly one of reply/tool_calls and the references of a scripted rule; and, before a run (or with overnight validate), " +
		"that the world, the task's shape, the built-in agents, the fault kinds and the invariants exist."
)

// pkgPath is the import path of package scenarios, whose source holds the doc comments.
var pkgPath = reflect.TypeFor[scenarios.ScenarioFile]().PkgPath()

// Generate returns scenario.schema.json as it should be committed. dir is the directory of
// package scenarios (the field doc comments of spec.go become the descriptions).
func Generate(dir string) ([]byte, error) {
	r := &jsonschema.Reflector{
		ExpandedStruct:             true, // the root is ScenarioFile itself, not a $ref to it
		RequiredFromJSONSchemaTags: true, // required is said by jsonschema:"required", not by a missing omitempty
		Namer:                      defName,
	}
	spec := filepath.Join(dir, "spec.go")
	if err := r.AddGoComments(pkgPath, spec); err != nil {
		return nil, fmt.Errorf("read the doc comments of %s: %w", spec, err)
	}
	// The library keys the comments by pkgPath joined with the file's directory as given, so
	// only a relative dir of "." matches the types' import path.
	if r.CommentMap[pkgPath+".ScenarioFile.Name"] == "" {
		return nil, fmt.Errorf("no doc comments read from %s: run the generator in the directory of package scenarios, with dir \".\"", spec)
	}
	// A type's doc comment speaks to Go readers ("X is ..."); only field comments, written for
	// the people who write scenario files, become descriptions.
	for key := range r.CommentMap {
		if !strings.Contains(strings.TrimPrefix(key, pkgPath+"."), ".") {
			delete(r.CommentMap, key)
		}
	}
	s := r.Reflect(&scenarios.ScenarioFile{})
	if err := rewrite(s); err != nil {
		return nil, err
	}
	s.ID = ID
	s.Title = title
	s.Description = about

	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("marshal the schema: %w", err)
	}
	return reorder(raw)
}

// named are the types kept in $defs even when used once: a scripted rule is handed on by
// itself, as JSON (scenarios.LLM.Rules, read by harness/llm.DecodeRules), so its shape has a name.
var named = []reflect.Type{reflect.TypeFor[scenarios.LLMRuleFile]()}

// defName names a type's entry in $defs the way a file names its key: AgentFile is "agent",
// LLMRuleFile "llmRule".
func defName(t reflect.Type) string {
	name := []rune(strings.TrimSuffix(t.Name(), "File"))
	for i := range name {
		// Lower the leading capitals, but the last of a run that starts a word ("LLMRule").
		if !unicode.IsUpper(name[i]) || i > 0 && i+1 < len(name) && unicode.IsLower(name[i+1]) {
			break
		}
		name[i] = unicode.ToLower(name[i])
	}
	return string(name)
}

// rewrite turns what the reflector produced into the schema the loader validates with:
//
//   - A type used once is written where it is used instead of in $defs, so that the file reads
//     as the scenario file does (and a nullable field can add null to it: a $ref cannot); a
//     type used more than once (agent), or named, stays in $defs.
//   - nullable: the reflector writes {oneOf: [S, {type: null}]}. The validator reports a
//     failing oneOf as one failure per branch ("got number, want object" and "got number,
//     want null"); S with type [T, null] is the same set of values and one message.
//   - shorthand=FIELD: the mapping may also be written as that field's value alone. It becomes
//     type [string, object] with the field's string keywords beside the object's: each keyword
//     applies to values of its own type only. A oneOf would again report every branch, where
//     `world: {options: {}}` should say only that name is missing.
//   - propertyNames=PATTERN (the reflector has no keyword for a mapping's keys) becomes
//     propertyNames: {pattern: PATTERN}.
//   - const and enum drop the type the reflector gives them: the validator stops at a failing
//     type, and "got 5, want one of allow, verify, ..." says more than "got number, want string".
//   - Descriptions join the lines of their doc comments.
func rewrite(root *jsonschema.Schema) error {
	defs := root.Definitions
	uses := map[string]int{}
	count := func(s *jsonschema.Schema) error {
		if name, ok := strings.CutPrefix(s.Ref, "#/$defs/"); ok {
			uses[name]++
		}
		return nil
	}
	_ = walk(root, count)
	for _, def := range defs {
		_ = walk(def, count)
	}
	keep := func(name string) bool {
		for _, t := range named {
			if defName(t) == name {
				return true
			}
		}
		return uses[name] > 1
	}
	inline := func(s *jsonschema.Schema) error {
		name, ok := strings.CutPrefix(s.Ref, "#/$defs/")
		if !ok || keep(name) {
			return nil
		}
		def, ok := defs[name]
		if !ok {
			return fmt.Errorf("$ref to %q, which is not in $defs", name)
		}
		ref := *s
		*s = *def
		if ref.Description != "" {
			s.Description = ref.Description
		}
		for k, v := range ref.Extras {
			setExtra(s, k, v)
		}
		return nil
	}
	// Inline from the root and the kept defs down: a def inlined brings its own refs along,
	// and they are visited next.
	if err := walk(root, inline); err != nil {
		return err
	}
	for name, def := range defs {
		if keep(name) {
			if err := walk(def, inline); err != nil {
				return err
			}
		}
	}
	for name := range defs {
		if !keep(name) {
			delete(defs, name)
		}
	}
	if len(defs) == 0 {
		root.Definitions = nil
	}
	all := []*jsonschema.Schema{root}
	for _, def := range defs {
		all = append(all, def)
	}
	for _, s := range all {
		if err := walk(s, local); err != nil {
			return err
		}
	}
	return nil
}

// local rewrites one schema (see rewrite); its subschemas are visited after it.
func local(s *jsonschema.Schema) error {
	if len(s.OneOf) == 2 && s.OneOf[1].Type == "null" {
		inner := s.OneOf[0]
		if inner.Type == "" || inner.Ref != "" {
			return fmt.Errorf("nullable: cannot add null to a schema without a type of its own (%+v)", inner)
		}
		*s = *inner
		setExtra(s, "type", []string{s.Type, "null"})
		s.Type = ""
	}
	if field, ok := s.Extras["shorthand"].(string); ok {
		delete(s.Extras, "shorthand")
		prop, ok := s.Properties.Get(field)
		if !ok || s.Type != "object" || prop.Type != "string" {
			return fmt.Errorf("shorthand=%s: want an object with a string property %q", field, field)
		}
		setExtra(s, "type", []string{"string", "object"})
		s.Type = ""
		s.Pattern, s.MinLength, s.MaxLength = prop.Pattern, prop.MinLength, prop.MaxLength
	}
	if pattern, ok := s.Extras["propertyNames"].(string); ok {
		delete(s.Extras, "propertyNames")
		s.PropertyNames = &jsonschema.Schema{Pattern: pattern}
	}
	if _, isConst := s.Extras["const"]; isConst || len(s.Enum) > 0 {
		s.Type = ""
	}
	s.Description = strings.Join(strings.Fields(s.Description), " ")
	if len(s.Extras) == 0 {
		s.Extras = nil
	}
	return nil
}

func setExtra(s *jsonschema.Schema, key string, v any) {
	if s.Extras == nil {
		s.Extras = map[string]any{}
	}
	s.Extras[key] = v
}

// walk calls fn on s and then on every subschema, depth first; fn may replace a schema's
// content, and the walk then descends into the new content.
func walk(s *jsonschema.Schema, fn func(*jsonschema.Schema) error) error {
	if s == nil {
		return nil
	}
	if err := fn(s); err != nil {
		return err
	}
	var subs []*jsonschema.Schema
	if s.Properties != nil {
		for p := s.Properties.Oldest(); p != nil; p = p.Next() {
			subs = append(subs, p.Value)
		}
	}
	subs = append(subs, s.Items, s.AdditionalProperties, s.PropertyNames, s.Not, s.If, s.Then, s.Else, s.Contains)
	subs = append(subs, s.AllOf...)
	subs = append(subs, s.AnyOf...)
	subs = append(subs, s.OneOf...)
	subs = append(subs, s.PrefixItems...)
	for _, sub := range subs {
		// The reflector's true and false schemas are shared values: never rewrite them.
		if sub == jsonschema.TrueSchema || sub == jsonschema.FalseSchema {
			continue
		}
		if err := walk(sub, fn); err != nil {
			return err
		}
	}
	return nil
}
