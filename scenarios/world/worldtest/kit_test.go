package worldtest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
	"github.com/overnight-dev/overnight/scenarios/world/worldtest"
)

// cloudServer is the cloud world served over the protocol, in memory.
func cloudServer(ctx context.Context) *remote.Server {
	GinkgoHelper()
	srv, err := remote.NewServer(ctx, cloud.Definition(), world.NewMemStore(), nil)
	Expect(err).NotTo(HaveOccurred())
	return srv
}

// serve serves h on a real loopback HTTP server, closed after the spec.
func serve(h http.Handler) string {
	hs := httptest.NewServer(h)
	DeferCleanup(hs.Close)
	return hs.URL
}

// verdicts is each rule's verdict, and the report's lines for a message.
func verdicts(r worldtest.Report) (map[string]worldtest.Verdict, string) {
	got := map[string]worldtest.Verdict{}
	var lines []string
	for _, x := range r.Results {
		got[x.Rule] = x.Verdict
		lines = append(lines, x.String())
	}
	return got, strings.Join(lines, "\n")
}

// want is every rule passing but those named.
func want(others map[string]worldtest.Verdict) map[string]worldtest.Verdict {
	out := map[string]worldtest.Verdict{}
	for _, r := range worldtest.Rules() {
		out[r] = worldtest.Pass
	}
	for r, v := range others {
		out[r] = v
	}
	return out
}

var _ = Describe("the world conformance kit", func() {
	It("passes on the cloud world served over the protocol, every rule but crash-reconciled (which needs a command)", func(ctx SpecContext) {
		url := serve(cloudServer(ctx))
		report := worldtest.Check(ctx, url, worldtest.Options{})
		got, text := verdicts(report)
		GinkgoWriter.Println(text)
		Expect(report.Err).NotTo(HaveOccurred())
		Expect(report.World).To(Equal("cloud"))
		Expect(got).To(Equal(want(map[string]worldtest.Verdict{"crash-reconciled": worldtest.Skip})), text)
		Expect(report.OK()).To(BeTrue())
	})
})
