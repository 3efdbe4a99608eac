package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/harness/protocol"
	"github.com/overnight-dev/overnight/sandbox"
)

// Reasons a run ends, written into the result for a person to read.
var (
	errWallTimeout = errors.New("wall-clock timeout")
	// ErrInterrupted is returned when the caller cancelled the run (Ctrl-C).
	// The run is left resumable.
	ErrInterrupted = errors.New("run interrupted; resume it with `overnight resume`")
)

// doneGrace is how long an agent may take to exit after claiming done.
const doneGrace = 10 * time.Second

// endState is how the supervisor loop ended.
type endState struct {
	limit   bool   // a limit ended the run: verdict fail
	verdict string // when set, the verdict whatever the invariants say
	reason  string // for a person
}

func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("mint attempt token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// backoff before the next attempt, given how many attempts in a row ended
// without a new checkpoint: none after an attempt that made progress (a
// fault killed a working agent: recovery should be fast), then 100ms,
// 200ms, 400ms, ... capped at 2s for a crash loop.
func backoff(stalled int) time.Duration {
	if stalled <= 0 {
		return 0
	}
	d := 100 * time.Millisecond
	for i := 1; i < stalled && d < 2*time.Second; i++ {
		d *= 2
	}
	return min(d, 2*time.Second)
}

// supervise runs attempts until the agent is done or a limit is hit. A new
// attempt is a new container with a new token; the previous attempt's token
// is fenced from then on.
func (r *run) supervise(ctx context.Context, spec sandboxPlan) (endState, error) {
	eng, err := r.h.engine(ctx)
	if err != nil {
		return endState{}, err
	}
	stalled := 0
	defer r.removals.Wait()
	for {
		r.mu.Lock()
		n := len(r.attempts) + 1
		done := r.done != nil
		seqBefore := r.cp.Seq
		r.mu.Unlock()
		// A spent budget or a diverged replay ends the run whatever the
		// agent claims, so the verdict does not depend on which came first.
		select {
		case <-r.llmLimit():
			return r.llmEnd(), nil
		default:
		}
		if done {
			return endState{reason: "the agent reported done"}, nil
		}
		select {
		case <-r.horizonCh:
			return endState{limit: true, reason: fmt.Sprintf("virtual horizon reached (%s of virtual time) before the agent finished", r.horizon.Sub(r.rec.VirtualStart))}, nil
		default:
		}
		if n > r.rec.MaxAttempts {
			last := r.lastAttempt()
			return endState{limit: true, reason: fmt.Sprintf("crash loop: %d attempts ended without the agent reporting done (last: %s); max_attempts is %d",
				n-1, last.describe(), r.rec.MaxAttempts)}, nil
		}
		if n > 1 {
			select {
			case <-ctx.Done():
				return r.stopped(ctx)
			case <-time.After(backoff(stalled)):
			}
		}
		if err := r.holdDown(ctx); err != nil {
			return endState{}, err
		}
		if err := r.attempt(ctx, eng, n, spec); err != nil {
			if ctx.Err() != nil {
				return r.stopped(ctx)
			}
			return endState{}, err
		}
		r.mu.Lock()
		progressed := r.cp.Seq > seqBefore
		r.mu.Unlock()
		if progressed {
			stalled = 0
		} else {
			stalled++
		}
		if ctx.Err() != nil {
			return r.stopped(ctx)
		}
	}
}

// stopped maps the context's end to the run's end.
func (r *run) stopped(ctx context.Context) (endState, error) {
	if errors.Is(context.Cause(ctx), errWallTimeout) {
		return endState{limit: true, reason: fmt.Sprintf("wall-clock timeout (%s) reached before the agent finished", time.Duration(r.rec.Timeout))}, nil
	}
	return endState{}, ErrInterrupted
}

func (r *run) lastAttempt() AttemptRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.attempts) == 0 {
		return AttemptRecord{}
	}
	return r.attempts[len(r.attempts)-1]
}

func (a AttemptRecord) describe() string {
	s := a.End
	if s == "" {
		s = "ended"
	}
	if a.ExitCode != nil {
		s += fmt.Sprintf(", exit code %d", *a.ExitCode)
	}
	return fmt.Sprintf("attempt %d %s", a.N, s)
}

// sandboxPlan is what every attempt's container is made of.
type sandboxPlan struct {
	image string
	cmd   []string
	env   map[string]string
}

