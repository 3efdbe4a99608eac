package expr_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/expr"
)

// A range response of etcd 3.4's JSON gateway: its int64s are JSON strings,
// its keys and values base64. An empty range leaves count and kvs out.
const (
	etcdRange = `{"header": {"cluster_id": "14841639068965178418", "member_id": "10276657743932975437", "revision": "7", "raft_term": "2"},
		"kvs": [{"key": "Zm9v", "create_revision": "5", "mod_revision": "7", "version": "1", "value": "YmFy"}],
		"count": "1"}`
	etcdEmptyRange = `{"header": {"cluster_id": "14841639068965178418", "member_id": "10276657743932975437", "revision": "7", "raft_term": "2"}}`
	etcdPutArgs    = `{"key": "Zm9v", "value": "YmFy"}`
)

// decoded is a JSON text as encoding/json decodes it (numbers as float64).
func decoded(text string) any {
	GinkgoHelper()
	var v any
	Expect(json.Unmarshal([]byte(text), &v)).To(Succeed())
	return v
}

func compile(source string, want expr.Type, vars ...expr.Var) *expr.Program {
	GinkgoHelper()
	p, err := expr.Compile(source, want, vars...)
	Expect(err).NotTo(HaveOccurred())
	return p
}

// asExprError checks that err is an *expr.Error and returns it.
func asExprError(err error) *expr.Error {
	GinkgoHelper()
	var e *expr.Error
	Expect(errors.As(err, &e)).To(BeTrue(), "want an *expr.Error, got %T: %v", err, err)
	return e
}

// numbers is a list 0..n-1 as JSON decodes it.
func numbers(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = float64(i)
	}
	return out
}

var _ = Describe("Compile", func() {
	DescribeTable("reports a problem at its line and column inside the expression",
		func(source string, want expr.Type, vars []expr.Var, line, column int, msg string) {
			_, err := expr.Compile(source, want, vars...)
			Expect(err).To(HaveOccurred())
			e := asExprError(err)
			Expect(e.Expr).To(Equal(source))
			Expect([]int{e.Line, e.Column}).To(Equal([]int{line, column}), err.Error())
			Expect(e.Msg).To(ContainSubstring(msg))
			Expect(err.Error()).To(HavePrefix("expression `"))
		},
		Entry("a syntax error", "int(response.count) >", expr.Bool, []expr.Var{expr.Response}, 1, 22, "Syntax error"),
		Entry("a variable its place does not provide, naming those it does",
			"int(state.count) == 1", expr.Bool, []expr.Var{expr.Args, expr.Response}, 1, 5,
			"undeclared reference to 'state'; this expression may use args, response"),
		Entry("an unknown function", "size(args.key) > 0 && lenght(args.key) > 0", expr.Bool, []expr.Var{expr.Args}, 1, 29, "undeclared reference to 'lenght'"),
		Entry("operands no overload takes", "args.n + 1 == 1 + 'one'", expr.Bool, []expr.Var{expr.Args}, 1, 17, "no matching overload for '_+_'"),
		Entry("a predicate that yields a string", "args.key + '/'", expr.Bool, []expr.Var{expr.Args}, 1, 1, "yields a string, want a bool"),
		Entry("an identity that yields an int", "  size(args.key)", expr.String, []expr.Var{expr.Args}, 1, 3, "yields an int, want a string"),
		Entry("a body of bytes", "base64.decode(args.key)", expr.JSON, []expr.Var{expr.Args}, 1, 1, "yields bytes, want a JSON value"),
		Entry("a body of a map with int keys", "{1: args.key}", expr.JSON, []expr.Var{expr.Args}, 1, 1, "yields a map(int, dyn), want a JSON value"),
		Entry("a body holding a timestamp", "{'at': [timestamp('2026-01-01T00:00:00Z')]}", expr.JSON, nil, 1, 1, "want a JSON value"),
		Entry("a problem on the second line of a block", "has(response.kvs) &&\n  response.kvs.size() >", expr.Bool, []expr.Var{expr.Response}, 2, 24, "Syntax error"),
		Entry("columns counting characters, not bytes", "'é' == args.key && nope", expr.Bool, []expr.Var{expr.Args}, 1, 20, "undeclared reference to 'nope'"),
		Entry("an empty expression", "   ", expr.Bool, []expr.Var{expr.Args}, 1, 1, "empty expression; want a bool"),
	)

	It("gives the offset in characters, for a caller that adds it to where the expression is written", func() {
		_, err := expr.Compile("'ü' == 'ü' &&\nnope", expr.Bool)
		e := asExprError(err)
		Expect([]int{e.Line, e.Column, e.Offset}).To(Equal([]int{2, 1, 14}))
		Expect(err.Error()).To(Equal("expression `'ü' == 'ü' && nope` at line 2, column 1: undeclared reference to 'nope'; this expression may use no variables"))
	})

	It("wraps ErrResultType when the checker knows the result is of the wrong type", func() {
		_, err := expr.Compile("args.key + ''", expr.Bool, expr.Args)
		Expect(err).To(MatchError(expr.ErrResultType))
		_, err = expr.Compile("args.key + ", expr.Bool, expr.Args)
		Expect(err).NotTo(MatchError(expr.ErrResultType))
	})

	It("accepts what only the values can decide: a dyn result is checked by Eval", func() {
		for _, want := range []expr.Type{expr.Bool, expr.String, expr.JSON} {
			p := compile("args.key", want, expr.Args)
			Expect(p.Want()).To(Equal(want))
		}
	})

	It("refuses an expression longer than MaxLength", func() {
		long := "args.key == '" + strings.Repeat("x", expr.MaxLength) + "'"
		_, err := expr.Compile(long, expr.Bool, expr.Args)
		Expect(err).To(HaveOccurred())
		Expect(asExprError(err).Msg).To(ContainSubstring("size exceeds"))
		Expect(err.Error()).To(ContainSubstring("xxx…`"), "a long source is shortened in the message")
	})

	It("says which argument of the call is wrong when the caller, not the file, is at fault", func() {
		_, err := expr.Compile("true", expr.Type(9))
		Expect(err).To(MatchError(ContainSubstring("unknown result type 9")))
		_, err = expr.Compile("true", expr.Bool, "not-a-name")
		Expect(err).To(MatchError(ContainSubstring(`variable name "not-a-name" is not an identifier`)))
		_, err = expr.Compile("true", expr.Bool, expr.Args, expr.Args)
		Expect(err).To(MatchError(ContainSubstring(`variable "args" declared twice`)))
	})
})

