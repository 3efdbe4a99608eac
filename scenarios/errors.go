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

// errorSink collects positioned errors for one file.
type errorSink struct {
	file string
	errs ErrorList
}

func (s *errorSink) add(line, col int, format string, args ...any) {
	s.errs = append(s.errs, &Error{File: s.file, Line: max(line, 1), Column: max(col, 1), Msg: fmt.Sprintf(format, args...)})
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
