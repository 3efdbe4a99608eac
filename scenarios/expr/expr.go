package expr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
)

// Var is a variable an expression may read. Each holds a JSON value (the
// type checker sees it as dyn), so `args.key`, `response.kvs[0]` and
// `has(state.networks)` all check, and what is really there is found out
// when the expression runs.
type Var string

// The variables of scenario files. Which of them an expression may use
// depends on where it is written; the caller declares them in Compile.
const (
	// Args is the request's arguments: an effect's args, or an HTTP
	// request's JSON body.
	Args Var = "args"
	// Response is what the world answered: a probe's or lookup's JSON body.
	Response Var = "response"
	// State is the world's state, as the world reports it.
	State Var = "state"
)

// Type is what an expression must yield, by the place it is written in.
type Type int

// The types an expression may be asked to yield.
const (
	// Bool is a predicate's: `found`, `expect`.
	Bool Type = iota + 1
	// String is an identity's: `identity: args.key`.
	String
	// JSON is any JSON value — null, a bool, a number, a string, a list or a
	// map with string keys — such as a request body: `{"key": args.key}`.
	JSON
)

// String names the type as messages do: "a bool", "a string", "a JSON value".
func (t Type) String() string {
	switch t {
	case Bool:
		return "a bool"
	case String:
		return "a string"
	case JSON:
		return "a JSON value"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// Limits of every expression.
const (
	// MaxCost is the cost, in cel-go's units (about one per operation, more
	// for operations on long strings and lists), past which an evaluation is
	// stopped with ErrCostLimit. A loop over an etcd range of 1,000 keys
	// costs about 7,000; loops nested over such lists reach the limit in a
	// tenth of a second or so.
	MaxCost = 100_000
	// MaxLength is the longest expression Compile accepts, in characters.
	MaxLength = 10_000
	// interruptEvery is how many iterations of a comprehension run between
	// two looks at the context.
	interruptEvery = 100
)

// Program is a compiled expression. It is safe for concurrent use.
type Program struct {
	source string
	want   Type
	vars   []Var
	prg    cel.Program
	ast    *cel.Ast
}

// Source is the expression as written.
func (p *Program) Source() string { return p.source }

// Want is what the expression must yield.
func (p *Program) Want() Type { return p.want }

// Vars are the variables the expression was compiled against, in the order
// given to Compile; Eval needs a value for each.
func (p *Program) Vars() []Var { return append([]Var(nil), p.vars...) }

// baseEnv is the environment every expression starts from: CEL's standard
// definitions and the extensions this package documents, without variables.
// The extensions' versions are pinned so that an upgrade of cel-go does not
// change the language of scenario files unseen.
var baseEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		ext.Strings(ext.StringsVersion(5)),
		ext.Encoders(ext.EncodersVersion(1)),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(MaxLength),
	)
})

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Compile parses and type-checks source as an expression that may read vars
// and must yield want. A syntax error, a reference to an undeclared variable
// or function, or a result that cannot be want (`args.key` where a bool is
// needed) is an *Error positioned inside source. A result the checker cannot
// know (any value read from a variable is dyn) is checked by Eval.
func Compile(source string, want Type, vars ...Var) (*Program, error) {
	if want < Bool || want > JSON {
		return nil, fmt.Errorf("compile expression: unknown result type %d (want expr.Bool, expr.String or expr.JSON)", int(want))
	}
	decls := make([]cel.EnvOption, 0, len(vars))
	seen := make(map[Var]bool, len(vars))
	for _, v := range vars {
		if !identifier.MatchString(string(v)) {
			return nil, fmt.Errorf("compile expression: variable name %q is not an identifier", v)
		}
		if seen[v] {
			return nil, fmt.Errorf("compile expression: variable %q declared twice", v)
		}
		seen[v] = true
		decls = append(decls, cel.Variable(string(v), cel.DynType))
	}
	if strings.TrimSpace(source) == "" {
		return nil, errorAt(source, 0, nil, "empty expression; want %s", want)
	}
	base, err := baseEnv()
	if err != nil {
		return nil, fmt.Errorf("compile expression: CEL environment: %w", err)
	}
	env, err := base.Extend(decls...)
	if err != nil {
		return nil, fmt.Errorf("compile expression: declare variables: %w", err)
	}
	ast, iss := env.Compile(source)
	if iss.Err() != nil {
		first := iss.Errors()[0]
		msg := strings.TrimSuffix(first.Message, " (in container '')")
		if strings.HasPrefix(msg, "undeclared reference to") {
			msg += "; " + mayUse(vars)
		}
		return nil, errorAt(source, offsetOf(source, first.Location.Line(), first.Location.Column()), nil, "%s", msg)
	}
	p := &Program{source: source, want: want, vars: append([]Var(nil), vars...), ast: ast}
	if got := ast.OutputType(); !yields(want, got) {
		return nil, errorAt(source, p.rootOffset(), ErrResultType, "yields %s, want %s", describeType(got), want)
	}
	p.prg, err = env.Program(ast, cel.CostLimit(MaxCost), cel.InterruptCheckFrequency(interruptEvery))
	if err != nil {
		return nil, errorAt(source, 0, nil, "%v", err)
	}
	return p, nil
}

