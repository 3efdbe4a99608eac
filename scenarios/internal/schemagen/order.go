package schemagen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// keywordOrder is the order a schema's keywords are written in, so that a person reads what a
// value is before its parts: identity, description, type and constraints, then the members.
// Keywords not listed follow, in the order they came, and $defs comes last.
var keywordOrder = []string{
	"$schema", "$id", "$ref", "title", "description",
	"type", "const", "enum", "pattern", "minLength", "maxLength",
	"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "minItems", "maxItems", "items",
	"required", "properties", "propertyNames", "additionalProperties",
}

// Where a schema's keywords hold schemas: one, a list of them, or a mapping of names to them.
var (
	oneSchema   = []string{"items", "additionalProperties", "propertyNames", "not", "if", "then", "else", "contains"}
	schemaList  = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	schemaByKey = []string{"properties", "$defs", "patternProperties", "dependentSchemas"}
)

// object is a JSON object that keeps its keys' order.
type object struct {
	keys []string
	vals map[string]any
}

// reorder rewrites the JSON schema raw with each schema's keywords in keywordOrder and
// indents it; property names keep the order of the Go fields.
func reorder(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeOrdered(dec)
	if err != nil {
		return nil, fmt.Errorf("read the generated schema: %w", err)
	}
	var b bytes.Buffer
	if err := encodeOrdered(&b, v, true); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("indent the schema: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func decodeOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &object{vals: map[string]any{}}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			o.keys = append(o.keys, k.(string))
			o.vals[k.(string)] = v
		}
		_, err := dec.Token() // }
		return o, err
	case json.Delim('['):
		list := []any{}
		for dec.More() {
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token() // ]
		return list, err
	}
	return tok, nil
}

// encodeOrdered writes v compactly; schema says v is a schema, whose keywords are ordered.
func encodeOrdered(b *bytes.Buffer, v any, schema bool) error {
	switch v := v.(type) {
	case *object:
		keys := v.keys
		if schema {
			keys = slices.Clone(keys)
			slices.SortStableFunc(keys, func(x, y string) int { return rank(x) - rank(y) })
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := encodeScalar(b, k); err != nil {
				return err
			}
			b.WriteByte(':')
			var err error
			switch {
			case !schema:
				err = encodeOrdered(b, v.vals[k], false)
			case slices.Contains(oneSchema, k):
				err = encodeOrdered(b, v.vals[k], true)
			case slices.Contains(schemaList, k):
				err = encodeList(b, v.vals[k], true)
			case slices.Contains(schemaByKey, k):
				err = encodeMembers(b, v.vals[k])
			default:
				err = encodeOrdered(b, v.vals[k], false)
			}
			if err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	case []any:
		return encodeList(b, v, false)
	}
	return encodeScalar(b, v)
}

// encodeMembers writes a mapping of names to schemas, the names in their order.
func encodeMembers(b *bytes.Buffer, v any) error {
	o, ok := v.(*object)
	if !ok {
		return fmt.Errorf("want a mapping of schemas, got %T", v)
	}
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := encodeScalar(b, k); err != nil {
			return err
		}
		b.WriteByte(':')
		if err := encodeOrdered(b, o.vals[k], true); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

func encodeList(b *bytes.Buffer, v any, schemas bool) error {
	list, ok := v.([]any)
	if !ok {
		return fmt.Errorf("want a list, got %T", v)
	}
	b.WriteByte('[')
	for i, item := range list {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := encodeOrdered(b, item, schemas); err != nil {
			return err
		}
	}
	b.WriteByte(']')
	return nil
}

// encodeScalar writes a string, number, boolean or null without escaping <, > and & for HTML:
// the file is read by editors, not browsers.
func encodeScalar(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode ends with a newline
	return nil
}

func rank(keyword string) int {
	if i := slices.Index(keywordOrder, keyword); i >= 0 {
		return i
	}
	if keyword == "$defs" {
		return len(keywordOrder) + 1
	}
	return len(keywordOrder)
}
