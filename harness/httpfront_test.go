package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/invariant"
)

// kvUpstream is a Go HTTP API for the pass-through's fault cases: a
// key-value store that counts every write per key (as etcd's version
// does), checks a bearer credential, and answers the next write as told.
type kvUpstream struct {
	*httptest.Server
	mu       sync.Mutex
	versions map[string]int
	next     string // "", "5xx-after", "5xx-before", "429", "slow", "garbage"
	auths    []string
	puts     int
}

func newKVUpstream() *kvUpstream {
	u := &kvUpstream{versions: map[string]int{}}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	DeferCleanup(u.Close)
	return u
}

func (u *kvUpstream) answerNext(how string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.next = how
}

func (u *kvUpstream) state(key string) (version, puts int, auths []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.versions[key], u.puts, append([]string(nil), u.auths...)
}

func (u *kvUpstream) serve(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.auths = append(u.auths, r.Header.Get("Authorization"))
	u.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer s3cret" {
		http.Error(w, `{"error":"unauthenticated"}`, http.StatusUnauthorized)
		return
	}
	var req struct{ Key, Value string }
	_ = json.NewDecoder(r.Body).Decode(&req)
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/kv/get":
		u.mu.Lock()
		v := u.versions[req.Key]
		u.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"count": strconv.Itoa(min(v, 1)), "version": strconv.Itoa(v)})
		return
	case "/kv/big":
		// An answer of a size the request asks for (its value, in bytes).
		n, _ := strconv.Atoi(req.Value)
		_ = json.NewEncoder(w).Encode(map[string]any{"key": req.Key, "pad": strings.Repeat("x", n)})
		return
	case "/kv/put":
	default:
		http.NotFound(w, r)
		return
	}
	if req.Key == "" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"want a key"}`))
		return
	}
	u.mu.Lock()
	how := u.next
	u.next = ""
	u.puts++
	if how != "5xx-before" && how != "429" {
		u.versions[req.Key]++
	}
	v := u.versions[req.Key]
	u.mu.Unlock()
	switch how {
	case "5xx-after", "5xx-before":
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"backend unavailable"}`))
		return
	case "429":
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":"slow down"}`))
		return
	case "slow":
		time.Sleep(time.Second)
	case "garbage":
		if conn, buf, err := w.(http.Hijacker).Hijack(); err == nil {
			_, _ = buf.WriteString("garbage, not HTTP\r\n\r\n")
			_ = buf.Flush()
			_ = conn.Close()
		}
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"key": req.Key, "version": strconv.Itoa(v)})
}

// kvScenario is a scenario of one HTTP API, kv, at url: put (identity
// args.key, not idempotent) with a lookup, or without one.
func kvScenario(url string, lookup bool) *scenarios.Scenario {
	GinkgoHelper()
	sc, err := scenarios.Parse("kv.yaml", []byte(kvScenarioText(url, lookup)))
	Expect(err).NotTo(HaveOccurred())
	return sc
}

// kvScenarioText is kvScenario's file.
func kvScenarioText(url string, lookup bool) string {
	l := ""
	if lookup {
		l = `    lookup: {route: "POST /kv/get", body: '{"key": args.key}', found: 'int(response.count) > 0'}` + "\n"
	}
	return fmt.Sprintf(`apiVersion: overnight/v1
kind: Scenario
name: kv
agent: {builtin: deployer}
http:
  - name: kv
    base_url: %s
    timeout: 300ms
    routes:
      - {route: "POST /kv/put", kind: put, identity: args.key}
      - {route: "POST /kv/get", kind: get, read_only: true}
    credentials: {header: Authorization, env: KV_TOKEN, prefix: "Bearer "}
%sgoal:
  probe: {api: kv, route: "POST /kv/get", body: '{"key": task.key}'}
  expect: 'int(response.version) == 1'
task: {key: a}
limits: {horizon: 10d}
`, url, l)
}

// kvEnv is the harness's environment of these specs: the credential.
func kvEnv(name string) string {
	if name == "KV_TOKEN" {
		return "s3cret"
	}
	return ""
}

