package scenarios

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Bounds on what a scenario file may hold, so that a hostile or broken file costs little.
const (
	// MaxFileSize is the largest scenario file Parse accepts, in bytes.
	MaxFileSize = 1 << 20
	// maxValues bounds the values of the document after alias expansion (a "billion laughs"
	// file stops here instead of exhausting memory).
	maxValues = 100_000
	// maxDepth bounds the nesting of mappings and sequences.
	maxDepth = 64
)

// located ties a value of the converted tree, by its JSON pointer, to the YAML it came from.
type located struct {
	key   *yaml.Node // the mapping key, nil for the root and for sequence items
	value *yaml.Node // the value as written (an alias node where one was used)
	path  string     // the field's path for messages: "agent.env.FOO", "faults[2]"
}

// tree is a YAML document converted to JSON-compatible values — map[string]any, []any, string,
// bool, nil, int64 (integers that fit) and float64 (every other number, always finite) — with
// the position of every value, keyed by JSON pointer.
type tree struct {
	root     any
	rootNode *yaml.Node
	at       map[string]*located
	poisoned []string // pointers whose value could not be converted (already reported)
}

// parseYAML decodes data into a tree, reporting problems to sink. It returns nil when the
// document is unusable (not YAML, empty, not a mapping, too large).
func parseYAML(data []byte, sink *errorSink) *tree {
	if !checkText(data, sink) {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			sink.add(1, 1, "empty scenario file: want a mapping that starts with apiVersion: overnight/v1 and kind: Scenario")
			return nil
		}
		reportSyntax(data, err, sink)
		return nil
	}
	// Later documents: empty ones (a trailing '---') are harmless, anything else is a mistake.
	// Each document takes at least one byte, so this loop ends within len(data) rounds.
	for range len(data) + 1 {
		var next yaml.Node
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			reportSyntax(data, err, sink)
			return nil
		}
		if !isEmptyDocument(&next) {
			sink.add(next.Line, next.Column, "a scenario file holds one YAML document; remove this '---' and what follows, or put it in its own file")
			return nil
		}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		what := describeNode(root)
		if what == "null" {
			sink.add(root.Line, root.Column, "empty scenario: want a mapping that starts with apiVersion: overnight/v1 and kind: Scenario")
		} else {
			sink.add(root.Line, root.Column, "a scenario must be a YAML mapping (apiVersion: overnight/v1, kind: Scenario, ...), not %s", what)
		}
		return nil
	}
	c := converter{sink: sink, t: &tree{rootNode: root, at: map[string]*located{"": {value: root}}}, onStack: map[*yaml.Node]bool{}}
	v, _ := c.value(root, "", "", 0)
	if c.aborted {
		return nil
	}
	c.t.root = v
	return c.t
}

// isEmptyDocument reports whether n is a document with nothing in it, as a trailing '---' makes.
func isEmptyDocument(n *yaml.Node) bool {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	return n.Kind == 0 || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" && n.Value == ""
}

// describeNode names what a node is, for messages.
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return fmt.Sprintf("the string %q", truncate(n.Value, 40))
		default:
			return fmt.Sprintf("the scalar %s", truncate(n.Value, 40))
		}
	}
	return "empty"
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// checkText refuses input yaml.v3 would refuse without a position: too large, not UTF-8, or with
// characters YAML does not allow. It reports the exact position of the first offending byte.
func checkText(data []byte, sink *errorSink) bool {
	if len(data) > MaxFileSize {
		sink.add(1, 1, "scenario file is larger than the limit of %d bytes (keep large data out of the scenario)", MaxFileSize)
		return false
	}
	for off := 0; off < len(data); {
		r, size := utf8.DecodeRune(data[off:])
		if r == utf8.RuneError && size == 1 {
			line, col := textPos(data, off)
			sink.add(line, col, "not UTF-8 text (byte 0x%02x); a scenario file is UTF-8 YAML", data[off])
			return false
		}
		if !yamlPrintable(r) && !(off == 0 && r == '\uFEFF') {
			line, col := textPos(data, off)
			sink.add(line, col, "character %U is not allowed in YAML (is this a binary file?)", r)
			return false
		}
		off += size
	}
	return true
}

// yamlPrintable is YAML's set of allowed characters, as yaml.v3's reader checks it.
func yamlPrintable(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0x7E || r == 0x85 ||
		r >= 0xA0 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}

