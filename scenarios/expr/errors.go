package expr

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Sentinel errors callers branch on. They are wrapped in an *Error, so test
// with errors.Is. An interrupted evaluation wraps the context's error
// (context.Canceled, context.DeadlineExceeded) the same way.
var (
	// ErrCostLimit: the evaluation passed MaxCost and was stopped.
	ErrCostLimit = errors.New("expression cost limit exceeded")
	// ErrResultType: the expression yields, or yielded, a value of another
	// type than its place needs (a string where a predicate needs a bool, a
	// timestamp where a body needs JSON).
	ErrResultType = errors.New("expression yields the wrong type")
)

// Error is a problem with one expression, at a position inside it: a syntax
// or type error from Compile, or a failure of Eval (a missing key, a string
// int() cannot read, the cost limit). Line and Column are 1-based and count
// characters, as editors do; Offset is the same position as a 0-based count
// of characters from the start of the expression. A caller that knows where
// the expression is written (a YAML value) adds these to that position.
type Error struct {
	Expr   string // the expression's source
	Line   int
	Column int
	Offset int
	Msg    string // what is wrong, without the position
	Err    error  // a sentinel or a context error this problem wraps, or nil
}

// Error implements error: "expression `SOURCE` at column N: MSG" ("at line L,
// column N" when the expression spans lines). A long source is shortened.
func (e *Error) Error() string {
	where := fmt.Sprintf("column %d", e.Column)
	if strings.ContainsRune(e.Expr, '\n') {
		where = fmt.Sprintf("line %d, column %d", e.Line, e.Column)
	}
	return fmt.Sprintf("expression `%s` at %s: %s", shorten(e.Expr), where, e.Msg)
}

// Unwrap returns the sentinel or context error, for errors.Is.
func (e *Error) Unwrap() error { return e.Err }

// errorAt makes an *Error at a 0-based character offset of src.
func errorAt(src string, offset int, wrapped error, format string, args ...any) *Error {
	line, col := lineColumn(src, offset)
	return &Error{Expr: src, Line: line, Column: col, Offset: offset, Msg: fmt.Sprintf(format, args...), Err: wrapped}
}

// lineColumn turns a 0-based character offset into a 1-based line and column.
// An offset out of range is clamped to the source.
func lineColumn(src string, offset int) (line, column int) {
	line, column = 1, 1
	i := 0
	for _, r := range src {
		if i == offset {
			break
		}
		i++
		if r == '\n' {
			line, column = line+1, 1
		} else {
			column++
		}
	}
	return line, column
}

// offsetOf turns a 1-based line and 0-based column (cel-go's common.Location)
// into a 0-based character offset of src.
func offsetOf(src string, line, column int) int {
	offset, l := 0, 1
	for _, r := range src {
		if l >= line {
			break
		}
		offset++
		if r == '\n' {
			l++
		}
	}
	return offset + max(column, 0)
}

// shorten gives a one-line form of an expression for messages: runs of white
// space as one space, at most 60 characters.
func shorten(src string) string {
	const most = 60
	src = strings.Join(strings.FieldsFunc(src, unicode.IsSpace), " ")
	if r := []rune(src); len(r) > most {
		return string(r[:most-1]) + "…"
	}
	return src
}
