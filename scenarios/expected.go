package scenarios

import (
	"slices"
	"strconv"
	"strings"
)

// Expected says in one line what the schema expects of the value at a JSON pointer of a
// scenario file — its type and constraints, then its description — for messages such as
// `overnight validate`'s:
//
//	Expected("/limits/max_attempts") == "an integer from 1 to 1000 — Maximum number of attempts (default 10)."
//
// A list's item or a mapping's value without a description of its own takes its container's;
// the document as a whole (pointer "") is only its shape. It returns "" where the
// schema says nothing: an unknown key, or inside a free-form value (task, world options, tool
// call arguments).
func Expected(pointer string) string {
	if pointer != "" && !strings.HasPrefix(pointer, "/") {
		return ""
	}
	node, inherited := compiledSchema().doc, ""
	if pointer != "" {
		for _, tok := range strings.Split(pointer[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			parent := resolveRef(node)
			child, item := childSchema(parent, tok)
			if child == nil {
				return ""
			}
			inherited = ""
			if item {
				inherited = descriptionOf(node)
			}
			node = child
		}
	}
	description := descriptionOf(node)
	if pointer == "" {
		description = "" // the root's says what the schema is, not what a file holds
	}
	if description == "" {
		description = inherited
	}
	shape := shapeOf(node)
	switch {
	case shape == "":
		return description
	case description == "":
		return shape
	}
	return shape + " — " + description
}

// descriptionOf is a schema's description: its own, else that of the definition it refers to.
func descriptionOf(node map[string]any) string {
	if d, ok := node["description"].(string); ok {
		return d
	}
	if d, ok := resolveRef(node)["description"].(string); ok {
		return d
	}
	return ""
}

// resolveRef follows a local $ref ("#/$defs/agent") in the schema document.
func resolveRef(node map[string]any) map[string]any {
	ref, ok := node["$ref"].(string)
	if !ok {
		return node
	}
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	if !ok {
		return node
	}
	defs, _ := compiledSchema().doc["$defs"].(map[string]any)
	if def, ok := defs[name].(map[string]any); ok {
		return def
	}
	return node
}

// childSchema is the schema of member tok of a value of schema node — a property, or one of
// the values of a mapping or a list (then item is true) — or nil if the schema does not say.
func childSchema(node map[string]any, tok string) (child map[string]any, item bool) {
	if props, ok := node["properties"].(map[string]any); ok {
		if p, ok := props[tok].(map[string]any); ok {
			return p, false
		}
	}
	if ap, ok := node["additionalProperties"].(map[string]any); ok {
		return ap, true
	}
	if items, ok := node["items"].(map[string]any); ok && tok != "" && strings.Trim(tok, "0123456789") == "" {
		return items, true
	}
	return nil, false
}

// shapeOf describes the values a schema accepts: "a string matching ^[a-z0-9][a-z0-9-]*$",
// "a mapping with keys name (required), options", "one of "allow", "deny"".
func shapeOf(node map[string]any) string {
	node = resolveRef(node)
	if c, ok := node["const"]; ok {
		return display(c)
	}
	if enum, ok := node["enum"].([]any); ok {
		want := make([]string, len(enum))
		for i, w := range enum {
			want[i] = display(w)
		}
		return "one of " + strings.Join(want, ", ")
	}
	var types []string
	switch t := node["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				types = append(types, s)
			}
		}
	}
	var alts []string
	for _, t := range types {
		if t != "null" {
			alts = append(alts, typeShape(node, t))
		}
	}
	shape := strings.Join(alts, " or ")
	if shape != "" && slices.Contains(types, "null") {
		shape += " (or nothing)"
	}
	return shape
}

// typeShape describes the values of one type that a schema accepts.
func typeShape(node map[string]any, typ string) string {
	num := func(key string) (string, bool) {
		v, ok := node[key].(float64)
		if !ok {
			return "", false
		}
		return strconv.FormatFloat(v, 'f', -1, 64), true
	}
	switch typ {
	case "string":
		s := "a string"
		if n, ok := num("minLength"); ok && n == "1" {
			s = "a non-empty string"
		}
		if p, ok := node["pattern"].(string); ok {
			s += " matching " + p
		}
		if n, ok := num("maxLength"); ok {
			s += " of at most " + n + " characters"
		}
		return s
	case "integer", "number":
		s := "an integer"
		if typ == "number" {
			s = "a number"
		}
		lo, hasLo := num("minimum")
		hi, hasHi := num("maximum")
		if x, ok := num("exclusiveMinimum"); ok {
			s += " greater than " + x
			if hasHi {
				s += " and at most " + hi
			}
			return s
		}
		switch {
		case hasLo && hasHi:
			return s + " from " + lo + " to " + hi
		case hasLo:
			return s + " of at least " + lo
		case hasHi:
			return s + " of at most " + hi
		}
		return s
	case "array":
		of := "items"
		if items, ok := node["items"].(map[string]any); ok {
			of = plural(shapeOf(items))
		}
		lo, hasLo := num("minItems")
		hi, hasHi := num("maxItems")
		switch {
		case hasLo && hasHi && lo == hi:
			return "a list of " + lo + " " + of
		case hasLo:
			return "a list of at least " + lo + " " + of
		}
		return "a list of " + of
	case "object":
		props, _ := node["properties"].(map[string]any)
		if len(props) > 0 {
			required, _ := node["required"].([]any)
			names := make([]string, 0, len(props))
			for p := range props {
				names = append(names, p)
			}
			slices.Sort(names)
			for i, p := range names {
				if slices.Contains(required, any(p)) {
					names[i] += " (required)"
				}
			}
			return "a mapping with keys " + strings.Join(names, ", ")
		}
		s := "a mapping"
		if pn, ok := node["propertyNames"].(map[string]any); ok {
			if p, ok := pn["pattern"].(string); ok {
				s += " of names matching " + p
			}
		}
		if ap, ok := node["additionalProperties"].(map[string]any); ok {
			if v := shapeOf(ap); v != "" {
				s += " to " + v
			}
		}
		return s
	case "boolean":
		return "true or false"
	}
	return typ
}

// plural turns the shape of one value into that of several: "a string matching X" into
// "strings matching X".
func plural(shape string) string {
	words := strings.Fields(shape)
	if len(words) > 0 && (words[0] == "a" || words[0] == "an") {
		words = words[1:]
	}
	for i, w := range words {
		if slices.Contains([]string{"string", "integer", "number", "list", "mapping"}, w) {
			words[i] += "s"
			return strings.Join(words, " ")
		}
	}
	return "items, each " + shape
}
