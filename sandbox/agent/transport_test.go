package agent_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox/agent"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// countingServer serves h on sock and counts the connections it accepts.
// stop closes it, with every connection, idle ones included.
func countingServer(sock string, h http.Handler) (conns *atomic.Int32, stop func()) {
	GinkgoHelper()
	conns = &atomic.Int32{}
	l, err := net.Listen("unix", sock)
	Expect(err).NotTo(HaveOccurred())
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}}
	go func() { _ = srv.Serve(l) }()
	DeferCleanup(srv.Close)
	return conns, func() { _ = srv.Close() }
}

var _ = Describe("the SDK's connection to the gateway socket", func() {
	ctx := context.Background()

	It("makes call after call on one kept-alive connection", func() {
		sock := sockPath()
		conns, _ := countingServer(sock, &standIn{})
		c, err := agent.New(agent.Options{Socket: sock, Token: "tok"})
		Expect(err).NotTo(HaveOccurred())
		_, err = c.Resume(ctx)
		Expect(err).NotTo(HaveOccurred())
		for i := range 200 {
			res, err := c.EffectWithKey(ctx, "k", "x", map[string]int{"i": i})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Status).To(Equal("done"))
			_, err = c.Checkpoint(ctx, i+1, nil)
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(conns.Load()).To(Equal(int32(1)))
	})

	It("dials again, and sends even an unkeyed effect, when the gateway closed the idle connection", func() {
		sock := sockPath()
		s := &standIn{}
		first, stop := countingServer(sock, s)
		c, err := agent.New(agent.Options{Socket: sock, Token: "tok", RetryFor: time.Second})
		Expect(err).NotTo(HaveOccurred())
		_, err = c.EffectUnkeyed(ctx, "x", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(first.Load()).To(Equal(int32(1)))

		stop() // a harness that died and came back: the kept connection is gone
		second, _ := countingServer(sock, s)
		res, err := c.EffectUnkeyed(ctx, "x", nil)
		Expect(err).NotTo(HaveOccurred(), "the stale connection was never used")
		Expect(res.Status).To(Equal("done"))
		Expect(second.Load()).To(Equal(int32(1)))
		Expect(s.effects.Load()).To(Equal(int32(2)), "each effect reached the gateway once")
	})

	It("ends a call when its context ends, and makes the next one on a new connection", func() {
		sock := sockPath()
		release := make(chan struct{})
		DeferCleanup(func() { close(release) })
		s := &standIn{}
		conns, _ := countingServer(sock, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/clock" {
				select { // a gateway that holds the call
				case <-release:
				case <-r.Context().Done():
				}
				return
			}
			s.ServeHTTP(w, r)
		}))
		c, err := agent.New(agent.Options{Socket: sock, Token: "tok", RetryFor: time.Second})
		Expect(err).NotTo(HaveOccurred())
		_, err = c.Resume(ctx)
		Expect(err).NotTo(HaveOccurred())
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err = c.Now(short)
		Expect(err).To(MatchError(context.DeadlineExceeded))
		Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
		_, err = c.Resume(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(conns.Load()).To(Equal(int32(2)), "the held connection was given up")
	})

	It("returns the gateway's answer to a body over its limit, not a transport error", func() {
		sock := sockPath()
		countingServer(sock, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<10)); err != nil {
				w.WriteHeader(http.StatusRequestEntityTooLarge)
				_, _ = io.WriteString(w, `{"error":{"code":"too_large","message":"request body over 1024 bytes"}}`)
				return
			}
			_, _ = io.WriteString(w, `{"seq":1}`)
		}))
		c, err := agent.New(agent.Options{Socket: sock, Token: "tok", RetryFor: time.Second})
		Expect(err).NotTo(HaveOccurred())
		_, err = c.Checkpoint(ctx, 1, strings.Repeat("x", 8<<20))
		var apiErr *agent.APIError
		Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
		Expect(apiErr.Status).To(Equal(http.StatusRequestEntityTooLarge))
		Expect(apiErr.Code).To(Equal(protocol.CodeTooLarge))
		seq, err := c.Checkpoint(ctx, 1, "small")
		Expect(err).NotTo(HaveOccurred())
		Expect(seq).To(Equal(int64(1)))
	})
})
