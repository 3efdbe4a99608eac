package scenarios

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Sentinel errors callers branch on. They are wrapped, so test with errors.Is.
var (
	// ErrUnknownScenario: Resolve found neither a file nor a built-in scenario by that name.
	ErrUnknownScenario = errors.New("unknown scenario")
	// ErrUnknownAgent: SelectAgent was asked for a variant the scenario does not declare.
	ErrUnknownAgent = errors.New("unknown agent variant")
)

// Error is one problem in a scenario file, at a position in it. Line and Column are 1-based;
// Column counts characters, as editors do.
type Error struct {
	File   string // the file name given to Parse, or "builtin:<name>"
	Line   int
	Column int
	Msg    string // what is wrong, starting with the field's path when there is one
	// Pointer is the JSON pointer (RFC 6901) of the value the problem is about, such as
	// "/faults/2", "/limits/timeout" or, for a missing field, "/world/name"; for a problem of
	// a mapping's keys (a duplicate, a name that does not match, two agent sources), the
	// mapping's, such as "/agent/env"; "" for the document as a whole, or a problem of its
	// text (not UTF-8, not YAML) that no value owns.
	Pointer string
}

// Error implements error: "file:line:column: msg".
func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

// ErrorList is every problem found in a scenario file, sorted by position. Parse returns an
// ErrorList when there is more than one problem and a single *Error otherwise.
type ErrorList []*Error

// Error implements error: one "file:line:column: msg" per line.
func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap lets errors.As find each *Error.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Problems returns the positioned problems err holds — the *Error or ErrorList of Parse,
// Validate or ErrorAt, possibly wrapped — and false when it holds none (a file that could not
// be read, an unknown scenario).
func Problems(err error) (ErrorList, bool) {
	var list ErrorList
	var one *Error
	switch {
	case errors.As(err, &list):
		return list, true
	case errors.As(err, &one):
		return ErrorList{one}, true
	}
	return nil, false
}

// errorSink collects positioned errors for one file.
type errorSink struct {
	file string
	errs ErrorList
}

// add reports a problem of the document as a whole, or of its text.
func (s *errorSink) add(line, col int, format string, args ...any) {
	s.addAt("", line, col, format, args...)
}

// addAt reports a problem with the value at JSON pointer ptr, written at line:col.
func (s *errorSink) addAt(ptr string, line, col int, format string, args ...any) {
	s.errs = append(s.errs, &Error{File: s.file, Line: max(line, 1), Column: max(col, 1), Msg: fmt.Sprintf(format, args...), Pointer: ptr})
}

// result is nil, the single error, or the sorted, de-duplicated list.
func (s *errorSink) result() error {
	if len(s.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(s.errs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column), strings.Compare(a.Msg, b.Msg))
	})
	s.errs = slices.CompactFunc(s.errs, func(a, b *Error) bool { return *a == *b })
	if len(s.errs) == 1 {
		return s.errs[0]
	}
	return s.errs
}