// liveKVRun creates a run of scen (with faults) on a harness whose
// environment holds the credential, and serves it with the real gateway.
func liveKVRun(scen *scenarios.Scenario, faultSpecs ...string) *liveRun {
	GinkgoHelper()
	ctx := context.Background()
	h, err := Open(ctx, Options{StateDir: GinkgoT().TempDir(), Env: kvEnv})
	Expect(err).NotTo(HaveOccurred())
	Expect(h.checkHTTP(scen)).To(Succeed())
	specs := []chaos.Spec{}
	for _, f := range faultSpecs {
		s, err := chaos.ParseSpec(f)
		Expect(err).NotTo(HaveOccurred())
		specs = append(specs, s)
	}
	id, err := h.create(ctx, RunRequest{Scenario: scen, Faults: specs})
	Expect(err).NotTo(HaveOccurred())
	return liveRunOf(h, id)
}

// call sends one request through the HTTP pass-through of api, as an
// agent's client does with $OVERNIGHT_HTTP_<API>.
func (lr *liveRun) call(token, api, method, path, key, body string, header ...string) (int, http.Header, string) {
	GinkgoHelper()
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", lr.sock)
		},
	}}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://gateway/v1/http/"+api+"/"+token+path, rd)
	Expect(err).NotTo(HaveOccurred())
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := hc.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, resp.Header, string(b)
}

func (lr *liveRun) effect(key string) history.EffectRecord {
	GinkgoHelper()
	effects, err := lr.h.history.Effects(lr.r.rec.ID)
	Expect(err).NotTo(HaveOccurred())
	for _, e := range effects {
		if e.Key == key {
			return e
		}
	}
	Fail("no effect with key " + key)
	return history.EffectRecord{}
}