// textPos converts a byte offset into the 1-based line and column yaml.v3 would report: lines
// break at \n, \r\n, \r, U+0085, U+2028 and U+2029; columns count characters.
func textPos(data []byte, off int) (line, col int) {
	line, col = 1, 1
	i := 0
	if bytes.HasPrefix(data, []byte("\uFEFF")) {
		i = 3
	}
	for i < off && i < len(data) {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == '\r' && i+1 < len(data) && data[i+1] == '\n':
			size = 2
			fallthrough
		case r == '\n' || r == '\r' || r == 0x85 || r == 0x2028 || r == 0x2029:
			line, col = line+1, 1
		default:
			col++
		}
		i += size
	}
	return line, col
}

// lineStart returns the byte offset of the start of the 1-based line, or -1 if there is none.
func lineStart(data []byte, line int) int {
	if line == 1 {
		return 0
	}
	l := 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			size = 2
		}
		i += size
		if r == '\n' || r == '\r' || r == 0x85 || r == 0x2028 || r == 0x2029 {
			l++
			if l == line {
				return i
			}
		}
	}
	return -1
}

var (
	syntaxLine    = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	unknownAnchor = regexp.MustCompile(`^yaml: unknown anchor '(.*)' referenced$`)
)

// reportSyntax turns a yaml.v3 syntax error into a positioned error. yaml.v3 gives a line but no
// column (and no line for problems on the first line), so the column is best effort: the first
// non-blank character of that line. An unknown anchor is located by searching for its use.
func reportSyntax(data []byte, err error, sink *errorSink) {
	msg := err.Error()
	line := 1
	if m := syntaxLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	} else if m := unknownAnchor.FindStringSubmatch(msg); m != nil {
		if i := bytes.Index(data, []byte("*"+m[1])); i >= 0 {
			l, c := textPos(data, i)
			sink.add(l, c, "invalid YAML: alias *%s refers to no anchor &%s defined before it", m[1], m[1])
			return
		}
		msg = strings.TrimPrefix(msg, "yaml: ")
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	col := 1
	if start := lineStart(data, line); start >= 0 {
		rest := data[start:]
		end := bytes.IndexAny(rest, "\r\n")
		if end < 0 {
			end = len(rest)
		}
		text := string(rest[:end])
		trimmed := strings.TrimLeft(text, " \t")
		if trimmed != "" {
			col = utf8.RuneCountInString(text[:len(text)-len(trimmed)]) + 1
		}
	}
	sink.add(line, col, "invalid YAML: %s", msg)
}

// converter turns yaml.Nodes into the tree, recording positions and reporting what JSON cannot
// hold (non-string keys, non-finite numbers, unknown tags), duplicate keys and alias abuse.
type converter struct {
	sink    *errorSink
	t       *tree
	values  int
	aborted bool
	onStack map[*yaml.Node]bool // collections being converted, to catch an alias to an ancestor
}

func (c *converter) fail(n *yaml.Node, ptr string, format string, args ...any) (any, bool) {
	c.sink.addAt(ptr, n.Line, n.Column, format, args...)
	c.t.poisoned = append(c.t.poisoned, ptr)
	return nil, false
}

// value converts n, found at JSON pointer ptr and shown as path in messages.
func (c *converter) value(n *yaml.Node, ptr, path string, depth int) (any, bool) {
	if c.aborted {
		return nil, false
	}
	c.values++
	if c.values > maxValues {
		c.aborted = true
		return c.fail(n, ptr, "%sthe document holds more than %d values once aliases are expanded", at(path), maxValues)
	}
	if depth > maxDepth {
		c.aborted = true
		return c.fail(n, ptr, "%snested more than %d levels deep", at(path), maxDepth)
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil || c.onStack[n.Alias] {
			return c.fail(n, ptr, "%salias *%s refers to a value that contains it", at(path), n.Value)
		}
		return c.value(n.Alias, ptr, path, depth+1)
	case yaml.ScalarNode:
		return c.scalar(n, ptr, path)
	case yaml.SequenceNode:
		if tag := n.ShortTag(); tag != "!!seq" {
			return c.fail(n, ptr, "%sunsupported YAML tag %s on a list", at(path), n.Tag)
		}
		c.onStack[n] = true
		defer delete(c.onStack, n)
		out := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			childPtr := ptr + "/" + strconv.Itoa(i)
			childPath := fmt.Sprintf("%s[%d]", path, i)
			c.t.at[childPtr] = &located{value: item, path: childPath}
			v, _ := c.value(item, childPtr, childPath, depth+1)
			out = append(out, v)
		}
		return out, true
	case yaml.MappingNode:
		if tag := n.ShortTag(); tag != "!!map" {
			return c.fail(n, ptr, "%sunsupported YAML tag %s on a mapping", at(path), n.Tag)
		}
		return c.mapping(n, ptr, path, depth)
	}
	return c.fail(n, ptr, "%sunexpected YAML node", at(path))
}

