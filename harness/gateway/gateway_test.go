package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// recordingBackend is a unit-test double for the protocol layer: it
// records what the gateway passed it. The real backend is tested against
// the real gateway in the harness package.
type recordingBackend struct {
	mu      sync.Mutex
	calls   []string
	efReq   protocol.EffectRequest
	cpReq   protocol.PutCheckpoint
	failPut error
}

func (b *recordingBackend) note(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, s)
}

func (b *recordingBackend) Authenticate(token string) (gateway.Caller, bool) {
	switch token {
	case "good":
		return gateway.Caller{Attempt: 2}, true
	case "old":
		return gateway.Caller{Attempt: 1}, true
	}
	return gateway.Caller{}, false
}
func (b *recordingBackend) RunInfo(ctx context.Context, c gateway.Caller) (protocol.RunInfo, error) {
	b.note("run")
	return protocol.RunInfo{RunID: "r1", Attempt: c.Attempt, Task: json.RawMessage(`{}`)}, nil
}
func (b *recordingBackend) Checkpoint(ctx context.Context, c gateway.Caller) (protocol.Checkpoint, error) {
	b.note("checkpoint")
	return protocol.Checkpoint{}, nil
}
func (b *recordingBackend) PutCheckpoint(ctx context.Context, c gateway.Caller, req protocol.PutCheckpoint) (protocol.CheckpointAck, error) {
	b.note("put")
	b.cpReq = req
	if c.Attempt != 2 {
		return protocol.CheckpointAck{}, gateway.Errorf(409, protocol.CodeFenced, "attempt %d is fenced", c.Attempt)
	}
	if b.failPut != nil {
		return protocol.CheckpointAck{}, b.failPut
	}
	return protocol.CheckpointAck{Seq: 7}, nil
}
func (b *recordingBackend) Effect(ctx context.Context, c gateway.Caller, req protocol.EffectRequest) (protocol.EffectResult, error) {
	b.note("effect")
	b.efReq = req
	return protocol.EffectResult{Status: protocol.StatusDone, Result: json.RawMessage(`{"ok":true}`)}, nil
}
func (b *recordingBackend) Clock(ctx context.Context, c gateway.Caller) (protocol.Clock, error) {
	return protocol.Clock{Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, nil
}
func (b *recordingBackend) Sleep(ctx context.Context, c gateway.Caller, req protocol.SleepRequest) (protocol.Clock, error) {
	b.note("sleep")
	return protocol.Clock{}, nil
}
func (b *recordingBackend) Event(ctx context.Context, c gateway.Caller, ev protocol.Event) error {
	b.note("event:" + ev.Type)
	return nil
}
func (b *recordingBackend) Done(ctx context.Context, c gateway.Caller, d protocol.Done) error {
	b.note("done:" + d.Outcome)
	return nil
}

// serve starts a gateway on a real unix socket and returns an HTTP client for it.
func serve(b gateway.Backend) *http.Client {
	dir, err := os.MkdirTemp("", "ovn-gw-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	sock := filepath.Join(dir, gateway.SocketName)
	l, err := net.Listen("unix", sock)
	Expect(err).NotTo(HaveOccurred())
	srv := gateway.New(b, nil)
	go func() { _ = srv.Serve(l) }()
	DeferCleanup(srv.Close)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
}

type reply struct {
	status int
	body   []byte
}

func (r reply) errCode() string {
	var eb protocol.ErrorBody
	ExpectWithOffset(1, json.Unmarshal(r.body, &eb)).To(Succeed(), string(r.body))
	return eb.Error.Code
}

func call(c *http.Client, method, path, token string, body string) reply {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://gateway"+path, rd)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	ExpectWithOffset(1, resp.Header.Get("Content-Type")).To(Equal("application/json"))
	return reply{resp.StatusCode, b}
}

var _ = Describe("the gateway protocol layer", func() {
	var (
		b *recordingBackend
		c *http.Client
	)
	BeforeEach(func() {
		b = &recordingBackend{}
		c = serve(b)
	})

	It("refuses a missing or unknown token with 401 and an error body", func() {
		r := call(c, "GET", "/v1/run", "", "")
		Expect(r.status).To(Equal(401))
		Expect(r.errCode()).To(Equal(protocol.CodeUnauthorized))
		r = call(c, "GET", "/v1/run", "forged", "")
		Expect(r.status).To(Equal(401))
		Expect(b.calls).To(BeEmpty())
	})

	It("serves run info to a known token", func() {
		r := call(c, "GET", "/v1/run", "good", "")
		Expect(r.status).To(Equal(200))
		var info protocol.RunInfo
		Expect(json.Unmarshal(r.body, &info)).To(Succeed())
		Expect(info.Attempt).To(Equal(2))
	})

	It("maps backend protocol errors to their status and code", func() {
		r := call(c, "PUT", "/v1/checkpoint", "old", `{"step":1,"state":{}}`)
		Expect(r.status).To(Equal(409))
		Expect(r.errCode()).To(Equal(protocol.CodeFenced))
	})

	It("maps other backend errors to 500 internal", func() {
		b.failPut = io.ErrUnexpectedEOF
		r := call(c, "PUT", "/v1/checkpoint", "good", `{"step":1,"state":{}}`)
		Expect(r.status).To(Equal(500))
		Expect(r.errCode()).To(Equal(protocol.CodeInternal))
	})

	DescribeTable("rejects malformed bodies with 400 bad_request, before the backend sees them",
		func(method, path, body, wantInMessage string) {
			r := call(c, method, path, "good", body)
			Expect(r.status).To(Equal(400), string(r.body))
			Expect(r.errCode()).To(Equal(protocol.CodeBadRequest))
			Expect(string(r.body)).To(ContainSubstring(wantInMessage))
			Expect(b.calls).To(BeEmpty())
		},
		Entry("not JSON", "PUT", "/v1/checkpoint", `{"step":`, "not valid JSON"),
		Entry("unknown field", "PUT", "/v1/checkpoint", `{"step":1,"stat":{}}`, "unknown field"),
		Entry("wrong type", "PUT", "/v1/checkpoint", `{"step":"one"}`, "step"),
		Entry("negative step", "PUT", "/v1/checkpoint", `{"step":-1}`, "step -1"),
		Entry("trailing data", "POST", "/v1/effects", `{"kind":"x"} {}`, "trailing"),
		Entry("effect without kind", "POST", "/v1/effects", `{"key":"k"}`, "kind is required"),
		Entry("sleep with both", "POST", "/v1/sleep", `{"seconds":1,"until":"2026-01-01T00:00:00Z"}`, "exactly one"),
		Entry("sleep with neither", "POST", "/v1/sleep", `{}`, "exactly one"),
		Entry("event without type", "POST", "/v1/events", `{"message":"hi"}`, "type is required"),
		Entry("done with a bad outcome", "POST", "/v1/done", `{"outcome":"maybe"}`, "outcome"),
	)

	It("refuses a body over the limit with 413", func() {
		big := `{"kind":"x","args":"` + strings.Repeat("a", gateway.MaxBodyBytes) + `"}`
		r := call(c, "POST", "/v1/effects", "good", big)
		Expect(r.status).To(Equal(413))
		Expect(r.errCode()).To(Equal(protocol.CodeTooLarge))
	})

	It("refuses effect args and event data over their limits with 413", func() {
		r := call(c, "POST", "/v1/effects", "good", `{"kind":"x","args":"`+strings.Repeat("a", gateway.MaxEffectArgsBytes)+`"}`)
		Expect(r.status).To(Equal(413))
		Expect(r.errCode()).To(Equal(protocol.CodeTooLarge))
		r = call(c, "POST", "/v1/events", "good", `{"type":"x","data":"`+strings.Repeat("a", gateway.MaxEventDataBytes)+`"}`)
		Expect(r.status).To(Equal(413))
		Expect(b.calls).To(BeEmpty())
	})

	It("answers unknown paths with 404, wrong methods with 405 and the LLM endpoint with 501", func() {
		r := call(c, "GET", "/v2/run", "good", "")
		Expect(r.status).To(Equal(404))
		Expect(r.errCode()).To(Equal(protocol.CodeNotFound))
		r = call(c, "DELETE", "/v1/checkpoint", "good", "")
		Expect(r.status).To(Equal(405))
		Expect(r.errCode()).To(Equal(protocol.CodeMethod))
		r = call(c, "POST", "/v1/llm/chat/completions", "good", `{}`)
		Expect(r.status).To(Equal(501))
		Expect(r.errCode()).To(Equal(protocol.CodeNotImplemented))
	})

	It("passes a well-formed effect through, defaulting empty args to {}", func() {
		r := call(c, "POST", "/v1/effects", "good", `{"key":"step-1/0","kind":"cloud.list"}`)
		Expect(r.status).To(Equal(200))
		Expect(b.efReq.Key).To(Equal("step-1/0"))
		Expect(string(b.efReq.Args)).To(Equal("{}"))
		var res protocol.EffectResult
		Expect(json.Unmarshal(r.body, &res)).To(Succeed())
		Expect(res.Status).To(Equal(protocol.StatusDone))
	})

	It("acknowledges events with 202", func() {
		r := call(c, "POST", "/v1/events", "good", `{"type":"progress","message":"hi"}`)
		Expect(r.status).To(Equal(202))
		Expect(b.calls).To(ContainElement("event:progress"))
	})

})

var _ = Describe("ExampleBody", func() {
	It("round-trips the protocol's error body", func() {
		var buf bytes.Buffer
		Expect(json.NewEncoder(&buf).Encode(protocol.ErrorBody{Error: protocol.ErrorDetail{Code: "x", Message: "y"}})).To(Succeed())
		Expect(buf.String()).To(Equal(`{"error":{"code":"x","message":"y"}}` + "\n"))
	})
})

// holdingBackend holds every reply to attempt 2 until release is closed.
type holdingBackend struct {
	recordingBackend
	release chan struct{}
}

func (b *holdingBackend) HoldReply(ctx context.Context, c gateway.Caller) {
	if c.Attempt != 2 {
		return
	}
	select {
	case <-b.release:
	case <-ctx.Done():
	}
}

var _ = Describe("a Holder backend", func() {
	It("has the backend act at once and the reply wait until the hold is released; other attempts are not held", func() {
		b := &holdingBackend{release: make(chan struct{})}
		c := serve(b)
		got := make(chan reply, 1)
		go func() {
			defer GinkgoRecover()
			got <- call(c, "PUT", "/v1/checkpoint", "good", `{"step":1,"state":{}}`)
		}()
		Eventually(func() []string {
			b.mu.Lock()
			defer b.mu.Unlock()
			return append([]string(nil), b.calls...)
		}).Should(ContainElement("put"), "the checkpoint is handled while its reply is held")
		Consistently(got, 200*time.Millisecond).ShouldNot(Receive())
		Expect(call(c, "GET", "/v1/run", "old", "").status).To(Equal(http.StatusOK), "attempt 1 is not held")
		close(b.release)
		var r reply
		Eventually(got).Should(Receive(&r))
		Expect(r.status).To(Equal(http.StatusOK), string(r.body))
	})
})