var _ = Describe("the HTTP pass-through: an agent's own HTTP requests as effects", func() {
	var kv *kvUpstream
	BeforeEach(func() { kv = newKVUpstream() })
	put := `{"key":"a","value":"1"}`

	It("sends a keyed request once, adds the credential (dropping the agent's), and answers a repeat from the journal", func() {
		lr := liveKVRun(kvScenario(kv.URL, true))
		tok := lr.attempt()
		status, h, body := lr.call(tok, "kv", "POST", "/kv/put", "put-a", put, "Authorization", "Bearer forged-by-the-agent")
		Expect(status).To(Equal(200), body)
		Expect(h.Get("Content-Type")).To(Equal("application/json"))
		Expect(body).To(MatchJSON(`{"key":"a","version":"1"}`))
		Expect(h.Get("Idempotent-Replayed")).To(BeEmpty())

		status, h, body = lr.call(tok, "kv", "POST", "/kv/put", "put-a", put)
		Expect(status).To(Equal(200))
		Expect(body).To(MatchJSON(`{"key":"a","version":"1"}`), "the recorded answer")
		Expect(h.Get("Idempotent-Replayed")).To(Equal("true"))
		v, puts, auths := kv.state("a")
		Expect(v).To(Equal(1))
		Expect(puts).To(Equal(1), "the repeat was not sent upstream")
		Expect(auths).To(Equal([]string{"Bearer s3cret"}), "the harness's credential, never the agent's")

		status, _, body = lr.call(tok, "kv", "POST", "/kv/put", "put-a", `{"key":"a","value":"2"}`)
		Expect(status).To(Equal(409))
		Expect(body).To(ContainSubstring(`"code":"key_reused"`))

		e := lr.effect("put-a")
		Expect(e.Kind).To(Equal("http.kv.put"))
		Expect(e.Status).To(Equal(protocol.StatusDone))
		Expect(e.Replays).To(Equal(1))
		Expect(string(e.Args)).To(Equal(`{"key":"a","value":"1"}`))
	})

	It("refuses a request no route declares, naming the routes, and an API the scenario lacks", func() {
		lr := liveKVRun(kvScenario(kv.URL, true))
		tok := lr.attempt()
		status, _, body := lr.call(tok, "kv", "POST", "/kv/delete", "", put)
		Expect(status).To(Equal(404))
		Expect(body).To(ContainSubstring(`"code":"no_route"`))
		Expect(body).To(ContainSubstring("no route of HTTP API kv is POST /kv/delete; its routes: POST /kv/put, POST /kv/get"))
		status, _, body = lr.call(tok, "nope", "POST", "/kv/put", "", put)
		Expect(status).To(Equal(404))
		Expect(body).To(ContainSubstring(`no HTTP API \"nope\" (its APIs: kv)`))
		status, _, body = lr.call("not-a-token", "kv", "POST", "/kv/put", "", put)
		Expect(status).To(Equal(401), body)
		_, puts, _ := kv.state("a")
		Expect(puts).To(BeZero())
	})

	It("passes a 4xx through as the upstream's answer, final for its key; a 429 with its Retry-After, not final", func() {
		lr := liveKVRun(kvScenario(kv.URL, true))
		tok := lr.attempt()
		status, _, body := lr.call(tok, "kv", "POST", "/kv/put", "bad", `{"value":"1"}`)
		Expect(status).To(Equal(400))
		Expect(body).To(MatchJSON(`{"error":"want a key"}`))
		status, h, _ := lr.call(tok, "kv", "POST", "/kv/put", "bad", `{"value":"1"}`)
		Expect(status).To(Equal(400))
		Expect(h.Get("Idempotent-Replayed")).To(Equal("true"), "a permanent refusal is final for its key")

		kv.answerNext("429")
		status, h, body = lr.call(tok, "kv", "POST", "/kv/put", "put-a", put)
		Expect(status).To(Equal(429))
		Expect(h.Get("Retry-After")).To(Equal("3"), "the upstream's Retry-After reaches the agent")
		Expect(body).To(MatchJSON(`{"error":"slow down"}`))
		status, h, _ = lr.call(tok, "kv", "POST", "/kv/put", "put-a", put)
		Expect(status).To(Equal(200))
		Expect(h.Get("Idempotent-Replayed")).To(BeEmpty(), "a 429 is transient: the same key ran again")
		v, _, _ := kv.state("a")
		Expect(v).To(Equal(1))
	})

	DescribeTable("puts a request the upstream fails in doubt (503, Retry-After), and reconciles its retry through the lookup before sending anything",
		func(how string, happened bool) {
			lr := liveKVRun(kvScenario(kv.URL, true))
			tok := lr.attempt()
			kv.answerNext(how)
			status, h, body := lr.call(tok, "kv", "POST", "/kv/put", "put-a", put)
			Expect(status).To(Equal(503), body)
			Expect(h.Get("Retry-After")).To(Equal("1"))
			Expect(body).To(ContainSubstring(`"code":"unknown"`))
			Expect(lr.effect("put-a").Status).To(Equal(protocol.StatusUnknown))

			status, h, body = lr.call(tok, "kv", "POST", "/kv/put", "put-a", put)
			Expect(status).To(Equal(200), body)
			v, puts, _ := kv.state("a")
			Expect(v).To(Equal(1), "the write happened once")
			e := lr.effect("put-a")
			Expect(e.Status).To(Equal(protocol.StatusDone))
			Expect(e.Reconciled).To(BeTrue())
			if happened {
				Expect(h.Get("Overnight-Reconciled")).To(Equal("true"))
				Expect(body).To(MatchJSON(`{"count":"1","version":"1"}`), "the lookup's answer")
				Expect(puts).To(Equal(1), "found upstream: not sent again")
			} else {
				Expect(body).To(MatchJSON(`{"key":"a","version":"1"}`))
				Expect(puts).To(Equal(2), "not found upstream: sent again, once")
			}
			Expect(lr.r.world.Duplicates(context.Background())).To(BeEmpty())
		},
		Entry("a 5xx after the write", "5xx-after", true),
		Entry("a 5xx before it", "5xx-before", false),
		Entry("no answer in time", "slow", true),
		Entry("garbage", "garbage", true),
	)

	It("reconciles a request left in doubt when the run is loaded again (a resume), through the lookup, before the agent retries", func(ctx SpecContext) {
		state := GinkgoT().TempDir()
		h, err := Open(ctx, Options{StateDir: state, Env: kvEnv})
		Expect(err).NotTo(HaveOccurred())
		id, err := h.create(ctx, RunRequest{Scenario: kvScenario(kv.URL, true)})
		Expect(err).NotTo(HaveOccurred())
		lr := liveRunOf(h, id)
		tok := lr.attempt()
		kv.answerNext("5xx-after")
		status, _, _ := lr.call(tok, "kv", "POST", "/kv/put", "put-a", put)
		Expect(status).To(Equal(503))
		kv.answerNext("5xx-before")
		status, _, _ = lr.call(tok, "kv", "POST", "/kv/put", "put-b", `{"key":"b","value":"1"}`)
		Expect(status).To(Equal(503))
		lr.stop()

		h, err = Open(ctx, Options{StateDir: state, Env: kvEnv})
		Expect(err).NotTo(HaveOccurred())
		lr = liveRunOf(h, id)
		a, b := lr.effect("put-a"), lr.effect("put-b")
		Expect(a.Status).To(Equal(protocol.StatusDone), "found upstream by the lookup at load")
		Expect(a.Reconciled).To(BeTrue())
		Expect(b.Status).To(Equal(protocol.StatusFailed))
		Expect(b.Error.Code).To(Equal("not_executed"), "not found: the retry runs it")
		tok = lr.attempt()
		status, h2, _ := lr.call(tok, "kv", "POST", "/kv/put", "put-a", put)
		Expect(status).To(Equal(200))
		Expect(h2.Get("Idempotent-Replayed")).To(Equal("true"))
		status, _, _ = lr.call(tok, "kv", "POST", "/kv/put", "put-b", `{"key":"b","value":"1"}`)
		Expect(status).To(Equal(200))
		va, _, _ := kv.state("a")
		vb, puts, _ := kv.state("b")
		Expect([]int{va, vb, puts}).To(Equal([]int{1, 1, 3}), "a once, b once (after its refusal): three puts sent in all")
	})

	It("keeps a request in doubt, and refuses its retry, when the API declares no lookup", func() {
		lr := liveKVRun(kvScenario(kv.URL, false))
		tok := lr.attempt()
		kv.answerNext("5xx-after")
		status, _, _ := lr.call(tok, "kv", "POST", "/kv/put", "put-a", put)
		Expect(status).To(Equal(503))
		status, _, body := lr.call(tok, "kv", "POST", "/kv/put", "put-a", put)
		Expect(status).To(Equal(409))
		Expect(body).To(ContainSubstring(`"code":"in_doubt"`))
		Expect(body).To(ContainSubstring("HTTP API kv declares no lookup"))
		_, puts, _ := kv.state("a")
		Expect(puts).To(Equal(1), "never sent twice")
		e := lr.effect("put-a")
		Expect(e.InDoubt()).To(BeTrue())
	})

	It("applies the effect path's faults: effect-5xx is a 503 the retry of the key gets past", func() {
		lr := liveKVRun(kvScenario(kv.URL, true), "effect-5xx@effect:1")
		tok := lr.attempt()
		status, h, body := lr.call(tok, "kv", "POST", "/kv/put", "put-a", put)
		Expect(status).To(Equal(503), body)
		Expect(h.Get("Retry-After")).To(Equal("1"))
		Expect(body).To(ContainSubstring(`"code":"unavailable"`))
		_, puts, _ := kv.state("a")
		Expect(puts).To(BeZero(), "the fault answered instead of the upstream")
		status, _, _ = lr.call(tok, "kv", "POST", "/kv/put", "put-a", put)
		Expect(status).To(Equal(200))
	})

	It("shows a non-idempotent request sent twice without a key as a duplicate, as the upstream's own count does; the goal from the probe", func() {
		lr := liveKVRun(kvScenario(kv.URL, true))
		tok := lr.attempt()
		for range 2 {
			status, _, body := lr.call(tok, "kv", "POST", "/kv/put", "", put)
			Expect(status).To(Equal(200), body)
		}
		ctx := context.Background()
		dups, err := lr.r.world.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(dups).To(HaveLen(1))
		Expect(dups[0].Kind).To(Equal("http.kv.put"))
		Expect(dups[0].Name).To(Equal("a"))
		Expect(dups[0].Keys).To(Equal([]string{"u/1", "u/2"}))
		v, _, _ := kv.state("a")
		Expect(v).To(Equal(2), "the upstream counted two writes")
		j, err := invariant.Default().Judge(ctx, invariant.GoalReached, &invariant.Evidence{World: lr.r.world, Task: lr.r.task})
		Expect(err).NotTo(HaveOccurred())
		Expect(j.Verdict).To(Equal(invariant.Fail))
		Expect(j.Detail).To(ContainSubstring("`int(response.version) == 1` does not hold"))
	})

	It("replays a recorded run's exchanges by kind, args and occurrence, sending nothing upstream; a request the recording lacks is refused", func(ctx SpecContext) {
		state := GinkgoT().TempDir()
		scen := kvScenario(kv.URL, true)
		scen.HTTP[0].Mode = scenarios.HTTPRecord
		h, err := Open(ctx, Options{StateDir: state, Env: kvEnv})
		Expect(err).NotTo(HaveOccurred())
		recorded, err := h.create(ctx, RunRequest{Scenario: scen})
		Expect(err).NotTo(HaveOccurred())
		lr := liveRunOf(h, recorded)
		tok := lr.attempt()
		for _, key := range []string{"put-1", "put-2"} {
			status, _, body := lr.call(tok, "kv", "POST", "/kv/put", key, put)
			Expect(status).To(Equal(200), body)
		}
		kv.answerNext("429")
		status, _, _ := lr.call(tok, "kv", "POST", "/kv/put", "", `{"key":"b","value":"1"}`)
		Expect(status).To(Equal(429))
		Expect(lr.ledger()).To(HaveLen(3), "the run's ledger: every exchange, through the router")
		lr.stop()
		_, sent, _ := kv.state("a")

		h, err = Open(ctx, Options{StateDir: state, Env: kvEnv})
		Expect(err).NotTo(HaveOccurred())
		replay := scen.ReplayingHTTP(recorded)
		Expect(h.checkHTTP(replay)).To(Succeed())
		id, err := h.create(ctx, RunRequest{Scenario: scen, HTTPReplay: recorded})
		Expect(err).NotTo(HaveOccurred())
		lr = liveRunOf(h, id)
		tok = lr.attempt()
		var versions []string
		for _, key := range []string{"other-1", "other-2"} {
			status, _, body := lr.call(tok, "kv", "POST", "/kv/put", key, put)
			Expect(status).To(Equal(200), body)
			var b struct{ Version string }
			Expect(json.Unmarshal([]byte(body), &b)).To(Succeed())
			versions = append(versions, b.Version)
		}
		Expect(versions).To(Equal([]string{"1", "2"}), "the n-th request is answered the n-th answer, whatever its key")
		status, h2, body := lr.call(tok, "kv", "POST", "/kv/put", "", `{"key":"b","value":"1"}`)
		Expect(status).To(Equal(429), "a recorded refusal replays too")
		Expect(body).To(MatchJSON(`{"error":"slow down"}`))
		Expect(h2.Get("Retry-After")).To(Equal("3"))
		status, _, body = lr.call(tok, "kv", "POST", "/kv/put", "new", `{"key":"c","value":"1"}`)
		Expect(status).To(Equal(502), body)
		Expect(body).To(ContainSubstring(`"code":"replay_diverged"`))
		Expect(body).To(ContainSubstring("it was not sent upstream"))
		_, puts, _ := kv.state("a")
		Expect(puts).To(Equal(sent), "nothing reached the upstream in the replay")
		Expect(lr.r.rec.HTTPReplay).To(Equal(recorded))
	})

	It("bounds request and answer bodies by the API's max_body, and keeps an answer over 64 KiB as a journal blob, not inline", func() {
		text := strings.Replace(kvScenarioText(kv.URL, true), "    timeout: 300ms\n", "    timeout: 300ms\n    max_body: 200KiB\n", 1)
		text = strings.Replace(text, `      - {route: "POST /kv/get", kind: get, read_only: true}`+"\n",
			`      - {route: "POST /kv/get", kind: get, read_only: true}`+"\n"+`      - {route: "POST /kv/big", kind: big, read_only: true}`+"\n", 1)
		scen, err := scenarios.Parse("kv.yaml", []byte(text))
		Expect(err).NotTo(HaveOccurred())
		Expect(scen.HTTP[0].MaxBody).To(BeEquivalentTo(200 << 10))
		lr := liveKVRun(scen)
		tok := lr.attempt()

		status, _, body := lr.call(tok, "kv", "POST", "/kv/big", "big-1", `{"key":"a","value":"100000"}`)
		Expect(status).To(Equal(200), body)
		Expect(body).To(HaveLen(100000 + len(`{"key":"a","pad":""}`)))
		Expect(body).To(MatchJSON(`{"key":"a","pad":"`+strings.Repeat("x", 100000)+`"}`), "the whole answer, read back from its blob")
		ledger := lr.ledger()
		Expect(ledger).To(HaveLen(1))
		Expect(len(ledger[0].Outcome.Result)).To(BeNumerically("<", 1024), "the journal record refers to the body by hash: %.200s", ledger[0].Outcome.Result)
		Expect(string(ledger[0].Outcome.Result)).To(MatchRegexp(`"body_blob":"[0-9a-f]{64}","body_size":100021`))
		Expect(len(lr.effect("big-1").Result)).To(BeNumerically("<", 1024), "and so does the effect's result")
		status, h, body := lr.call(tok, "kv", "POST", "/kv/big", "big-1", `{"key":"a","value":"100000"}`)
		Expect(status).To(Equal(200))
		Expect(h.Get("Idempotent-Replayed")).To(Equal("true"))
		Expect(body).To(HaveLen(100020), "a repeat is answered from the blob too")

		status, _, body = lr.call(tok, "kv", "POST", "/kv/big", "big-2", `{"key":"a","value":"300000"}`)
		Expect(status).To(Equal(502), body)
		Expect(body).To(ContainSubstring(`"code":"too_large"`))
		Expect(body).To(ContainSubstring("HTTP API kv answered POST /kv/big with 200 OK and a body of more than 204800 bytes, over its max_body (204800)"))
		e := lr.effect("big-2")
		Expect(e.Status).To(Equal(protocol.StatusFailed))
		Expect(e.Error.Code).To(Equal("too_large"))
		Expect(e.Error.Transient).To(BeFalse(), "it reached the upstream: sent again it could happen twice")

		_, puts, _ := kv.state("a")
		status, _, body = lr.call(tok, "kv", "POST", "/kv/put", "put-huge", `{"key":"a","value":"`+strings.Repeat("v", 210<<10)+`"}`)
		Expect(status).To(Equal(413), body)
		Expect(body).To(ContainSubstring("request body over 204800 bytes (the max_body of HTTP API kv); it was not sent"))
		_, after, _ := kv.state("a")
		Expect(after).To(Equal(puts), "nothing reached the upstream")
	})

	It("refuses a run whose credential is not in the harness's environment, before it is recorded", func(ctx SpecContext) {
		h, err := Open(ctx, Options{StateDir: GinkgoT().TempDir(), Env: func(string) string { return "" }})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(h.Close)
		_, err = h.Run(ctx, RunRequest{Scenario: kvScenario(kv.URL, true)})
		Expect(err).To(MatchError(ErrNoCredential))
		Expect(err.Error()).To(ContainSubstring("HTTP API kv needs $KV_TOKEN (its Authorization header)"))
		runs, err := h.History().Runs()
		Expect(err).NotTo(HaveOccurred())
		Expect(runs).To(BeEmpty())
	})
})
