package harness

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/agent"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
)

const backendScenario = `apiVersion: overnight/v1
kind: Scenario
name: backend-test
world: cloud
agent: {builtin: deployer}
task: {network: n, database: d, migration: 1, service: {name: s, image: i}, dns: s.example.com}
limits: {horizon: 10d}
`

// liveRun is a run served by the real gateway on a real unix socket, with
// the real backend, journal and cloud world — but with no container: the
// test plays the agent's attempts itself.
type liveRun struct {
	h    *Harness
	r    *run
	sock string
	stop func()
}

func startLiveRun(stateDir string, runID string) *liveRun {
	ctx := context.Background()
	h, err := Open(ctx, Options{StateDir: stateDir})
	Expect(err).NotTo(HaveOccurred())
	if runID == "" {
		scen, err := scenarios.Parse("backend-test.yaml", []byte(backendScenario))
		Expect(err).NotTo(HaveOccurred())
		runID, err = h.create(ctx, RunRequest{Scenario: scen})
		Expect(err).NotTo(HaveOccurred())
	}
	return liveRunOf(h, runID)
}

// startLiveRunFaults starts a new run of the backend-test scenario in a
// fresh state dir, with these faults (--fault syntax) scheduled.
func startLiveRunFaults(faults ...string) *liveRun {
	ctx := context.Background()
	h, err := Open(ctx, Options{StateDir: GinkgoT().TempDir()})
	Expect(err).NotTo(HaveOccurred())
	scen, err := scenarios.Parse("backend-test.yaml", []byte(backendScenario))
	Expect(err).NotTo(HaveOccurred())
	var specs []chaos.Spec
	for _, f := range faults {
		specs = append(specs, mustParseSpec(f))
	}
	id, err := h.create(ctx, RunRequest{Scenario: scen, Faults: specs})
	Expect(err).NotTo(HaveOccurred())
	return liveRunOf(h, id)
}

// liveRunOf loads run runID of h and serves it with the real gateway; the
// spec's cleanup stops it and closes h.
func liveRunOf(h *Harness, runID string) *liveRun {
	r, err := h.load(context.Background(), runID)
	Expect(err).NotTo(HaveOccurred())
	sock, stop, err := serveGateway(r)
	Expect(err).NotTo(HaveOccurred())
	lr := &liveRun{h: h, r: r, sock: sock}
	lr.stop = func() {
		stop()
		_ = h.Close()
	}
	DeferCleanup(func() { lr.stop() })
	return lr
}

// serveGateway serves r with the real gateway on a unix socket in a fresh
// dir; stop closes the server and removes the dir.
func serveGateway(r *run) (sock string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "ovn-gw-")
	if err != nil {
		return "", nil, err
	}
	sock = filepath.Join(dir, gateway.SocketName)
	l, err := sandbox.ListenSocket(sock)
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	srv := gateway.New(r, nil)
	go func() { _ = srv.Serve(l) }()
	return sock, func() {
		_ = srv.Close()
		_ = os.RemoveAll(dir)
	}, nil
}

func (lr *liveRun) attempt() string {
	n := len(lr.r.sup.list) + 1
	token, err := lr.r.beginAttempt(context.Background(), n, false)
	Expect(err).NotTo(HaveOccurred())
	return token
}

func (lr *liveRun) sdk(token string) *agent.Client {
	c, err := agent.New(agent.Options{Socket: lr.sock, Token: token, RetryFor: 2 * time.Second})
	Expect(err).NotTo(HaveOccurred())
	return c
}

func (lr *liveRun) raw(method, path, token, body string) (int, string) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", lr.sock)
		},
	}}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://gateway"+path, rd)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(b)
}

func (lr *liveRun) ledger() []world.LedgerEntry {
	l, err := lr.r.world.Ledger(context.Background())
	Expect(err).NotTo(HaveOccurred())
	return l
}

