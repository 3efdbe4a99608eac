package expr_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/overnight-dev/overnight/scenarios/expr"
)

// A lookup of etcd: the body of its probe request, built from the effect's
// args, and the predicate that says whether the key was found in etcd's answer.
func Example() {
	ctx := context.Background()
	body, err := expr.Compile(`{"key": args.key}`, expr.JSON, expr.Args)
	if err != nil {
		fmt.Println(err)
		return
	}
	found, err := expr.Compile(`has(response.count) && int(response.count) > 0`, expr.Bool, expr.Args, expr.Response)
	if err != nil {
		fmt.Println(err)
		return
	}

	var args, response any
	_ = json.Unmarshal([]byte(`{"key": "Zm9v", "value": "YmFy"}`), &args)
	request, err := body.EvalJSON(ctx, map[string]any{"args": args})
	fmt.Println(string(request), err)

	// What etcd answered to POST /v3/kv/range with that body.
	_ = json.Unmarshal([]byte(`{"header": {"revision": "7"}, "kvs": [{"key": "Zm9v", "value": "YmFy", "version": "1"}], "count": "1"}`), &response)
	ok, err := found.EvalBool(ctx, map[string]any{"args": args, "response": response})
	fmt.Println(ok, err)
	// Output:
	// {"key":"Zm9v"} <nil>
	// true <nil>
}

// A problem is positioned inside the expression; a caller adds the line and
// column to where the expression is written in its file.
func ExampleCompile() {
	_, err := expr.Compile("int(state.count) == 1", expr.Bool, expr.Args, expr.Response)
	fmt.Println(err)
	_, err = expr.Compile("args.key + '/'", expr.Bool, expr.Args)
	fmt.Println(err)

	var e *expr.Error
	_, err = expr.Compile("has(response.kvs) &&\n  response.kvs.size() > limit", expr.Bool, expr.Response)
	if errors.As(err, &e) {
		fmt.Printf("line %d, column %d, offset %d: %s\n", e.Line, e.Column, e.Offset, e.Msg)
	}
	// Output:
	// expression `int(state.count) == 1` at column 5: undeclared reference to 'state'; this expression may use args, response
	// expression `args.key + '/'` at column 1: yields a string, want a bool
	// line 2, column 25, offset 45: undeclared reference to 'limit'; this expression may use response
}

// An identity names what a request acts on; two requests with one identity
// act on the same thing.
func ExampleProgram_EvalString() {
	identity, err := expr.Compile(`string(base64.decode(args.key))`, expr.String, expr.Args)
	if err != nil {
		fmt.Println(err)
		return
	}
	var args any
	_ = json.Unmarshal([]byte(`{"key": "Zm9v", "value": "YmFy"}`), &args)
	fmt.Println(identity.EvalString(context.Background(), map[string]any{"args": args}))

	_ = json.Unmarshal([]byte(`{"key": "not base64"}`), &args)
	_, err = identity.EvalString(context.Background(), map[string]any{"args": args})
	fmt.Println(err)
	// Output:
	// foo <nil>
	// expression `string(base64.decode(args.key))` at column 21: illegal base64 data at input byte 3
}

// A goal's expectation over a world's answer: etcd sends its counters as
// strings, int() reads them.
func ExampleProgram_EvalBool() {
	expect, err := expr.Compile(`response.kvs.exists(kv, kv.key == "Zm9v" && int(kv.version) == 1)`, expr.Bool, expr.Response)
	if err != nil {
		fmt.Println(err)
		return
	}
	var response any
	_ = json.Unmarshal([]byte(`{"kvs": [{"key": "Zm9v", "value": "YmFy", "version": "2"}], "count": "1"}`), &response)
	fmt.Println(expect.EvalBool(context.Background(), map[string]any{"response": response}))
	// Output: false <nil>
}
