package remote_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// fakeUpstream serves the real cloud world, except that the calls in
// answers get the canned answer (status, body) instead: a world that
// misbehaves, for the fault cases only.
func fakeUpstream(ctx context.Context, answers map[string]func(w http.ResponseWriter, r *http.Request)) string {
	GinkgoHelper()
	srv, err := remote.NewServer(ctx, cloud.Definition(), world.NewMemStore(), nil)
	Expect(err).NotTo(HaveOccurred())
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if answer, ok := answers[r.URL.Path]; ok {
			answer(w, r)
			return
		}
		srv.ServeHTTP(w, r)
	}))
	DeferCleanup(hs.Close)
	return hs.URL
}

func canned(status int, body string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

var _ = Describe("a world that fails", func() {
	createNet := req("k/1", cloud.KindCreateNetwork, `{"name":"n"}`, 0)

	DescribeTable("is the world's fault (ErrWorld), in words naming the world, the call and what it answered",
		func(ctx SpecContext, status int, body, want string) {
			url := fakeUpstream(ctx, map[string]func(http.ResponseWriter, *http.Request){remote.PathApply: canned(status, body)})
			cl := dial(ctx, url, remote.Config{})
			_, err := cl.Execute(ctx, createNet)
			Expect(err).To(MatchError(remote.ErrWorld))
			Expect(err.Error()).To(HavePrefix(`world "cloud" (` + url + `): apply cloud.create_network key k/1: `))
			Expect(err.Error()).To(ContainSubstring(want))
		},
		Entry("non-JSON", 200, "<html>oops</html>", `answered non-JSON: "<html>oops</html>"`),
		Entry("a 502 from a proxy", 502, "bad gateway", `answered 502: "bad gateway"`),
		Entry("a 500 with an error body", 500, `{"error":{"code":"internal","message":"disk full"}}`, "answered 500 internal: disk full"),
		Entry("a 404 that is no refusal of the protocol's", 404, "404 page not found", `answered 404: "404 page not found"`),
		Entry("an outcome of the wrong type", 200, `{"outcome":"done","seq":1}`, "answered a body of the wrong shape"),
		Entry("a status neither done nor failed", 200, `{"outcome":{"status":"maybe"},"seq":1}`, `outcome: status "maybe"; want "done" or "failed"`),
		Entry("a failure without a code", 200, `{"outcome":{"status":"failed","error":{"message":"no"}},"seq":1}`, "outcome: status failed without an error code"),
		Entry("a success with an error", 200, `{"outcome":{"status":"done","error":{"code":"x"}},"seq":1}`, "outcome: status done with an error"),
		Entry("no seq", 200, `{"outcome":{"status":"done"}}`, "answered seq 0"),
		Entry("a long body, cut at 200 bytes", 200, strings.Repeat("x", 500), `"`+strings.Repeat("x", 200)+`"…`),
	)

	It("checks the other answers' shapes too", func(ctx SpecContext) {
		url := fakeUpstream(ctx, map[string]func(http.ResponseWriter, *http.Request){
			remote.PathLedger:     canned(200, `{"entries":[{"seq":2,"kind":"a","outcome":{"status":"done"}},{"seq":1,"kind":"b","outcome":{"status":"done"}}]}`),
			remote.PathLookup:     canned(200, `{"found":true}`),
			remote.PathState:      canned(200, `{"state":{"a":1},"api_version":"v7"}`),
			remote.PathGoal:       canned(200, `{"detail":"no ok"}`),
			remote.PathSetVersion: canned(200, `{"previous":"v1","version":"v1"}`),
		})
		cl := dial(ctx, url, remote.Config{})
		_, err := cl.Ledger(ctx)
		Expect(err).To(MatchError(remote.ErrWorld))
		Expect(err.Error()).To(ContainSubstring("entries[1]: seq 1 after seq 2; want them increasing"))
		_, _, err = cl.Lookup(ctx, "k/1")
		Expect(err).To(MatchError(remote.ErrWorld))
		Expect(err.Error()).To(ContainSubstring("lookup key k/1: answered found without an outcome"))
		_, err = cl.Snapshot(ctx)
		Expect(err).To(MatchError(remote.ErrWorld))
		Expect(err.Error()).To(ContainSubstring(`answered api_version "v7", which is not among the versions it described (v1, v2)`))
		_, err = cl.CheckGoal(ctx, deployTask)
		Expect(err).To(MatchError(remote.ErrWorld))
		Expect(err.Error()).To(ContainSubstring(`goal: answered no "ok"`))
		_, err = cl.SetAPIVersion(ctx, cloud.V2, t0)
		Expect(err).To(MatchError(remote.ErrWorld))
		Expect(err.Error()).To(ContainSubstring(`set_version v2: answered version "v1"`))
	})

	It("maps 501 unsupported to a refusal, the goal's wrapping world.ErrNoGoal", func(ctx SpecContext) {
		url := fakeUpstream(ctx, map[string]func(http.ResponseWriter, *http.Request){
			remote.PathGoal: canned(501, `{"error":{"code":"unsupported","message":"no goal today"}}`),
		})
		_, err := dial(ctx, url, remote.Config{}).CheckGoal(ctx, deployTask)
		Expect(err).To(MatchError(world.ErrNoGoal))
		Expect(err).NotTo(MatchError(remote.ErrWorld))
		Expect(err.Error()).To(ContainSubstring("goal: refused (501 unsupported): no goal today"))
	})

	It("is unreachable once it is down: connection refused", func(ctx SpecContext) {
		srv, err := remote.NewServer(ctx, cloud.Definition(), world.NewMemStore(), nil)
		Expect(err).NotTo(HaveOccurred())
		hs := httptest.NewServer(srv)
		cl := dial(ctx, hs.URL, remote.Config{Label: "world inventory"})
		hs.Close()
		_, err = cl.Execute(ctx, createNet)
		Expect(err).To(MatchError(remote.ErrWorld))
		Expect(err.Error()).To(HavePrefix("world inventory: apply cloud.create_network key k/1: unreachable: "))
		Expect(err.Error()).To(ContainSubstring("connection refused"))

		_, err = remote.Dial(ctx, hs.URL, remote.Config{})
		Expect(err).To(MatchError(remote.ErrWorld))
		Expect(err.Error()).To(HavePrefix("world at " + hs.URL + ": describe: unreachable: "))
		Expect(err.Error()).To(ContainSubstring("connection refused"))
	})

	It("times out a call after Config.Timeout, and a caller's own cancel is not the world's fault", func(ctx SpecContext) {
		url := fakeUpstream(ctx, map[string]func(http.ResponseWriter, *http.Request){
			remote.PathApply: func(_ http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client hang up
				select {
				case <-r.Context().Done():
				case <-time.After(10 * time.Second):
				}
			},
		})
		cl := dial(ctx, url, remote.Config{Timeout: 100 * time.Millisecond})
		start := time.Now()
		_, err := cl.Execute(ctx, createNet)
		Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
		Expect(err).To(MatchError(remote.ErrWorld))
		Expect(err).To(MatchError(context.DeadlineExceeded))
		Expect(err.Error()).To(HaveSuffix("apply cloud.create_network key k/1: no answer within 100ms"))

		patient := dial(ctx, url, remote.Config{Timeout: time.Minute})
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err = patient.Execute(cctx, createNet)
		Expect(err).To(MatchError(context.DeadlineExceeded))
		Expect(err).NotTo(MatchError(remote.ErrWorld))
	})

	It("is refused at Dial when it is no world of this protocol, naming the URL and what it answered", func(ctx SpecContext) {
		other := fakeUpstream(ctx, map[string]func(http.ResponseWriter, *http.Request){
			remote.PathDescribe: canned(200, `{"protocol":"overnight-world/2","name":"cloud","versions":[{"name":"v1","kinds":[]}]}`),
		})
		_, err := remote.Dial(ctx, other, remote.Config{})
		Expect(err).To(MatchError(remote.ErrWorld))
		Expect(err.Error()).To(ContainSubstring(`world at ` + other + `: describe: answered protocol "overnight-world/2"; this client speaks overnight-world/1`))

		web := fakeUpstream(ctx, map[string]func(http.ResponseWriter, *http.Request){
			remote.PathDescribe: canned(404, "<html>Not Found</html>"),
		})
		_, err = remote.Dial(ctx, web, remote.Config{})
		Expect(err).To(MatchError(remote.ErrWorld))
		Expect(err.Error()).To(ContainSubstring(`describe: answered 404: "<html>Not Found</html>"`))

		noVersions := fakeUpstream(ctx, map[string]func(http.ResponseWriter, *http.Request){
			remote.PathDescribe: canned(200, `{"protocol":"overnight-world/1","name":"x","versions":[]}`),
		})
		_, err = remote.Dial(ctx, noVersions, remote.Config{})
		Expect(err).To(MatchError(remote.ErrWorld))
		Expect(err.Error()).To(ContainSubstring("answered no versions"))

		_, err = remote.Dial(ctx, "127.0.0.1:8080", remote.Config{})
		Expect(err).To(MatchError(ContainSubstring(`world URL "127.0.0.1:8080": want http://HOST:PORT`)))
	})
})

// notesDef is a world without goal, duplicates or versions: the smallest
// model, one kind.
func notesDef() world.Definition {
	return world.Definition{Name: "notes", Open: func(context.Context, world.Reader, map[string]any) (world.Model, error) { return notes{}, nil }}
}

type notes struct{}

func (notes) Name() string { return "notes" }
func (notes) Kinds() []world.KindInfo {
	return []world.KindInfo{{Name: "notes.put", Args: "{text}", Result: "{text}"}}
}
func (notes) Apply(_ context.Context, r world.Request) (world.Outcome, world.Change, error) {
	o, err := world.Done(json.RawMessage(r.Args))
	return o, world.Change{}, err
}

var _ = Describe("a world without the optional capabilities", func() {
	It("is described so, and the client answers for what it lacks without calling it", func(ctx SpecContext) {
		srv, err := remote.NewServer(ctx, notesDef(), world.NewMemStore(), nil)
		Expect(err).NotTo(HaveOccurred())
		calls := map[string]int{}
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls[r.URL.Path]++
			srv.ServeHTTP(w, r)
		}))
		DeferCleanup(hs.Close)
		cl := dial(ctx, hs.URL, remote.Config{})
		d := cl.Description()
		Expect(d.Capabilities).To(Equal(remote.Capabilities{Instances: true}))
		Expect(d.Versions).To(Equal([]remote.Version{{Name: "v1", Kinds: notes{}.Kinds()}}))
		Expect(cl.APIVersion()).To(Equal("v1"))

		o := apply(ctx, cl, req("k/1", "notes.put", `{"text":"hi"}`, 0))
		Expect(o.Result).To(MatchJSON(`{"text":"hi"}`))
		dups, err := cl.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(dups).To(BeNil())
		_, err = cl.CheckGoal(ctx, nil)
		Expect(err).To(MatchError(world.ErrNoGoal))
		Expect(err.Error()).To(ContainSubstring("goal: refused (unsupported, by the client from its description)"))
		prev, err := cl.SetAPIVersion(ctx, "v1", t0)
		Expect(err).NotTo(HaveOccurred())
		Expect(prev).To(Equal("v1"))
		_, err = cl.SetAPIVersion(ctx, "v2", t0)
		Expect(err).To(MatchError(world.ErrUnknownAPIVersion))
		Expect(calls).To(Equal(map[string]int{remote.PathDescribe: 1, remote.PathApply: 1}), "nothing else was sent")

		st, err := cl.Snapshot(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(st).To(MatchJSON(`{"world":"notes","ledger_seq":1}`))

		for path, request := range map[string]string{remote.PathGoal: `{"task":{}}`, remote.PathDuplicates: `{}`, remote.PathSetVersion: `{"version":"v2"}`} {
			status, body := post(ctx, hs.URL+path, request)
			Expect(status).To(Equal(501), path)
			var eb remote.ErrorBody
			Expect(json.Unmarshal([]byte(body), &eb)).To(Succeed(), body)
			Expect(eb.Error.Code).To(Equal(remote.CodeUnsupported), path)
		}
	})
})