var _ = Describe("Eval on etcd's JSON", func() {
	var ctx context.Context
	BeforeEach(func() { ctx = context.Background() })

	Describe("a predicate (found, expect)", func() {
		It("reads etcd's numbers sent as strings, and the same numbers sent as numbers", func() {
			found := compile("int(response.count) > 0", expr.Bool, expr.Args, expr.Response)
			expect := compile("int(response.count) == 1", expr.Bool, expr.Response)
			for _, body := range []string{etcdRange, `{"count": 1}`, `{"count": 1.0}`} {
				vars := map[string]any{"args": decoded(etcdPutArgs), "response": decoded(body)}
				Expect(found.EvalBool(ctx, vars)).To(BeTrue(), body)
				Expect(expect.EvalBool(ctx, vars)).To(BeTrue(), body)
			}
			Expect(found.EvalBool(ctx, map[string]any{"args": nil, "response": decoded(`{"count": "0"}`)})).To(BeFalse())
		})

		It("compares numbers across types: a JSON number with an int literal, an int with a double", func() {
			p := compile("response.count == 1 && response.count > 0 && int(response.count) < 1.5", expr.Bool, expr.Response)
			Expect(p.EvalBool(ctx, map[string]any{"response": decoded(`{"count": 1}`)})).To(BeTrue())
		})

		It("decodes base64 keys and values and looks through kvs", func() {
			p := compile(`response.kvs.exists(kv, kv.key == args.key && string(base64.decode(kv.value)) == "bar" && int(kv.version) == 1)`,
				expr.Bool, expr.Args, expr.Response)
			Expect(p.EvalBool(ctx, map[string]any{"args": decoded(etcdPutArgs), "response": decoded(etcdRange)})).To(BeTrue())
			Expect(p.EvalBool(ctx, map[string]any{"args": decoded(`{"key": "YmF6"}`), "response": decoded(etcdRange)})).To(BeFalse())
		})

		It("tells a missing field, at the field, and has() guards against it", func() {
			vars := map[string]any{"response": decoded(etcdEmptyRange)}
			bare := compile("int(response.count) > 0", expr.Bool, expr.Response)
			_, err := bare.EvalBool(ctx, vars)
			e := asExprError(err)
			Expect(e.Column).To(Equal(13))
			Expect(err).To(MatchError("expression `int(response.count) > 0` at column 13: no such key: count"))

			guarded := compile("has(response.count) && int(response.count) > 0", expr.Bool, expr.Response)
			Expect(guarded.EvalBool(ctx, vars)).To(BeFalse())
		})

		It("says what went wrong with numbers: a double where an int is needed, a string int() cannot read", func() {
			_, err := compile("response.count + 1 > 1", expr.Bool, expr.Response).EvalBool(ctx, map[string]any{"response": decoded(`{"count": 1}`)})
			Expect(err).To(MatchError(ContainSubstring("at column 16: no overload of `+` takes values of these types (every JSON number is a double")))
			_, err = compile("int(response.count) > 0", expr.Bool, expr.Response).EvalBool(ctx, map[string]any{"response": decoded(`{"count": "one"}`)})
			Expect(err).To(MatchError(ContainSubstring("at column 4: type conversion error from 'string' to 'int'")))
		})

		It("refuses a value that is not a bool, naming what it got", func() {
			_, err := compile("response.count", expr.Bool, expr.Response).EvalBool(ctx, map[string]any{"response": decoded(etcdRange)})
			Expect(err).To(MatchError("expression `response.count` at column 1: got a string, want a bool"))
			Expect(err).To(MatchError(expr.ErrResultType))
		})
	})

	Describe("an identity", func() {
		It("is the key the request names, as sent or decoded", func() {
			vars := map[string]any{"args": decoded(etcdPutArgs)}
			Expect(compile("args.key", expr.String, expr.Args).EvalString(ctx, vars)).To(Equal("Zm9v"))
			Expect(compile("string(base64.decode(args.key))", expr.String, expr.Args).EvalString(ctx, vars)).To(Equal("foo"))
			Expect(compile(`"kv/" + string(base64.decode(args.key)).upperAscii()`, expr.String, expr.Args).EvalString(ctx, vars)).To(Equal("kv/FOO"))
		})

		It("refuses a request whose key is not a string, or is missing", func() {
			p := compile("args.key", expr.String, expr.Args)
			_, err := p.EvalString(ctx, map[string]any{"args": decoded(`{"key": 7}`)})
			Expect(err).To(MatchError("expression `args.key` at column 1: got a number, want a string"))
			_, err = p.EvalString(ctx, map[string]any{"args": decoded(`{"value": "YmFy"}`)})
			Expect(err).To(MatchError("expression `args.key` at column 5: no such key: key"))
		})
	})

	Describe("a body", func() {
		It("is a map literal, marshalled as the request's JSON", func() {
			p := compile(`{"key": args.key, "range_end": base64.encode(b"fop"), "limit": 10, "keys_only": false, "serializable": null}`,
				expr.JSON, expr.Args)
			body, err := p.EvalJSON(ctx, map[string]any{"args": decoded(etcdPutArgs)})
			Expect(err).NotTo(HaveOccurred())
			Expect(body).To(MatchJSON(`{"key": "Zm9v", "range_end": "Zm9w", "limit": 10, "keys_only": false, "serializable": null}`))
		})

		It("converts the result to plain JSON values: float64 numbers, []any, map[string]any", func() {
			p := compile(`{"n": int(response.count), "u": 2u, "kvs": response.kvs.map(kv, kv.key), "rev": double(response.header.revision)}`,
				expr.JSON, expr.Response)
			v, err := p.Eval(ctx, map[string]any{"response": decoded(etcdRange)})
			Expect(err).NotTo(HaveOccurred())
			Expect(v).To(Equal(map[string]any{"n": 1.0, "u": 2.0, "kvs": []any{"Zm9v"}, "rev": 7.0}))
		})

		It("can carry JSON as text with json.encode", func() {
			p := compile(`{"value": base64.encode(bytes(json.encode({"owner": args.key})))}`, expr.JSON, expr.Args)
			v, err := p.EvalJSON(ctx, map[string]any{"args": decoded(etcdPutArgs)})
			Expect(err).NotTo(HaveOccurred())
			Expect(v).To(MatchJSON(`{"value": "eyJvd25lciI6IlptOXYifQ=="}`))
		})

		It("refuses, at the path inside the body, what JSON cannot carry", func() {
			vars := map[string]any{"args": decoded(etcdPutArgs)}
			_, err := compile(`{"key": args.key, "raw": [base64.decode(args.key)]}`, expr.JSON, expr.Args).Eval(ctx, vars)
			Expect(err).To(MatchError(ContainSubstring("at column 1: at .raw[0]: got bytes (base64.encode() or string() makes them text), want a JSON value")))
			Expect(err).To(MatchError(expr.ErrResultType))
			_, err = compile(`{"n": 9007199254740993}`, expr.JSON).Eval(ctx, nil)
			Expect(err).To(MatchError(ContainSubstring("past what a JSON number holds exactly")))
			_, err = compile(`{"ratio": 1.0 / 0.0}`, expr.JSON).Eval(ctx, nil)
			Expect(err).To(MatchError(ContainSubstring("at .ratio: got +Inf, which JSON cannot carry")))
			_, err = compile(`{"by_version": {dyn(1): args.key}}`, expr.JSON, expr.Args).Eval(ctx, vars)
			Expect(err).To(MatchError(ContainSubstring("at .by_version: got a map with an int key, 1; JSON keys are strings")))
			_, err = compile(`dyn(duration("1s"))`, expr.JSON).Eval(ctx, nil)
			Expect(err).To(MatchError(ContainSubstring("got a duration, want a JSON value")))
		})
	})

	Describe("its input", func() {
		It("takes json.Number, json.RawMessage, Go integers and structs as the same JSON", func() {
			p := compile("int(args.n) == 1 && args.n == 1.0 && args.key == 'Zm9v'", expr.Bool, expr.Args)
			type put struct {
				Key string `json:"key"`
				N   int    `json:"n"`
			}
			for _, args := range []any{
				map[string]any{"key": "Zm9v", "n": json.Number("1")},
				json.RawMessage(`{"key": "Zm9v", "n": 1}`),
				map[string]any{"key": "Zm9v", "n": int64(1)},
				map[string]any{"key": "Zm9v", "n": uint64(1)},
				put{Key: "Zm9v", N: 1},
			} {
				Expect(p.EvalBool(ctx, map[string]any{"args": args})).To(BeTrue(), "%#v", args)
			}
		})

		It("keeps an integer a double cannot hold exactly as an int", func() {
			p := compile("args.lease == 9007199254740993", expr.Bool, expr.Args)
			Expect(p.EvalBool(ctx, map[string]any{"args": map[string]any{"lease": int64(9007199254740993)}})).To(BeTrue())
		})

		It("needs a value for every variable it was compiled with", func() {
			p := compile("has(args.key)", expr.Bool, expr.Args, expr.Response)
			_, err := p.EvalBool(ctx, map[string]any{"args": decoded(etcdPutArgs)})
			Expect(err).To(MatchError(ContainSubstring("variable response is not given a value")))
			_, err = p.EvalBool(ctx, map[string]any{"args": make(chan int), "response": nil})
			Expect(err).To(MatchError(ContainSubstring("variable args: a chan int is not JSON")))
		})
	})

	It("can be used by many goroutines at once", func() {
		p := compile("int(response.count) == 1", expr.Bool, expr.Response)
		vars := map[string]any{"response": decoded(etcdRange)}
		errs := make(chan error, 8)
		for range 8 {
			go func() {
				defer GinkgoRecover()
				var err error
				for range 50 {
					if ok, e := p.EvalBool(ctx, vars); e != nil || !ok {
						err = errors.Join(e, errors.New("not true"))
					}
				}
				errs <- err
			}()
		}
		for range 8 {
			Expect(<-errs).NotTo(HaveOccurred())
		}
	})
})

