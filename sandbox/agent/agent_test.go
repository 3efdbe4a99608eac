package agent_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox/agent"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// standIn is a unit-test double of the gateway on a real unix socket: it
// answers the protocol's shapes and records the effect keys it saw. The
// SDK against the real gateway and backend is tested in package harness.
type standIn struct {
	mu        sync.Mutex
	keys      []string
	seq       int64
	effects   atomic.Int32
	dropFirst atomic.Bool // close the connection of the first effect without a reply
}

func (s *standIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer tok" {
		w.WriteHeader(401)
		_, _ = io.WriteString(w, `{"error":{"code":"unauthorized","message":"no"}}`)
		return
	}
	switch r.URL.Path {
	case "/v1/checkpoint":
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.Method == http.MethodGet {
			_ = json.NewEncoder(w).Encode(protocol.Checkpoint{Seq: s.seq, Step: int(s.seq), State: json.RawMessage(`null`)})
			return
		}
		var req protocol.PutCheckpoint
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.ExpectSeq != nil && *req.ExpectSeq != s.seq {
			w.WriteHeader(409)
			_, _ = io.WriteString(w, `{"error":{"code":"conflict","message":"stale"}}`)
			return
		}
		s.seq++
		_ = json.NewEncoder(w).Encode(protocol.CheckpointAck{Seq: s.seq})
	case "/v1/effects":
		n := s.effects.Add(1)
		if n == 1 && s.dropFirst.Load() {
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			_ = conn.Close()
			return
		}
		var req protocol.EffectRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		s.mu.Lock()
		s.keys = append(s.keys, req.Key)
		s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(protocol.EffectResult{Key: req.Key, Status: "done", Result: json.RawMessage(`{}`)})
	default:
		w.WriteHeader(404)
		_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no"}}`)
	}
}

func listen(sock string, h http.Handler) {
	l, err := net.Listen("unix", sock)
	Expect(err).NotTo(HaveOccurred())
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(l) }()
	DeferCleanup(srv.Close)
}

func sockPath() string {
	dir, err := os.MkdirTemp("", "ovn-sdk-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	return filepath.Join(dir, "g.sock")
}

var _ = Describe("the agent SDK", func() {
	ctx := context.Background()

	It("refuses to start without a token or an address", func() {
		_, err := agent.New(agent.Options{Socket: "/x.sock"})
		if os.Getenv(protocol.EnvToken) == "" {
			Expect(err).To(MatchError(ContainSubstring(protocol.EnvToken)))
		}
		_, err = agent.New(agent.Options{Token: "t"})
		if os.Getenv(protocol.EnvSocket) == "" && os.Getenv(protocol.EnvURL) == "" {
			Expect(err).To(MatchError(ContainSubstring("no gateway address")))
		}
	})

	It("derives effect keys from the checkpointed step", func() {
		sock := sockPath()
		s := &standIn{}
		listen(sock, s)
		c, err := agent.New(agent.Options{Socket: sock, Token: "tok"})
		Expect(err).NotTo(HaveOccurred())
		_, err = c.Resume(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.NextKey()).To(Equal("step-1/0"))
		_, _ = c.Effect(ctx, "k", nil)
		_, _ = c.Effect(ctx, "k", nil)
		_, err = c.Checkpoint(ctx, 1, nil)
		Expect(err).NotTo(HaveOccurred())
		_, _ = c.Effect(ctx, "k", nil)
		Expect(s.keys).To(Equal([]string{"step-1/0", "step-1/1", "step-2/0"}))
		Expect(c.Step()).To(Equal(1))

		// A second client resuming at the same checkpoint derives the same keys.
		c2, err := agent.New(agent.Options{Socket: sock, Token: "tok"})
		Expect(err).NotTo(HaveOccurred())
		cp, err := c2.Resume(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(cp.Seq).To(Equal(int64(1)))
		Expect(c2.NextKey()).To(Equal("step-2/0"))
	})

	It("maps protocol errors to sentinels", func() {
		sock := sockPath()
		s := &standIn{}
		listen(sock, s)
		c, err := agent.New(agent.Options{Socket: sock, Token: "tok"})
		Expect(err).NotTo(HaveOccurred())
		_, err = c.Resume(ctx)
		Expect(err).NotTo(HaveOccurred())
		s.mu.Lock()
		s.seq = 5 // someone else moved the checkpoint
		s.mu.Unlock()
		_, err = c.Checkpoint(ctx, 1, nil)
		Expect(err).To(MatchError(agent.ErrConflict))
		var apiErr *agent.APIError
		Expect(err).To(BeAssignableToTypeOf(apiErr))

		bad, err := agent.New(agent.Options{Socket: sock, Token: "wrong"})
		Expect(err).NotTo(HaveOccurred())
		_, err = bad.Run(ctx)
		Expect(err).To(MatchError(ContainSubstring("401 unauthorized")))
	})

	It("waits for a gateway that is not up yet, within RetryFor", func() {
		sock := sockPath()
		c, err := agent.New(agent.Options{Socket: sock, Token: "tok", RetryFor: 10 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		go func() {
			defer GinkgoRecover()
			time.Sleep(300 * time.Millisecond)
			listen(sock, &standIn{})
		}()
		cp, err := c.Resume(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(cp.Seq).To(Equal(int64(0)))
	})

	It("gives up after RetryFor with ErrUnavailable", func() {
		c, err := agent.New(agent.Options{Socket: sockPath(), Token: "tok", RetryFor: 300 * time.Millisecond})
		Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		_, err = c.Now(ctx)
		Expect(err).To(MatchError(agent.ErrUnavailable))
		Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
	})

	It("retries a keyed effect whose reply was lost, but never an unkeyed one", func() {
		sock := sockPath()
		s := &standIn{}
		s.dropFirst.Store(true)
		listen(sock, s)
		c, err := agent.New(agent.Options{Socket: sock, Token: "tok", RetryFor: 5 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		res, err := c.EffectWithKey(ctx, "k1", "x", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Status).To(Equal("done"))
		Expect(s.effects.Load()).To(Equal(int32(2)), "sent twice: the first reply was lost")

		s.effects.Store(0)
		_, err = c.EffectUnkeyed(ctx, "x", nil)
		Expect(err).To(HaveOccurred(), "an unkeyed effect may have run: it must not be sent again")
		Expect(s.effects.Load()).To(Equal(int32(1)))
	})
})