// attempt runs one container to its end. It returns an error only when the
// harness itself failed (Docker, journal).
func (r *run) attempt(ctx context.Context, eng *sandbox.Engine, n int, plan sandboxPlan) error {
	token, err := r.beginAttempt(ctx, n)
	if err != nil {
		return err
	}
	env := map[string]string{}
	for k, v := range plan.env {
		env[k] = v
	}
	env[protocol.EnvSocket] = sandbox.GatewayDir + "/" + gateway.SocketName
	env[protocol.EnvURL] = "http://127.0.0.1:7070"
	env[protocol.EnvToken] = token
	env[protocol.EnvRunID] = r.rec.ID
	env[protocol.EnvAttempt] = fmt.Sprint(n)
	// Any OpenAI client inside works unchanged: its base URL is the
	// gateway's LLM endpoint (through the init's relay) and its key is the
	// attempt's token. The provider's own key never enters the sandbox.
	env["OPENAI_BASE_URL"] = "http://127.0.0.1:7070/v1/llm"
	env["OPENAI_API_KEY"] = token

	// Create and start run to completion even on Ctrl-C, so that the
	// harness always learns the container's id and can remove it; the
	// cancellation is acted on right after.
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer dcancel()
	sb, err := eng.Create(dctx, sandbox.Spec{
		RunID: r.rec.ID, Attempt: n, Image: plan.image, Cmd: plan.cmd, Env: env,
		SocketDir: r.rec.SocketDir, Workspace: workspaceVolume(r.rec.ID), Network: r.network,
	})
	if err != nil {
		r.endAttempt(ctx, n, "", nil, "could not create its container: "+err.Error(), nil)
		return fmt.Errorf("attempt %d: %w", n, err)
	}
	r.mu.Lock()
	r.attempts[n-1].Container = sb.ID
	r.starting = sb.ID
	att := r.attempts[n-1]
	r.mu.Unlock()
	// The container id is durable before the container runs, so a resume
	// after a harness crash can name the orphan it reaps.
	if err := put(context.WithoutCancel(ctx), r.j, attemptKey(r.rec.ID, n), att); err != nil {
		r.log.Warn("record container of attempt", "attempt", n, "err", err)
	}
	cleanup := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := eng.Remove(cctx, sb.ID); err != nil {
			r.log.Warn("remove container", "container", sb.ID, "err", err)
		}
	}
	if err := eng.Start(dctx, sb.ID); err != nil {
		r.endAttempt(ctx, n, sb.ID, nil, "could not start: "+err.Error(), eng)
		cleanup()
		return fmt.Errorf("attempt %d: %w", n, err)
	}
	// Only a running container is something a fault can act on.
	r.mu.Lock()
	r.container = sb.ID
	r.mu.Unlock()
	r.h.progress("attempt %d started (container %.12s)", n, sb.ID)
	r.appendEvent(ctx, "harness.attempt", fmt.Sprintf("attempt %d started", n), map[string]any{"attempt": n})

	type waited struct {
		code int
		err  error
	}
	waitCh := make(chan waited, 1)
	waitCtx, stopWait := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWait()
	go func() {
		code, err := eng.Wait(waitCtx, sb.ID)
		waitCh <- waited{code, err}
	}()
	kill := func(why string) waited {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := eng.Kill(kctx, sb.ID, "SIGKILL"); err != nil {
			r.log.Warn("kill container", "container", sb.ID, "why", why, "err", err)
		}
		select {
		case w := <-waitCh:
			return w
		case <-time.After(30 * time.Second):
			return waited{-1, fmt.Errorf("container %s did not die within 30s of SIGKILL", sb.ID)}
		}
	}
	var w waited
	end := "exited"
	select {
	case w = <-waitCh:
	case <-ctx.Done():
		end = "stopped: " + context.Cause(ctx).Error()
		w = kill(end)
	case <-r.doneCh:
		select {
		case w = <-waitCh:
		case <-time.After(doneGrace):
			end = fmt.Sprintf("killed: did not exit within %s of reporting done", doneGrace)
			w = kill(end)
		}
	case <-r.horizonCh:
		end = "killed: virtual horizon reached"
		w = kill(end)
	case <-r.llmLimit():
		end = "killed: " + r.llmExceeded()
		w = kill(end)
	}
	if w.err != nil {
		// The engine lost track of the container: its fate is unknown, so
		// no exit code is recorded and no next attempt starts (two could
		// run at once). The run ends interrupted and resumable; the reaper
		// of the next run or resume removes whatever is left.
		end := "lost: the Docker engine stopped answering about its container: " + w.err.Error()
		r.endAttempt(ctx, n, sb.ID, nil, end, eng)
		cleanup()
		r.h.progress("attempt %d %s", n, end)
		return fmt.Errorf("attempt %d: lost track of container %.12s: %w", n, sb.ID, w.err)
	}
	r.mu.Lock()
	if f, ok := r.killedBy[n]; ok && end == "exited" {
		if w.code == 0 {
			end = "exited after fault " + f
		} else {
			end = "killed by fault " + f
		}
	}
	r.mu.Unlock()
	exitedAt := time.Now().UTC()
	r.mu.Lock()
	r.attempts[n-1].ExitedAt = exitedAt
	if t, ok := r.killIssued[n]; ok {
		r.attempts[n-1].KillIssuedAt = t.UTC()
	}
	r.mu.Unlock()
	code := w.code
	r.endAttempt(ctx, n, sb.ID, &code, end, eng)
	// Its logs are kept; the dead container goes in the background so the
	// next attempt need not wait for it (supervise waits before returning).
	r.removals.Add(1)
	go func() {
		defer r.removals.Done()
		cleanup()
	}()
	r.h.progress("attempt %d ended: %s (exit code %d)", n, end, code)
	return nil
}

