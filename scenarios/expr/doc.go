// Package expr owns the expressions of scenario files: the CEL (Common
// Expression Language, github.com/google/cel-go) in which a scenario says how
// to judge and reach a world the harness did not write — a probe's predicate
// (`found: 'int(response.count) > 0'`, `expect: 'int(response.count) == 1'`),
// a request's identity (`identity: args.key`) and a probe request's body
// (`body: '{"key": args.key}'`).
//
// Compile parses and type-checks an expression once, at validation time,
// against the variables its place in the file provides (Args, Response,
// State: each a JSON value) and what that place needs it to yield (Bool,
// String or JSON). A problem comes back as an *Error holding its line and
// column inside the expression, which the scenario layer adds to the
// position of the YAML value to report file:line:column. A Program is then
// evaluated any number of times, concurrently if need be, on JSON values as
// encoding/json decodes them; its result is converted back to such values,
// so a body can be marshalled as it is.
//
// The language is CEL's standard definitions plus cel-go's string extension
// (ext.Strings: split, replace, lowerAscii, substring, format, ...) and its
// encoders (base64.encode, base64.decode, json.encode). Every JSON number is
// a CEL double; comparisons across number types work (`response.n == 1`),
// and int() converts a double or a numeric string (etcd sends its int64s as
// strings) for integer arithmetic: `int(response.count) + 1`.
//
// Evaluation is bounded: a cost limit (MaxCost) stops a runaway expression,
// and the context interrupts a long one.
//
// What this package must not do: know the scenario file, a world or the
// harness. It imports no package of this module; callers decide which
// variables exist where and what a result means.
package expr