var _ = Describe("Eval's bounds", func() {
	// Three loops over 1000 items nested: a billion steps unbounded.
	const runaway = "args.xs.all(a, args.xs.all(b, args.xs.all(c, a + b + c >= 0.0)))"
	// Two loops over 100: about 10,000 steps, under the cost limit.
	const long = "args.xs.all(a, args.xs.all(b, a + b >= 0.0))"

	It("stops a runaway expression at the cost limit, quickly", func() {
		p := compile(runaway, expr.Bool, expr.Args)
		start := time.Now()
		_, err := p.EvalBool(context.Background(), map[string]any{"args": map[string]any{"xs": numbers(1000)}})
		Expect(err).To(MatchError(expr.ErrCostLimit))
		Expect(err).To(MatchError(ContainSubstring("at column 1: stopped: its cost passed the limit of 100000")))
		Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
	})

	It("stops when the context is cancelled mid-evaluation", func() {
		p := compile(long, expr.Bool, expr.Args)
		vars := map[string]any{"args": map[string]any{"xs": numbers(100)}}
		Expect(p.EvalBool(context.Background(), vars)).To(BeTrue(), "it finishes when given the time")

		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_, err := p.EvalBool(ctx, vars)
		Expect(err).To(MatchError(context.DeadlineExceeded))
		Expect(err).To(MatchError(ContainSubstring("at column 1: interrupted")))
	})

	It("does not start when the context is already cancelled", func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := compile("true", expr.Bool).EvalBool(ctx, nil)
		Expect(err).To(MatchError(context.Canceled))
		asExprError(err)
	})
})
