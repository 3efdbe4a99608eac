package reflect_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// withoutInstances serves next as a world that offers no instances: its
// describe says so and create_instance is refused, as a world over the
// protocol that cannot be copied answers.
func withoutInstances(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case remote.PathCreateInstance, remote.PathDropInstance:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotImplemented)
			_ = json.NewEncoder(w).Encode(remote.ErrorBody{Error: remote.CallError{Code: remote.CodeUnsupported, Message: "this world has no instances"}})
		case remote.PathDescribe:
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			var d remote.Description
			Expect(json.Unmarshal(rec.Body.Bytes(), &d)).To(Succeed())
			d.Capabilities.Instances = false
			b, _ := json.Marshal(d)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

var _ = Describe("reflection on a world over the world protocol", func() {
	It("verifies on an instance of the world, never on the real one", func(ctx SpecContext) {
		srv, err := remote.NewServer(ctx, cloud.Definition(), world.NewMemStore(), nil)
		Expect(err).NotTo(HaveOccurred())
		ts := httptest.NewServer(srv)
		defer ts.Close()
		h := open(ctx)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deployV2(), World: ts.URL})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Reflections).To(HaveLen(1))
		// The real world holds the run's requests only: the replays and the
		// verification acted on instances.
		c, err := remote.Dial(ctx, ts.URL, remote.Config{})
		Expect(err).NotTo(HaveOccurred())
		ledger, err := c.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		for _, e := range ledger {
			if !e.IsEvent() {
				Expect(e.Key).To(HavePrefix(res.RunID+"/"), "entry %d is not the run's own", e.Seq)
			}
		}
	}, SpecTimeout(4*time.Minute))

	It("says a world without instances has no shadow, and keeps the gate shut: the real world is never reset or verified on", func(ctx SpecContext) {
		srv, err := remote.NewServer(ctx, cloud.Definition(), world.NewMemStore(), nil)
		Expect(err).NotTo(HaveOccurred())
		ts := httptest.NewServer(withoutInstances(srv))
		defer ts.Close()
		h := open(ctx)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: deployV2(), World: ts.URL})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictFail))
		Expect(res.Reason).To(ContainSubstring("offers no instances"))
		Expect(res.Reflections).To(HaveLen(1))
		c, err := remote.Dial(ctx, ts.URL, remote.Config{})
		Expect(err).NotTo(HaveOccurred())
		ledger, err := c.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		deploys := 0
		for _, e := range ledger {
			Expect(e.Key == "" || bytes.HasPrefix([]byte(e.Key), []byte(res.RunID+"/"))).To(BeTrue(), "entry %d is not the run's own", e.Seq)
			if e.Kind == cloud.KindDeployService {
				deploys++
			}
		}
		Expect(deploys).To(Equal(1), "only the first, refused deploy ever reached the world: the gate stayed shut")
	}, SpecTimeout(4*time.Minute))
})