// mayUse says which variables an expression may read, for an undeclared one.
func mayUse(vars []Var) string {
	if len(vars) == 0 {
		return "this expression may use no variables"
	}
	names := make([]string, len(vars))
	for i, v := range vars {
		names[i] = string(v)
	}
	return "this expression may use " + strings.Join(names, ", ")
}

// Eval runs the expression on vars — JSON values keyed by variable name, one
// for each variable given to Compile (others are ignored) — and returns its
// result as plain JSON values: map[string]any, []any, string, float64, bool
// or nil. The input may hold what encoding/json decodes (float64 numbers,
// json.Number, json.RawMessage) and any Go value that marshals to JSON;
// every number becomes a CEL double, except an integer too large for a
// double to hold exactly, which stays a CEL int. The result must be the
// Program's Want: a bool, a string, or a value JSON can carry (an integer
// result becomes a float64, and must fit one exactly).
//
// Every error is an *Error positioned at the part of the expression that
// failed (or the whole of it), wrapping ErrCostLimit, ErrResultType or the
// context's error where one of them is the cause.
func (p *Program) Eval(ctx context.Context, vars map[string]any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, errorAt(p.source, p.rootOffset(), err, "not evaluated: %v", err)
	}
	act := make(map[string]any, len(p.vars))
	for _, v := range p.vars {
		x, ok := vars[string(v)]
		if !ok {
			return nil, errorAt(p.source, p.rootOffset(), nil, "variable %s is not given a value", v)
		}
		val, err := toCEL(x)
		if err != nil {
			return nil, errorAt(p.source, p.rootOffset(), nil, "variable %s: %v", v, err)
		}
		act[string(v)] = val
	}
	out, _, err := p.prg.ContextEval(ctx, act)
	if err != nil {
		return nil, p.evalError(ctx, err)
	}
	res, err := toJSON(out, "")
	if err != nil {
		return nil, errorAt(p.source, p.rootOffset(), ErrResultType, "%v, want %s", err, p.want)
	}
	if err := p.checkAgainst(res, p.want); err != nil {
		return nil, err
	}
	return res, nil
}

// EvalBool evaluates a predicate: the expression must yield a bool.
func (p *Program) EvalBool(ctx context.Context, vars map[string]any) (bool, error) {
	v, err := p.evalAs(ctx, vars, Bool)
	if err != nil {
		return false, err
	}
	return v.(bool), nil
}

