package expr_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/overnight-dev/overnight/scenarios/expr"
)

// FuzzCompile checks, for any text: Compile does not panic, and returns either a Program or an
// *expr.Error positioned inside the text (line and column >= 1, offset within it); and a Program
// it returns, evaluated on an etcd request and response, does not panic, stops within its
// bounds, fails only with an *expr.Error, and yields what it was compiled to yield, as JSON.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		"", " ", "\x00", "\xff", "(", "'", `"\u`, "args", "args.key", "int(response.count) == 1",
		"has(response.kvs) && response.kvs.exists(kv, string(base64.decode(kv.key)) == 'foo')",
		`{"key": args.key, "range_end": base64.encode(b"fop")}`, "[1, 2.0, 'x', null, {}]",
		"args.key.split('/').map(p, p.upperAscii()).join('-')", "state.networks.filter(n, n.ready).size()",
		"1 / 0", "1.0 / 0.0", "-9223372036854775808 - 1", "{1: 2}", "b'\\xff'", "timestamp('x')",
		"dyn(duration('1s'))", "json.encode(response)", "'%s'.format([args])", "[[[[[[[[[[1]]]]]]]]]]",
		"response.kvs.all(a, response.kvs.all(b, a == b))", "args.key ? 1 : 2", "a.b.c.d.e",
		"'é' + args.key\n  .lowerAscii()", "response.count.matches('[')",
	} {
		f.Add(s)
	}
	vars := map[string]any{
		"args":     decodedT(f, `{"key": "Zm9v", "value": "YmFy", "n": 3, "lease": "7587862072045997331"}`),
		"response": decodedT(f, etcdRange),
		"state":    decodedT(f, `{"networks": [{"name": "a", "ready": true}], "count": 1.5}`),
	}
	f.Fuzz(func(t *testing.T, source string) {
		for _, want := range []expr.Type{expr.Bool, expr.String, expr.JSON} {
			p, err := expr.Compile(source, want, expr.Args, expr.Response, expr.State)
			if err != nil {
				if p != nil {
					t.Fatalf("Compile returned both a Program and an error: %v", err)
				}
				checkPositioned(t, source, err)
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			start := time.Now()
			v, err := p.Eval(ctx, vars)
			cancel()
			if took := time.Since(start); took > 10*time.Second {
				t.Fatalf("Eval of %q took %v, past its bounds", source, took)
			}
			if err != nil {
				checkPositioned(t, source, err)
				continue
			}
			switch want {
			case expr.Bool:
				if _, ok := v.(bool); !ok {
					t.Fatalf("%q compiled for a bool yielded %T", source, v)
				}
			case expr.String:
				if _, ok := v.(string); !ok {
					t.Fatalf("%q compiled for a string yielded %T", source, v)
				}
			}
			if _, err := json.Marshal(v); err != nil {
				t.Fatalf("%q yielded %#v, which does not marshal: %v", source, v, err)
			}
		}
	})
}

// checkPositioned fails unless err is an *expr.Error inside source.
func checkPositioned(t *testing.T, source string, err error) {
	t.Helper()
	var e *expr.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T is not an *expr.Error: %v", err, err)
	}
	if e.Line < 1 || e.Column < 1 || e.Offset < 0 || e.Offset > utf8.RuneCountInString(source) {
		t.Fatalf("error outside the expression (line %d, column %d, offset %d of %d characters): %v",
			e.Line, e.Column, e.Offset, utf8.RuneCountInString(source), err)
	}
	if e.Msg == "" || e.Error() == "" {
		t.Fatalf("error without a message: %#v", e)
	}
}

func decodedT(tb testing.TB, text string) any {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		tb.Fatal(err)
	}
	return v
}
