package scenarios_test

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/invariant"
)

// httpHeader is the valid start of a scenario of HTTP APIs alone (no
// world:); cases append to it.
const httpHeader = `apiVersion: overnight/v1
kind: Scenario
name: kv
agent: {binary: /bin/agent}
http:
  - name: etcd
    base_url: http://127.0.0.1:2379/
    routes:
      - {route: "POST /v3/kv/put", kind: put, identity: args.key}
      - {route: "POST /v3/kv/range", kind: range, read_only: true}
`

var _ = Describe("http: and goal:", func() {
	It("reads an API's routes, lookup, credentials and mode, and a goal probing it, with no world", func(ctx SpecContext) {
		sc := mustParse("kv.yaml", httpHeader+`    lookup: {route: "POST /v3/kv/range", body: '{"key": args.key}', found: 'int(response.count) > 0'}
    credentials: {header: Authorization, env: ETCD_TOKEN}
    mode: record
  - name: other-api
    base_url: https://example.com/api
    routes: [{route: "GET /items", kind: list, read_only: true}, {route: "DELETE /items", kind: drop, destructive: true}]
goal:
  probe: {api: etcd, route: "POST /v3/kv/range", body: '{"key": task.key}'}
  expect: 'int(response.count) == 1'
task: {key: a2V5}
`)
		Expect(sc.HasWorld()).To(BeFalse())
		Expect(sc.HTTP).To(HaveLen(2))
		etcd := sc.HTTP[0]
		Expect(etcd.Name).To(Equal("etcd"))
		Expect(etcd.BaseURL).To(Equal("http://127.0.0.1:2379"), "the trailing slash goes: a route's path is appended")
		Expect(etcd.Mode).To(Equal(scenarios.HTTPRecord))
		Expect(etcd.EnvName()).To(Equal("OVERNIGHT_HTTP_ETCD"))
		Expect(sc.HTTP[1].EnvName()).To(Equal("OVERNIGHT_HTTP_OTHER_API"))
		Expect(sc.HTTP[1].Mode).To(Equal(scenarios.HTTPLive), "the default mode")
		Expect(*etcd.Credentials).To(Equal(scenarios.HTTPCredentials{Header: "Authorization", Env: "ETCD_TOKEN"}))

		put, ok := etcd.Route("http.etcd.put")
		Expect(ok).To(BeTrue())
		Expect(put.String()).To(Equal("POST /v3/kv/put"))
		Expect(put.ReadOnly || put.Idempotent || put.Destructive).To(BeFalse())
		id, err := put.Identity.EvalString(ctx, map[string]any{"args": map[string]any{"key": "k1", "value": "v"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(id).To(Equal("k1"))
		r, ok := etcd.Match("POST", "/v3/kv/range")
		Expect(ok).To(BeTrue())
		Expect(r.Kind).To(Equal("range"))
		Expect(r.ReadOnly).To(BeTrue())
		_, ok = etcd.Match("GET", "/v3/kv/range")
		Expect(ok).To(BeFalse(), "the method is part of the route")

		Expect(etcd.Lookup.Method + " " + etcd.Lookup.Path).To(Equal("POST /v3/kv/range"))
		body, err := etcd.Lookup.Body.EvalJSON(ctx, map[string]any{"args": map[string]any{"key": "k1"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(string(body)).To(Equal(`{"key":"k1"}`))
		found, err := etcd.Lookup.Found.EvalBool(ctx, map[string]any{"args": map[string]any{}, "response": map[string]any{"count": "1"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())

		Expect(sc.Goal.API).To(Equal("etcd"))
		ok, err = sc.Goal.Expect.EvalBool(context.Background(), scenarios.GoalVars(sc.Task, map[string]any{"count": "1"}))
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeTrue())
		Expect(sc.Invariants).To(ContainElement(invariant.GoalReached), "a goal: judges goal-reached")
	})

	It("checks goal-reached only where something judges a goal", func() {
		sc := mustParse("kv.yaml", httpHeader)
		Expect(sc.Invariants).To(Equal([]string{invariant.NoDuplicateEffects, invariant.NoLostProgress}),
			"without world: or goal:, the defaults leave goal-reached out")
		sc = mustParse("kv.yaml", strings.Replace(httpHeader, "agent:", "world: cloud\nagent:", 1))
		Expect(sc.Invariants).To(ContainElement(invariant.GoalReached), "the world's goal judges")
		Expect(sc.HasWorld()).To(BeTrue())
	})

	DescribeTable("reports each problem at its file:line:column, a CEL expression's inside it",
		func(text string, want ...string) {
			_, err := scenarios.Parse("kv.yaml", []byte(text))
			Expect(positioned("kv.yaml", err)).To(Equal(want))
		},
		Entry("neither world nor http", "apiVersion: overnight/v1\nkind: Scenario\nname: t\nagent: {builtin: x}\n",
			`1:1: missing required field "world"`),
		Entry("a syntax error in an identity", strings.Replace(httpHeader, "identity: args.key", "identity: 'args.key +'", 1),
			`9:68: http[0].routes[0].identity: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}`),
		Entry("a variable the place does not give", strings.Replace(httpHeader, "identity: args.key", "identity: response.key", 1),
			`9:57: http[0].routes[0].identity: undeclared reference to 'response'; this expression may use args`),
		Entry("a predicate that yields a string", httpHeader+`    lookup: {route: "POST /v3/kv/range", found: '"yes"'}`+"\n",
			`11:50: http[0].lookup.found: yields a string, want a bool`),
		Entry("a route that is not METHOD /path, and one repeated", strings.Replace(httpHeader, `"POST /v3/kv/range"`, `"FETCH /v3/kv/range"`, 1)+
			`      - {route: "POST /v3/kv/put", kind: put2}`+"\n",
			`10:17: http[0].routes[1].route: method "FETCH": want one of POST, PUT, PATCH, GET, DELETE`,
			`11:17: http[0].routes[2].route: POST /v3/kv/put is already declared at line 9 column 17`),
		Entry("a path with a wildcard, and a kind repeated", strings.Replace(httpHeader, `"POST /v3/kv/range", kind: range`, `"POST /v3/kv/{op}", kind: put`, 1),
			`10:17: http[0].routes[1].route: path "/v3/kv/{op}": want an exact path, without a query, fragment, spaces or wildcards`,
			`10:43: http[0].routes[1].kind: "put" is already the kind of the route at line 9 column 42`),
		Entry("two APIs of one name", httpHeader+"  - {name: etcd, base_url: 'http://x', routes: [{route: GET /a, kind: a}]}\n",
			`11:12: http[1].name: "etcd" is already declared at line 6 column 11`),
		Entry("a recording outside replay", httpHeader+"    recording: run-1\n",
			`11:16: http[0].recording: only mode: replay answers from a recording (this API's mode is live)`),
		Entry("a goal on an API not declared", httpHeader+"goal: {probe: {api: nope, route: POST /x}, expect: 'true'}\n",
			`11:21: goal.probe.api: no HTTP API "nope" (http: declares etcd)`),
		Entry("goal-reached with nothing to judge it", httpHeader+"invariants: [goal-reached]\n",
			`11:14: invariants[0]: goal-reached needs a goal, and this scenario has no world: and no goal: (add goal: {probe: {api, route, body}, expect})`),
		Entry("a name the schema refuses", strings.Replace(httpHeader, "name: etcd", "name: Etcd", 1),
			`6:11: http[0].name: "Etcd" does not match ^[a-z][a-z0-9-]*$`),
		Entry("a max_body over 64MiB", httpHeader+"    max_body: 65MiB\n",
			`11:15: http[0].max_body: "65MiB" (68157440 bytes) is over the most, 64MiB (67108864 bytes)`),
		Entry("a max_body in bytes over 64MiB", httpHeader+"    max_body: 67108865\n",
			`11:15: http[0].max_body: 67108865 is over the most, 64MiB (67108864 bytes)`),
		Entry("a max_body of nothing", httpHeader+"    max_body: 0KiB\n",
			`11:15: http[0].max_body: must be greater than 0`),
		Entry("a max_body that is not a size", httpHeader+"    max_body: 2 gigs\n",
			`11:15: http[0].max_body: "2 gigs" is not a size: want bytes, or a number with B, KB, KiB, MB or MiB, such as 64KiB or 1MiB`),
	)

	It("reads max_body as bytes or a size, 1MiB by default", func() {
		Expect(mustParse("kv.yaml", httpHeader).HTTP[0].MaxBody).To(BeEquivalentTo(1 << 20))
		Expect(mustParse("kv.yaml", httpHeader+"    max_body: 64KiB\n").HTTP[0].MaxBody).To(BeEquivalentTo(64 << 10))
		Expect(mustParse("kv.yaml", httpHeader+"    max_body: 2MB\n").HTTP[0].MaxBody).To(BeEquivalentTo(2000000))
		Expect(mustParse("kv.yaml", httpHeader+"    max_body: 64MiB\n").HTTP[0].MaxBody).To(BeEquivalentTo(64 << 20))
		Expect(mustParse("kv.yaml", httpHeader+"    max_body: 4096\n").HTTP[0].MaxBody).To(BeEquivalentTo(4096))
	})
})