// EvalString evaluates an identity: the expression must yield a string.
func (p *Program) EvalString(ctx context.Context, vars map[string]any) (string, error) {
	v, err := p.evalAs(ctx, vars, String)
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

// EvalJSON evaluates a body: the expression's result, marshalled as JSON.
func (p *Program) EvalJSON(ctx context.Context, vars map[string]any) (json.RawMessage, error) {
	v, err := p.Eval(ctx, vars)
	if err != nil {
		return nil, err
	}
	body, err := marshal(v)
	if err != nil {
		return nil, errorAt(p.source, p.rootOffset(), nil, "marshal the result: %v", err)
	}
	return body, nil
}

// evalAs evaluates and checks the result against want, which may be
// narrower than the Program's own (a JSON program asked for a string).
func (p *Program) evalAs(ctx context.Context, vars map[string]any, want Type) (any, error) {
	v, err := p.Eval(ctx, vars)
	if err != nil {
		return nil, err
	}
	if err := p.checkAgainst(v, want); err != nil {
		return nil, err
	}
	return v, nil
}

// checkAgainst tells whether a converted result is of type want.
func (p *Program) checkAgainst(v any, want Type) error {
	ok := true
	switch want {
	case Bool:
		_, ok = v.(bool)
	case String:
		_, ok = v.(string)
	}
	if !ok {
		return errorAt(p.source, p.rootOffset(), ErrResultType, "got %s, want %s", describeJSON(v), want)
	}
	return nil
}

// evalError turns cel-go's evaluation error into an *Error at the node that
// failed.
func (p *Program) evalError(ctx context.Context, err error) error {
	var cancelled interpreter.EvalCancelledError
	if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
		return errorAt(p.source, p.rootOffset(), ErrCostLimit,
			"stopped: its cost passed the limit of %d (a loop over too much data, or loops nested too deep?)", MaxCost)
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return errorAt(p.source, p.rootOffset(), ctxErr, "interrupted: %v", ctxErr)
	}
	offset, msg := p.rootOffset(), err.Error()
	var celErr *types.Err
	if errors.As(err, &celErr) && celErr.NodeID() != 0 {
		node, ok := p.node(celErr.NodeID())
		if r, found := p.ast.NativeRep().SourceInfo().GetOffsetRange(celErr.NodeID()); ok && found {
			offset = int(r.Start)
		}
		if ok && node.Kind() == celast.CallKind && strings.HasPrefix(msg, "no such overload") {
			msg = noOverload(node.AsCall().FunctionName())
		}
	}
	return errorAt(p.source, offset, nil, "%s", msg)
}

// node finds the expression node with that id.
func (p *Program) node(id int64) (celast.NavigableExpr, bool) {
	found := celast.MatchDescendants(celast.NavigateAST(p.ast.NativeRep()), func(e celast.NavigableExpr) bool { return e.ID() == id })
	if len(found) == 0 {
		return nil, false
	}
	return found[0], true
}

// noOverload says that a function was called with values of types it does
// not take, with a hint for arithmetic, where a JSON number (a double) meets
// an int literal.
func noOverload(function string) string {
	if sym, ok := operators.FindReverse(function); ok {
		msg := fmt.Sprintf("no overload of `%s` takes values of these types", sym)
		switch sym {
		case "+", "-", "*", "/", "%":
			msg += " (every JSON number is a double: int() converts one, 1.0 is a double literal)"
		}
		return msg
	}
	return fmt.Sprintf("no overload of `%s()` takes values of these types", function)
}

// rootOffset is where the expression as a whole starts: its first character
// that is not white space.
func (p *Program) rootOffset() int {
	for i, r := range []rune(p.source) {
		if !unicode.IsSpace(r) {
			return i
		}
	}
	return 0
}

// yields tells whether an expression of static type t can yield want; dyn
// can (Eval checks the value).
func yields(want Type, t *types.Type) bool {
	switch t.Kind() {
	case types.DynKind, types.AnyKind:
		return true
	}
	switch want {
	case Bool:
		return t.Kind() == types.BoolKind
	case String:
		return t.Kind() == types.StringKind
	}
	return jsonType(t)
}

// jsonType tells whether values of static type t can be JSON.
func jsonType(t *types.Type) bool {
	switch t.Kind() {
	case types.DynKind, types.AnyKind, types.TypeParamKind, types.NullTypeKind,
		types.BoolKind, types.IntKind, types.UintKind, types.DoubleKind, types.StringKind:
		return true
	case types.ListKind:
		return jsonType(t.Parameters()[0])
	case types.MapKind:
		k := t.Parameters()[0].Kind()
		return (k == types.StringKind || k == types.DynKind || k == types.TypeParamKind) && jsonType(t.Parameters()[1])
	}
	return false
}

// describeType names a static type with an article: "an int", "a map(int, string)".
func describeType(t *types.Type) string {
	switch t.Kind() {
	case types.NullTypeKind:
		return "null"
	case types.BytesKind:
		return "bytes"
	case types.TimestampKind:
		return "a timestamp"
	case types.DurationKind:
		return "a duration"
	case types.TypeKind:
		return "a type"
	}
	return article(t.String())
}

func article(s string) string {
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}