// mapping converts a mapping. Merge keys (<<) are applied first, later sources before earlier
// ones, so that earlier sources and then the mapping's own keys win, as YAML 1.1 specifies.
func (c *converter) mapping(n *yaml.Node, ptr, path string, depth int) (any, bool) {
	c.onStack[n] = true
	defer delete(c.onStack, n)
	out := map[string]any{}
	seen := map[string]*yaml.Node{}
	var merges []*yaml.Node
	type member struct {
		key   string
		k, v  *yaml.Node
		child string
	}
	var members []member
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			if prev := seen["<<"]; prev != nil {
				c.sink.addAt(ptr, k.Line, k.Column, "%smerge key << already used at line %d column %d; merge several mappings with << [*a, *b]", at(path), prev.Line, prev.Column)
				continue
			}
			seen["<<"] = k
			merges = append(merges, v)
			continue
		}
		key, ok := c.key(k, ptr, path)
		if !ok {
			continue
		}
		if prev := seen[key]; prev != nil {
			c.sink.addAt(ptr, k.Line, k.Column, "%sduplicate key %q (first defined at line %d column %d)", at(path), key, prev.Line, prev.Column)
			continue
		}
		seen[key] = k
		members = append(members, member{key: key, k: k, v: v, child: ptr + "/" + escapePointer(key)})
	}
	for _, m := range merges {
		sources := []*yaml.Node{m}
		if target := deref(m); target.Kind == yaml.SequenceNode {
			sources = target.Content
		}
		for i := len(sources) - 1; i >= 0; i-- {
			src := sources[i]
			if deref(src).Kind != yaml.MappingNode {
				c.sink.addAt(ptr, src.Line, src.Column, "%s<< merges a mapping or a list of mappings, not %s", at(path), describeNode(deref(src)))
				continue
			}
			v, ok := c.value(src, ptr, path, depth+1)
			if merged, isMap := v.(map[string]any); ok && isMap {
				for key, val := range merged {
					out[key] = val
				}
			}
		}
	}
	for _, m := range members {
		childPath := joinPath(path, m.key)
		c.t.at[m.child] = &located{key: m.k, value: m.v, path: childPath}
		v, _ := c.value(m.v, m.child, childPath, depth+1)
		out[m.key] = v
	}
	return out, true
}

// deref follows an alias to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; i < 100 && n.Kind == yaml.AliasNode && n.Alias != nil; i++ {
		n = n.Alias
	}
	return n
}

// key returns a mapping key as a string; JSON keys are strings, so a key must be a scalar.
func (c *converter) key(k *yaml.Node, ptr, path string) (string, bool) {
	target := deref(k)
	if target.Kind != yaml.ScalarNode {
		c.sink.addAt(ptr, k.Line, k.Column, "%sa key must be a plain value such as a name, not %s", at(path), describeNode(target))
		return "", false
	}
	return target.Value, true
}

// scalar converts a scalar by its resolved tag.
func (c *converter) scalar(n *yaml.Node, ptr, path string) (any, bool) {
	switch tag := n.ShortTag(); tag {
	case "!!str", "!!timestamp", "!!binary":
		// Timestamps and binary stay the text as written: JSON has no such types.
		return n.Value, true
	case "!!null":
		return nil, true
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return c.fail(n, ptr, "%s%q is not a boolean", at(path), n.Value)
		}
		return b, true
	case "!!int":
		var v any
		if err := n.Decode(&v); err != nil {
			return c.fail(n, ptr, "%s%q is not an integer", at(path), n.Value)
		}
		switch v := v.(type) {
		case int:
			return int64(v), true
		case int64:
			return v, true
		case uint64:
			return float64(v), true
		}
		return c.fail(n, ptr, "%s%q is not an integer", at(path), n.Value)
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return c.fail(n, ptr, "%s%q is not a number", at(path), n.Value)
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return c.fail(n, ptr, "%s%s is not a number JSON can carry; quote it if you mean the text", at(path), n.Value)
		}
		return f, true
	default:
		return c.fail(n, ptr, "%sunsupported YAML tag %s (scenario files use plain YAML values)", at(path), n.Tag)
	}
}

// escapePointer escapes one JSON pointer token (RFC 6901).
func escapePointer(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// pointer joins JSON pointer tokens (as jsonschema reports an instance location).
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapePointer(t))
	}
	return b.String()
}

// joinPath appends a mapping key to a field path for messages.
func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// at prefixes a message with the field's path; messages about the whole document have none.
func at(path string) string {
	if path == "" {
		return ""
	}
	return path + ": "
}