var _ = Describe("the gateway with the real backend, journal and world", func() {
	var (
		ctx   context.Context
		state string
		lr    *liveRun
	)
	BeforeEach(func() {
		ctx = context.Background()
		state = GinkgoT().TempDir()
		lr = startLiveRun(state, "")
	})

	It("fences the current attempt once a fault SIGKILLed it: what it sends before it is dead is refused", func() {
		cur := lr.attempt()
		_, err := lr.sdk(cur).Checkpoint(ctx, 1, map[string]int{"x": 1})
		Expect(err).NotTo(HaveOccurred())
		n := len(lr.r.sup.list)
		lr.r.mu.Lock()
		lr.r.sup.killedBy[n], lr.r.sup.sigkilled[n] = "kill@effect:2", true // what signal() notes as the fault fires
		lr.r.mu.Unlock()

		status, body := lr.raw("POST", "/v1/done", cur, `{"outcome":"failure","summary":"EOF"}`)
		Expect(status).To(Equal(409))
		Expect(body).To(And(ContainSubstring(`"code":"fenced"`), ContainSubstring("SIGKILLed by fault kill@effect:2")))
		_, err = lr.sdk(cur).Effect(ctx, cloud.KindCreateNetwork, map[string]string{"name": "after-the-kill"})
		Expect(err).To(MatchError(agent.ErrFenced))
		Expect(lr.ledger()).To(BeEmpty())
		status, _ = lr.raw("GET", "/v1/checkpoint", cur, "")
		Expect(status).To(Equal(200), "reads are still answered")

		next := lr.attempt()
		_, err = lr.sdk(next).Checkpoint(ctx, 2, map[string]int{"x": 2})
		Expect(err).NotTo(HaveOccurred(), "the next attempt owns the run")
	})

	It("fences a stale attempt's writes with 409 fenced, but lets it read", func() {
		old := lr.attempt()
		_, err := lr.sdk(old).Checkpoint(ctx, 1, map[string]int{"x": 1})
		Expect(err).NotTo(HaveOccurred())
		cur := lr.attempt()

		status, body := lr.raw("PUT", "/v1/checkpoint", old, `{"step":2,"state":{}}`)
		Expect(status).To(Equal(409))
		Expect(body).To(ContainSubstring(`"code":"fenced"`))
		_, err = lr.sdk(old).Effect(ctx, cloud.KindCreateNetwork, map[string]string{"name": "zombie"})
		Expect(err).To(MatchError(agent.ErrFenced))
		Expect(lr.sdk(old).Event(ctx, "progress", "zombie", nil)).To(MatchError(agent.ErrFenced))
		Expect(lr.ledger()).To(BeEmpty(), "a fenced effect must never reach the world")

		status, _ = lr.raw("GET", "/v1/checkpoint", old, "")
		Expect(status).To(Equal(200))
		cp, err := lr.sdk(cur).Resume(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(cp.Step).To(Equal(1))
	})

	It("refuses a token this run never minted with 401", func() {
		lr.attempt()
		status, body := lr.raw("GET", "/v1/run", "0123456789abcdef", "")
		Expect(status).To(Equal(401))
		Expect(body).To(ContainSubstring(`"code":"unauthorized"`))
	})

	It("refuses a stale expect_seq with 409 conflict and accepts a retry of the last write", func() {
		tok := lr.attempt()
		status, body := lr.raw("PUT", "/v1/checkpoint", tok, `{"step":1,"state":{"a":1},"expect_seq":0}`)
		Expect(status).To(Equal(200), body)
		Expect(body).To(MatchJSON(`{"seq":1}`))

		// The very same request again (a retry after a lost reply) gets its seq back.
		status, body = lr.raw("PUT", "/v1/checkpoint", tok, `{"step":1,"state":{"a":1},"expect_seq":0}`)
		Expect(status).To(Equal(200))
		Expect(body).To(MatchJSON(`{"seq":1}`))

		// A different write based on the stale seq is a conflict.
		status, body = lr.raw("PUT", "/v1/checkpoint", tok, `{"step":2,"state":{"a":2},"expect_seq":0}`)
		Expect(status).To(Equal(409))
		Expect(body).To(ContainSubstring(`"code":"conflict"`))
		Expect(body).To(ContainSubstring("last checkpoint is seq 1"))

		status, body = lr.raw("PUT", "/v1/checkpoint", tok, `{"step":2,"state":{"a":2},"expect_seq":1}`)
		Expect(status).To(Equal(200))
		Expect(body).To(MatchJSON(`{"seq":2}`))
		status, body = lr.raw("GET", "/v1/checkpoint", tok, "")
		Expect(status).To(Equal(200))
		Expect(body).To(MatchJSON(`{"seq":2,"step":2,"state":{"a":2}}`))
	})

	It("takes the SDK's checkpoints as its doc says: unconditional before Resume, expect_seq after", func() {
		tok := lr.attempt()
		// Two writers of one attempt, neither of which read the checkpoint:
		// the SDK sends no expect_seq, and each write is taken as it is.
		first, second := lr.sdk(tok), lr.sdk(tok)
		Expect(first.Checkpoint(ctx, 1, map[string]int{"a": 1})).To(Equal(int64(1)))
		Expect(second.Checkpoint(ctx, 5, map[string]int{"b": 5})).To(Equal(int64(2)))

		// A writer that resumed sends the seq it read: a checkpoint another
		// writer made since is refused, not overwritten.
		reader := lr.sdk(tok)
		cp, err := reader.Resume(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(cp.Seq).To(Equal(int64(2)))
		Expect(second.Checkpoint(ctx, 6, map[string]int{"b": 6})).To(Equal(int64(3)))
		_, err = reader.Checkpoint(ctx, 3, map[string]int{"r": 3})
		Expect(err).To(MatchError(agent.ErrConflict))
		cp, err = reader.Resume(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(cp.Step).To(Equal(6))
		Expect(reader.Checkpoint(ctx, 7, map[string]int{"r": 7})).To(Equal(int64(4)))
	})

	It("returns a repeated effect key's recorded result without touching the world", func() {
		c := lr.sdk(lr.attempt())
		first, err := c.EffectWithKey(ctx, "step-1/0", cloud.KindCreateNetwork, map[string]string{"name": "prod-net"})
		Expect(err).NotTo(HaveOccurred())
		Expect(first.Status).To(Equal(protocol.StatusDone))
		Expect(first.Replayed).To(BeFalse())
		Expect(lr.ledger()).To(HaveLen(1))

		again, err := c.EffectWithKey(ctx, "step-1/0", cloud.KindCreateNetwork, map[string]string{"name": "prod-net"})
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Replayed).To(BeTrue())
		Expect(again.Result).To(MatchJSON(first.Result))
		Expect(lr.ledger()).To(HaveLen(1), "the world must not see the repeat")

		// The same key with other arguments is refused, and the world is untouched.
		_, err = c.EffectWithKey(ctx, "step-1/0", cloud.KindCreateNetwork, map[string]string{"name": "other"})
		Expect(err).To(MatchError(agent.ErrKeyReused))
		Expect(lr.ledger()).To(HaveLen(1))
		Expect(lr.r.fx.effects["k/step-1/0"].Replays).To(Equal(1))
	})

	It("replays a permanent refusal, but runs a transient failure again", func() {
		c := lr.sdk(lr.attempt())
		bad := map[string]string{"name": "db", "network_id": "net-404"}
		res, err := c.EffectWithKey(ctx, "k1", cloud.KindCreateDatabase, bad)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Status).To(Equal(protocol.StatusFailed))
		Expect(res.Error.Code).To(Equal("not_found"))
		Expect(res.Error.Transient).To(BeFalse())
		res, err = c.EffectWithKey(ctx, "k1", cloud.KindCreateDatabase, bad)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Replayed).To(BeTrue())
		Expect(lr.ledger()).To(HaveLen(1))

		// A transient failure on record is not final: the same key runs again.
		lr.r.mu.Lock()
		lr.r.fx.effects["k/k1"].Error.Transient = true
		lr.r.mu.Unlock()
		res, err = c.EffectWithKey(ctx, "k1", cloud.KindCreateDatabase, bad)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Replayed).To(BeFalse())
		Expect(lr.ledger()).To(HaveLen(2))
	})

	It("runs unkeyed effects unprotected, and the world's ledger shows the duplicate", func() {
		c := lr.sdk(lr.attempt())
		for i := 0; i < 2; i++ {
			res, err := c.EffectUnkeyed(ctx, cloud.KindCreateNetwork, map[string]string{"name": "prod-net"})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Replayed).To(BeFalse())
		}
		dups, err := lr.r.world.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(dups).To(HaveLen(1))
		Expect(dups[0].Count).To(Equal(2))
		Expect(dups[0].Keys).To(Equal([]string{"u/1", "u/2"}))
	})

	It("keeps agent keys and unkeyed effects apart, whatever key an agent picks", func() {
		c := lr.sdk(lr.attempt())
		args := map[string]string{"name": "prod-net"}
		for _, key := range []string{"unkeyed-1", "u/1", "unkeyed #1"} {
			res, err := c.EffectWithKey(ctx, key, cloud.KindCreateNetwork, args)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Replayed).To(BeFalse())
		}
		res, err := c.EffectUnkeyed(ctx, cloud.KindCreateNetwork, args)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Replayed).To(BeFalse(), "an unkeyed effect must never be answered from another effect's record")
		Expect(lr.ledger()).To(HaveLen(4))
	})

	It("advances virtual time on sleep, durably, never past the horizon", func() {
		c := lr.sdk(lr.attempt())
		now, err := c.Now(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(now).To(Equal(VirtualEpoch))
		start := time.Now()
		now, err = c.Sleep(ctx, 36*time.Hour)
		Expect(err).NotTo(HaveOccurred())
		Expect(now).To(Equal(VirtualEpoch.Add(36 * time.Hour)))
		Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second), "a virtual sleep must not wait in real time")
		now, err = c.SleepUntil(ctx, VirtualEpoch.Add(time.Hour))
		Expect(err).NotTo(HaveOccurred())
		Expect(now).To(Equal(VirtualEpoch.Add(36*time.Hour)), "time never goes back")
		_, err = c.Sleep(ctx, 30*24*time.Hour)
		Expect(err).To(MatchError(ContainSubstring("virtual horizon")), "a sleep past the horizon ends at it, and the run takes nothing more")
		Eventually(lr.r.clock.horizonCh).Should(BeClosed())
		now, err = c.Now(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(now).To(Equal(VirtualEpoch.Add(10 * 24 * time.Hour)))
		_, err = c.EffectWithKey(ctx, "late", cloud.KindCreateNetwork, map[string]string{"name": "late"})
		Expect(err).To(MatchError(ContainSubstring("run_ended")))
	})

	It("keeps everything acknowledged across a reopen of the state dir", func() {
		tok := lr.attempt()
		c := lr.sdk(tok)
		_, err := c.Resume(ctx)
		Expect(err).NotTo(HaveOccurred())
		res, err := c.Effect(ctx, cloud.KindCreateNetwork, map[string]string{"name": "prod-net"})
		Expect(err).NotTo(HaveOccurred())
		_, err = c.Checkpoint(ctx, 1, map[string]string{"network_id": "net-1"})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Event(ctx, "progress", "one", map[string]int{"n": 1})).To(Succeed())
		_, err = c.Sleep(ctx, time.Hour)
		Expect(err).NotTo(HaveOccurred())
		id := lr.r.rec.ID
		lr.stop()

		lr2 := startLiveRun(state, id)
		Expect(lr2.r.cp.Step).To(Equal(1))
		Expect(lr2.r.clock.now).To(Equal(VirtualEpoch.Add(time.Hour)))
		events, err := lr2.h.history.Events(id)
		Expect(err).NotTo(HaveOccurred())
		Expect(events).To(ContainElement(HaveField("Message", "one")))
		// The old attempt's token is known and fenced; a new attempt replays.
		status, _ := lr2.raw("PUT", "/v1/checkpoint", tok, `{"step":2}`)
		Expect(status).To(Equal(409))
		c2 := lr2.sdk(lr2.attempt())
		again, err := c2.EffectWithKey(ctx, "step-1/0", cloud.KindCreateNetwork, map[string]string{"name": "prod-net"})
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Replayed).To(BeTrue())
		Expect(again.Result).To(MatchJSON(res.Result))
		Expect(lr2.ledger()).To(HaveLen(1))
	})

	It("reconciles an intent without a result against the world before a retry", func() {
		id := lr.r.rec.ID
		lr.attempt()
		// The harness died after the world executed "k-done" but before the
		// result was journaled; "k-never" died before the world saw it.
		for _, k := range []string{"k-done", "k-never"} {
			lr.r.fx.order++
			args := json.RawMessage(`{"name":"` + k + `"}`)
			rec := &history.EffectRecord{ID: history.KeyedID(k), Key: k, Order: lr.r.fx.order, Kind: cloud.KindCreateNetwork, Args: args,
				ArgsHash: hashHex(append([]byte(cloud.KindCreateNetwork+"\x00"), args...)), Status: history.EffectIntent, Attempt: 1}
			Expect(lr.h.w.Put(ctx, history.EffectEntry(id, rec))).To(Succeed())
		}
		_, err := lr.r.world.Execute(ctx, world.Request{Key: history.KeyedID("k-done"), Kind: cloud.KindCreateNetwork, Args: json.RawMessage(`{"name":"k-done"}`)})
		Expect(err).NotTo(HaveOccurred())
		lr.stop()

		lr2 := startLiveRun(state, id)
		Expect(lr2.r.fx.effects["k/k-done"].Status).To(Equal(protocol.StatusDone))
		Expect(lr2.r.fx.effects["k/k-done"].Reconciled).To(BeTrue())
		Expect(lr2.r.fx.effects["k/k-never"].Error.Code).To(Equal("not_executed"))
		c := lr2.sdk(lr2.attempt())
		res, err := c.EffectWithKey(ctx, "k-done", cloud.KindCreateNetwork, map[string]string{"name": "k-done"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Replayed).To(BeTrue())
		res, err = c.EffectWithKey(ctx, "k-never", cloud.KindCreateNetwork, map[string]string{"name": "k-never"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Replayed).To(BeFalse())
		Expect(res.Status).To(Equal(protocol.StatusDone))
		Expect(lr2.ledger()).To(HaveLen(2), "each effect reached the world exactly once")
	})

	It("records the agent's claim once, and closes the run to writes when it ends", func() {
		c := lr.sdk(lr.attempt())
		Expect(c.Done(ctx, protocol.OutcomeSuccess, "all good", map[string]string{"dns": "x"})).To(Succeed())
		Expect(c.Done(ctx, protocol.OutcomeSuccess, "all good", map[string]string{"dns": "x"})).To(Succeed())
		Eventually(lr.r.doneCh).Should(BeClosed())
		lr.r.mu.Lock()
		lr.r.ended = true
		lr.r.mu.Unlock()
		_, err := c.Checkpoint(ctx, 9, nil)
		Expect(err).To(MatchError(ContainSubstring("run_ended")))
	})

	It("refuses effects, checkpoints and a different claim once the agent reported done", func() {
		c := lr.sdk(lr.attempt())
		Expect(c.Done(ctx, protocol.OutcomeSuccess, "done", nil)).To(Succeed())
		_, err := c.EffectWithKey(ctx, "late", cloud.KindCreateNetwork, map[string]string{"name": "late"})
		Expect(err).To(MatchError(ContainSubstring("reported done")))
		_, err = c.Checkpoint(ctx, 9, nil)
		Expect(err).To(MatchError(ContainSubstring("reported done")))
		Expect(c.Done(ctx, protocol.OutcomeFailure, "changed my mind", nil)).To(MatchError(ContainSubstring("already reported done")))
		Expect(lr.ledger()).To(BeEmpty())
		Expect(c.Event(ctx, "progress", "exiting", nil)).To(Succeed(), "events are still welcome")
	})
})