// beginAttempt mints attempt n's token and makes the attempt durable and
// the run's owner before its container exists: from here on every earlier
// attempt's token is fenced.
func (r *run) beginAttempt(ctx context.Context, n int) (string, error) {
	token, err := newToken()
	if err != nil {
		return "", err
	}
	att := AttemptRecord{N: n, TokenHash: hashHex([]byte(token)), StartedAt: time.Now().UTC()}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.rec
	rec.Attempts = n
	ea, err := entry(attemptKey(r.rec.ID, n), att)
	if err != nil {
		return "", err
	}
	er, err := entry(runKey(r.rec.ID), rec)
	if err != nil {
		return "", err
	}
	if err := r.j.Commit(context.WithoutCancel(ctx), ea, er); err != nil {
		return "", fmt.Errorf("record attempt %d: %w", n, err)
	}
	r.rec = rec
	r.attempts = append(r.attempts, att)
	r.tokens[att.TokenHash] = n
	r.current = n
	r.holdMu.Lock()
	r.dead[n] = make(chan struct{})
	r.holdMu.Unlock()
	r.container = ""
	return token, nil
}

// endAttempt keeps the attempt's logs as blobs and records how it ended.
func (r *run) endAttempt(ctx context.Context, n int, container string, code *int, end string, eng *sandbox.Engine) {
	r.seenDead(n) // before the logs are read: held replies need not wait for that
	ctx = context.WithoutCancel(ctx)
	var outHash, errHash string
	if eng != nil && container != "" {
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		stdout, stderr, err := eng.Logs(lctx, container)
		cancel()
		if err != nil {
			// No blobs: the reaper may still recover the logs later.
			r.log.Warn("read container logs", "container", container, "err", err)
		} else {
			outHash, errHash = r.keepLogs(ctx, stdout, stderr)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current == n {
		r.container, r.starting = "", "" // nothing left for a fault to act on until the next attempt
	}
	if r.paused == container {
		r.paused = "" // a frozen container that died needs no thawing
	}
	a := &r.attempts[n-1]
	a.EndedAt, a.ExitCode, a.End, a.StdoutBlob, a.StderrBlob = time.Now().UTC(), code, end, outHash, errHash
	if err := put(ctx, r.j, attemptKey(r.rec.ID, n), *a); err != nil {
		r.log.Error("record end of attempt", "attempt", n, "err", err)
	}
	detail := map[string]any{"attempt": n, "end": end}
	if code != nil {
		detail["exit_code"] = *code
	}
	_ = r.appendEventLocked(ctx, "harness.attempt_end", fmt.Sprintf("attempt %d ended: %s", n, end), detail)
}

// seenDead notes that attempt n's container is dead (or never ran): the
// replies held back from it (see HoldReply) may go.
func (r *run) seenDead(n int) {
	r.holdMu.Lock()
	defer r.holdMu.Unlock()
	if ch, ok := r.dead[n]; ok {
		close(ch)
		delete(r.dead, n)
	}
}

// keepLogs stores an attempt's output as blobs; a hash is empty when its
// blob could not be stored.
func (r *run) keepLogs(ctx context.Context, stdout, stderr []byte) (string, string) {
	return keepLogs(ctx, r.h, stdout, stderr)
}

func keepLogs(ctx context.Context, h *Harness, stdout, stderr []byte) (string, string) {
	out, err := h.j.PutBlob(ctx, stdout)
	if err != nil {
		h.log.Warn("store stdout", "err", err)
		return "", ""
	}
	errs, err := h.j.PutBlob(ctx, stderr)
	if err != nil {
		h.log.Warn("store stderr", "err", err)
		return "", ""
	}
	return out, errs
}

func workspaceVolume(runID string) string { return "overnight-ws-" + runID }

// llmLimit is closed when the run's LLM budget is spent (nil: no LLM).
func (r *run) llmLimit() <-chan struct{} {
	if r.llm == nil {
		return nil
	}
	return r.llm.limitCh
}

func (r *run) llmExceeded() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.llm == nil {
		return ""
	}
	if r.llm.diverged != "" {
		return r.llm.diverged
	}
	return r.llm.exceeded
}

// llmEnd is how the LLM path ended the run: a spent budget fails it; a
// replay that diverged from its recording proves nothing either way.
func (r *run) llmEnd() endState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.llm.diverged != "" {
		return endState{verdict: VerdictUnknown, reason: r.llm.diverged}
	}
	return endState{limit: true, reason: r.llm.exceeded}
}
