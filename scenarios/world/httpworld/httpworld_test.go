package httpworld_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/httpworld"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// scenarioOf parses a scenario of one HTTP API, kv, at url; extra is
// YAML lines added to the API's entry.
func scenarioOf(url, extra string) *scenarios.Scenario {
	GinkgoHelper()
	text := fmt.Sprintf(`apiVersion: overnight/v1
kind: Scenario
name: kv
agent: {binary: /bin/agent}
http:
  - name: kv
    base_url: %s
    routes:
      - {route: "POST /kv/put", kind: put, identity: args.key}
      - {route: "POST /kv/get", kind: get, read_only: true}
      - {route: "GET /kv/get", kind: get_query, read_only: true}
    credentials: {header: Authorization, env: KV_TOKEN, prefix: "Bearer "}
%s`, url, extra)
	sc, err := scenarios.Parse("kv.yaml", []byte(text))
	Expect(err).NotTo(HaveOccurred())
	return sc
}

const withLookup = `    lookup: {route: "POST /kv/get", body: '{"key": args.key}', found: 'int(response.count) > 0'}
`

func open(sc *scenarios.Scenario, credential string, tune ...func(*httpworld.Config)) *httpworld.World {
	GinkgoHelper()
	cfg := httpworld.Config{API: sc.HTTP[0], Credential: credential}
	for _, t := range tune {
		t(&cfg)
	}
	w, err := httpworld.Open(cfg, world.NewMemStore(), []byte("http/kv/"))
	Expect(err).NotTo(HaveOccurred())
	return w
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func put(key, value string) world.Request {
	return world.Request{Key: "k/" + key + "-" + value, Kind: "http.kv.put", Args: json.RawMessage(fmt.Sprintf(`{"key":%q,"value":%q}`, key, value)), Now: t0}
}

func resultOf(o world.Outcome) httpworld.Result {
	GinkgoHelper()
	r, ok := httpworld.ResultOf(o.Result)
	Expect(ok).To(BeTrue(), "result %s", o.Result)
	return r
}

var _ = Describe("An HTTP API as a world", func() {
	var kv *kvServer
	BeforeEach(func() { kv = newKV("s3cret") })

	It("sends the request upstream with the credential, and keeps the 2xx answer whole as the result", func(ctx SpecContext) {
		w := open(scenarioOf(kv.URL, ""), "Bearer s3cret")
		out, err := w.Execute(ctx, put("a", "1"))
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Status).To(Equal(protocol.StatusDone))
		r := resultOf(out)
		Expect(r.Status).To(Equal(200))
		Expect(r.ContentType).To(Equal("application/json"))
		Expect(string(r.Body)).To(Equal(`{"key":"a","version":"1"}`))
		Expect(kv.version("a")).To(Equal(1))
		auths, _ := kv.seen()
		Expect(auths).To(Equal([]string{"Bearer s3cret"}))

		ledger, err := w.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(ledger).To(HaveLen(1))
		Expect(ledger[0].Key).To(Equal("k/a-1"))
		Expect(ledger[0].Outcome).To(Equal(out), "the journal keeps the answer")
		got, found, err := w.Lookup(ctx, "k/a-1")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(got).To(Equal(out))

		kv.answerNext("text")
		out, err = w.Execute(ctx, put("a", "2"))
		Expect(err).NotTo(HaveOccurred())
		r = resultOf(out)
		Expect(r.Body).To(BeNil())
		Expect(*r.Text).To(Equal("stored, version 2"), "a body that is not JSON is kept as text")
		Expect(string(r.Bytes())).To(Equal("stored, version 2"))
	})

	It("sends a bodiless method's args as query parameters", func(ctx SpecContext) {
		w := open(scenarioOf(kv.URL, ""), "Bearer s3cret")
		_, err := w.Execute(ctx, put("q", "1"))
		Expect(err).NotTo(HaveOccurred())
		out, err := w.Execute(ctx, world.Request{Key: "k/g", Kind: "http.kv.get_query", Args: json.RawMessage(`{"key":"q"}`), Now: t0})
		Expect(err).NotTo(HaveOccurred())
		Expect(string(resultOf(out).Body)).To(Equal(`{"count":"1","version":"1"}`))
	})

	It("answers a 4xx as a permanent failure carrying the upstream's answer; a 401 without the credential", func(ctx SpecContext) {
		w := open(scenarioOf(kv.URL, ""), "Bearer s3cret")
		out, err := w.Execute(ctx, world.Request{Key: "k/bad", Kind: "http.kv.put", Args: json.RawMessage(`{"value":"x"}`), Now: t0})
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Status).To(Equal(protocol.StatusFailed))
		Expect(out.Error.Code).To(Equal("http_400"))
		Expect(out.Error.Status).To(Equal(400))
		Expect(out.Error.Transient).To(BeFalse())
		Expect(out.Error.Message).To(Equal(`POST /kv/put answered 400 Bad Request: {"error":"want {key, value}"}`))
		d := resultOf(world.Outcome{Result: out.Error.Details})
		Expect(string(d.Body)).To(Equal(`{"error":"want {key, value}"}`))

		anon := open(scenarioOf(kv.URL, ""), "")
		out, err = anon.Execute(ctx, put("a", "1"))
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Error.Code).To(Equal("http_401"))
		Expect(kv.version("a")).To(BeZero())
		wrong := open(scenarioOf(kv.URL, ""), "Bearer guessed")
		out, err = wrong.Execute(ctx, put("a", "1"))
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Error.Code).To(Equal("http_401"))
		Expect(kv.version("a")).To(BeZero())
	})

	It("answers a 429 as a transient failure with the upstream's Retry-After", func(ctx SpecContext) {
		w := open(scenarioOf(kv.URL, ""), "Bearer s3cret")
		kv.answerNext("429")
		out, err := w.Execute(ctx, put("a", "1"))
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Error.Code).To(Equal("http_429"))
		Expect(out.Error.Transient).To(BeTrue(), "the same key runs again")
		Expect(resultOf(world.Outcome{Result: out.Error.Details}).RetryAfter).To(Equal("7"))
		Expect(httpworld.RetryAfter("7")).To(Equal(7 * time.Second))
	})

	DescribeTable("puts the effect in doubt when the upstream fails it: a 5xx, no answer in time, garbage",
		func(ctx context.Context, how, want string) {
			sc := scenarioOf(kv.URL, "    timeout: 300ms\n")
			w := open(sc, "Bearer s3cret")
			kv.slow = time.Second
			kv.answerNext(how)
			_, err := w.Execute(ctx, put("a", "1"))
			Expect(err).To(MatchError(remote.ErrWorld))
			Expect(err.Error()).To(ContainSubstring(want))
			Expect(err.Error()).To(HavePrefix("HTTP API kv: POST /kv/put: "))
			ledger, lerr := w.Ledger(ctx)
			Expect(lerr).NotTo(HaveOccurred())
			Expect(ledger).To(BeEmpty(), "no answer is journaled for a request in doubt")
		},
		Entry("5xx", "5xx-after", "answered 503 Service Unavailable: backend unavailable"),
		Entry("a timeout", "slow", "no answer within 300ms"),
		Entry("garbage", "garbage", "no answer: "),
	)

	It("reconciles a request in doubt through the lookup: found is done and journaled, not found runs again", func(ctx SpecContext) {
		w := open(scenarioOf(kv.URL, withLookup), "Bearer s3cret")
		kv.answerNext("5xx-after") // applied, then the answer lost
		req := put("a", "1")
		_, err := w.Execute(ctx, req)
		Expect(err).To(MatchError(remote.ErrWorld))
		out, found, err := world.LookupOf(ctx, w, req)
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(out.Status).To(Equal(protocol.StatusDone))
		r := resultOf(out)
		Expect(r.Reconciled).To(BeTrue())
		Expect(string(r.Body)).To(Equal(`{"count":"1","version":"1"}`), "the lookup's answer")
		ledger, err := w.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(ledger).To(HaveLen(1), "the reconciled answer is journaled")

		kv.answerNext("5xx-before") // refused before applying
		req = put("b", "1")
		_, err = w.Execute(ctx, req)
		Expect(err).To(MatchError(remote.ErrWorld))
		_, found, err = world.LookupOf(ctx, w, req)
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeFalse())
		Expect(kv.version("b")).To(BeZero())
	})

	It("cannot say whether a request in doubt happened without a lookup", func(ctx SpecContext) {
		w := open(scenarioOf(kv.URL, ""), "Bearer s3cret")
		kv.answerNext("5xx-after")
		req := put("a", "1")
		_, err := w.Execute(ctx, req)
		Expect(err).To(HaveOccurred())
		_, _, err = world.LookupOf(ctx, w, req)
		Expect(err).To(MatchError(world.ErrCannotLookup))
		Expect(err.Error()).To(ContainSubstring("HTTP API kv declares no lookup"))
	})

	It("finds a non-idempotent kind done twice for one identity under different keys, and not a key repeated or a read", func(ctx SpecContext) {
		w := open(scenarioOf(kv.URL, ""), "Bearer s3cret")
		Expect(w.Duplicates(ctx)).To(BeEmpty(), "indexed before any answer: later ones are added as they are recorded")
		for _, req := range []world.Request{
			{Key: "u/1", Kind: "http.kv.put", Args: json.RawMessage(`{"key":"a","value":"1"}`), Now: t0},
			{Key: "u/2", Kind: "http.kv.put", Args: json.RawMessage(`{"key":"b","value":"1"}`), Now: t0},
			{Key: "u/3", Kind: "http.kv.put", Args: json.RawMessage(`{"key":"a","value":"2"}`), Now: t0},
			{Key: "u/4", Kind: "http.kv.get", Args: json.RawMessage(`{"key":"a"}`), Now: t0},
			{Key: "u/5", Kind: "http.kv.get", Args: json.RawMessage(`{"key":"a"}`), Now: t0},
		} {
			_, err := w.Execute(ctx, req)
			Expect(err).NotTo(HaveOccurred())
		}
		dups, err := w.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(dups).To(Equal([]world.Duplicate{{Kind: "http.kv.put", Name: "a", IDs: []string{"ledger#1", "ledger#3"}, Keys: []string{"u/1", "u/3"}, Count: 2}}))
		Expect(kv.version("a")).To(Equal(2), "the upstream's own count agrees")
		ledger, err := w.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		again, err := httpworld.DuplicatesIn(ctx, w.API(), ledger)
		Expect(err).NotTo(HaveOccurred())
		Expect(again).To(Equal(dups), "the same, read from the journal at once")
	})

	It("judges a goal from a probe and its expectation", func(ctx SpecContext) {
		sc := scenarioOf(kv.URL, `goal:
  probe: {api: kv, route: "POST /kv/get", body: '{"key": task.key}'}
  expect: 'int(response.count) == 1 && int(response.version) == 1'
task: {key: a}
`)
		w := open(sc, "Bearer s3cret")
		chk, err := httpworld.JudgeGoal(ctx, w, sc.Goal, sc.TaskJSON())
		Expect(err).NotTo(HaveOccurred())
		Expect(chk.OK).To(BeFalse())
		Expect(chk.Detail).To(Equal("POST /kv/get of HTTP API kv answered {\"count\":\"0\"}; `int(response.count) == 1 && int(response.version) == 1` does not hold"))
		_, err = w.Execute(ctx, put("a", "1"))
		Expect(err).NotTo(HaveOccurred())
		chk, err = httpworld.JudgeGoal(ctx, w, sc.Goal, sc.TaskJSON())
		Expect(err).NotTo(HaveOccurred())
		Expect(chk.OK).To(BeTrue(), chk.Detail)
	})

	It("replays from a recording by kind, args and occurrence, sending nothing upstream; a request it lacks is the first divergence", func(ctx SpecContext) {
		live := open(scenarioOf(kv.URL, ""), "Bearer s3cret")
		for _, req := range []world.Request{put("a", "1"), put("a", "1"), put("b", "1")} {
			req.Key += fmt.Sprint(time.Now().UnixNano())
			_, err := live.Execute(ctx, req)
			Expect(err).NotTo(HaveOccurred())
		}
		recording, err := live.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		_, sent := kv.seen()

		sc := scenarioOf(kv.URL, "    mode: replay\n    recording: run-1\n")
		w := open(sc, "Bearer s3cret", func(c *httpworld.Config) { c.Recording, c.RecordingRun = recording, "run-1" })
		var versions []string
		for _, req := range []world.Request{put("a", "1"), {Key: "k/other", Kind: "http.kv.put", Args: put("a", "1").Args, Now: t0}, put("b", "1")} {
			out, err := w.Execute(ctx, req)
			Expect(err).NotTo(HaveOccurred())
			var body struct{ Version string }
			Expect(json.Unmarshal(resultOf(out).Body, &body)).To(Succeed())
			versions = append(versions, body.Version)
		}
		Expect(versions).To(Equal([]string{"1", "2", "1"}), "the n-th request gets the n-th answer")
		out, err := w.Execute(ctx, put("c", "1"))
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Status).To(Equal(protocol.StatusFailed))
		Expect(out.Error.Code).To(Equal(httpworld.CodeReplayDiverged))
		Expect(out.Error.Status).To(Equal(http.StatusBadGateway))
		Expect(out.Error.Message).To(ContainSubstring("the recording of run run-1 answers POST /kv/put with these args 0 time(s), and this is request 1; it was not sent upstream"))
		_, puts := kv.seen()
		Expect(puts).To(Equal(sent), "nothing reached the upstream")
	})
})
