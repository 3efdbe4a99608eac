package remote_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// t0 is the virtual time of the specs' requests.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// serveCloud serves the cloud world on store over a real loopback HTTP
// server (closed after the spec) and returns its base URL.
func serveCloud(ctx context.Context, store world.Store, options map[string]any) string {
	GinkgoHelper()
	srv, err := remote.NewServer(ctx, cloud.Definition(), store, options)
	Expect(err).NotTo(HaveOccurred())
	hs := httptest.NewServer(srv)
	DeferCleanup(hs.Close)
	return hs.URL
}

// dial dials url with cfg, failing the spec on an error.
func dial(ctx context.Context, url string, cfg remote.Config) *remote.Client {
	GinkgoHelper()
	c, err := remote.Dial(ctx, url, cfg)
	Expect(err).NotTo(HaveOccurred())
	return c
}

// inProcess is the cloud world as the harness opens it in-process.
func inProcess(ctx context.Context, options map[string]any) world.World {
	GinkgoHelper()
	w, err := cloud.Definition().Instance(ctx, world.NewMemStore(), []byte("p/"), options)
	Expect(err).NotTo(HaveOccurred())
	return w
}

// req is an effect request at t0 plus n minutes.
func req(key, kind, args string, n int) world.Request {
	return world.Request{Key: key, Kind: kind, Args: json.RawMessage(args), Now: t0.Add(time.Duration(n) * time.Minute)}
}

// apply executes r on w, failing the spec on an error.
func apply(ctx context.Context, w world.World, r world.Request) world.Outcome {
	GinkgoHelper()
	o, err := w.Execute(ctx, r)
	Expect(err).NotTo(HaveOccurred())
	return o
}

// resultID is the id in a done outcome's result.
func resultID(o world.Outcome) string {
	GinkgoHelper()
	var r struct {
		ID string `json:"id"`
	}
	Expect(json.Unmarshal(o.Result, &r)).To(Succeed(), "result %s", o.Result)
	return r.ID
}
