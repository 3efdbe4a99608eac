package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/world"
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

// attempts is the supervisor's state: every attempt of the run, the tokens
// minted for them, and the container of the current one. Its methods run
// under the run's lock.
type attempts struct {
	list       []history.AttemptRecord
	current    int             // the attempt allowed to write (0: none since the run was loaded)
	tokens     map[string]int  // sha256(token) -> attempt
	seen       map[int]bool    // attempts that have made a request
	box        sandbox.Sandbox // the current attempt's running sandbox
	starting   sandbox.Sandbox // the current attempt's sandbox, started, maybe not yet seen running
	killedBy   map[int]string  // attempt -> the fault that ended it
	killIssued map[int]time.Time
	// sigkilled marks attempts a fault SIGKILLed: nothing they send after
	// the signal is taken, though they may live a moment longer (a request
	// already on its way, or an agent that heard its relay die first).
	sigkilled map[int]bool
	// starts holds, for the attempt whose sandbox is being started, a
	// channel closed once the backend's Start has returned: until then
	// the supervisor does not know the sandbox, though the agent may run
	// already, and the attempt's requests wait (see run.Authenticate), so
	// that a fault one of them triggers always finds the sandbox to act on.
	starts map[int]chan struct{}
	frozen sandbox.Sandbox // the sandbox a pause fault froze
	cut    sandbox.Sandbox // the sandbox a disconnect fault cut from its network
	// ending marks attempts the supervisor itself is ending (Ctrl-C, the
	// horizon, a spent budget, done and not exiting).
	ending map[int]bool
	// span is the current attempt's span (see attemptContext).
	span trace.SpanContext
}

func newAttempts(list []history.AttemptRecord) attempts {
	a := attempts{list: list, tokens: map[string]int{}, seen: map[int]bool{}, killedBy: map[int]string{}, killIssued: map[int]time.Time{}, sigkilled: map[int]bool{}, starts: map[int]chan struct{}{}, ending: map[int]bool{}}
	// Every earlier attempt is fenced from the moment the run is loaded:
	// none owns it again, and the next attempt gets a new token.
	for _, at := range list {
		a.tokens[at.TokenHash] = at.N
	}
	return a
}

// authenticate maps a token to its attempt. A request from the current
// attempt proves its container runs, even if the supervisor has not yet
// noted that Start returned.
func (a *attempts) authenticate(token string) (int, bool) {
	n, ok := a.tokens[hashHex([]byte(token))]
	if ok {
		a.seen[n] = true
		if n == a.current && a.box == nil && a.starting != nil {
			a.box = a.starting
		}
	}
	return n, ok
}

// startPending is the channel closed once attempt n's sandbox is known
// (nil: it is known, or not being started).
func (a *attempts) startPending(n int) <-chan struct{} { return a.starts[n] }

// started notes that the backend's Start of attempt n's sandbox returned:
// the attempt's requests held meanwhile go on.
func (a *attempts) started(n int) {
	if ch, ok := a.starts[n]; ok {
		close(ch)
		delete(a.starts, n)
	}
}

// owns checks that attempt n owns the run.
func (a *attempts) owns(runID string, n int) error {
	if a.current == 0 {
		return gateway.Errorf(http.StatusConflict, protocol.CodeFenced,
			"attempt %d's token is fenced: run %s was reloaded and no attempt owns it until the next one starts", n, runID)
	}
	if n != a.current {
		return gateway.Errorf(http.StatusConflict, protocol.CodeFenced,
			"this token belongs to attempt %d, but attempt %d owns run %s now: stop", n, a.current, runID)
	}
	if a.sigkilled[n] {
		return gateway.Errorf(http.StatusConflict, protocol.CodeFenced,
			"attempt %d was SIGKILLed by fault %s: nothing it sends after that is taken", n, a.killedBy[n])
	}
	return nil
}

// lessonsOf is what attempt n was handed.
func (a *attempts) lessonsOf(n int) []protocol.Lesson {
	if n >= 1 && n <= len(a.list) && a.list[n-1].Lessons != nil {
		return a.list[n-1].Lessons
	}
	return []protocol.Lesson{}
}

// resumed notes when attempt n first read its checkpoint (timing only, for
// the recovery benchmark: recorded with the attempt's end).
func (a *attempts) resumed(n int) {
	if n >= 1 && n <= len(a.list) && a.list[n-1].FirstResumedAt.IsZero() {
		a.list[n-1].FirstResumedAt = time.Now().UTC()
	}
}

// isFrozen reports whether the current attempt's sandbox is frozen.
func (a *attempts) isFrozen() bool { return a.frozen != nil && a.frozen == a.box }

// cutOff reports whether attempt n can no longer act: a fault ended or
// froze it, or another attempt owns the run.
func (a *attempts) cutOff(n int) bool {
	_, killed := a.killedBy[n]
	return killed || a.isFrozen() || a.current != n
}

// gone reports whether attempt n is over, or being ended by the
// supervisor: nothing a fault does to it counts any more.
func (a *attempts) gone(n int) bool {
	return a.ending[n] || a.current != n || (n >= 1 && n <= len(a.list) && !a.list[n-1].EndedAt.IsZero())
}

// window is the first attempt max_attempts counts from: 1, or the last
// renewed attempt.
func (a *attempts) window() int {
	for i := len(a.list) - 1; i >= 0; i-- {
		if a.list[i].Renewed {
			return a.list[i].N
		}
	}
	return 1
}

func (a *attempts) last() history.AttemptRecord {
	if len(a.list) == 0 {
		return history.AttemptRecord{}
	}
	return a.list[len(a.list)-1]
}

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

// pacing is the supervisor's back-off between attempts. It slows down a
// crash loop of the agent's own making — attempts that end, by themselves,
// without a new checkpoint — and nothing else: an attempt a fault ended
// (kill, stop, restart) is followed by the next at once, however little
// it did, since the schedule, not the agent, cut it short. Such an
// attempt without a new checkpoint neither adds to the loop nor clears
// it; max_attempts counts
// every attempt alike.
type pacing struct {
	stalled int // attempts of the agent's own in a row that ended without a new checkpoint
}

// after notes how an attempt ended and returns the wait before the next.
func (p *pacing) after(progressed, faulted bool) time.Duration {
	switch {
	case progressed:
		p.stalled = 0
		return 0
	case faulted:
		return 0
	}
	p.stalled++
	return backoff(p.stalled)
}

// supervise runs attempts until the agent is done or a limit is hit. A new
// attempt is a new container with a new token; the previous attempt's token
// is fenced from then on.
func (r *run) supervise(ctx context.Context, spec sandboxPlan) (endState, error) {
	b, err := r.h.backend(ctx)
	if err != nil {
		return endState{}, err
	}
	var pace pacing
	var wait time.Duration // before the next attempt
	defer r.removals.Wait()
	if st, ok := b.(sandbox.Standbys); ok && r.rec.SocketDir != "" && r.wantsStandby() {
		// Beside a standby reserved for an isolated run's first attempt (drive).
		r.standby.st, r.standby.ahead = st, r.standbysAhead()
		defer func() {
			if err := r.standby.drop(ctx); err != nil {
				r.log.Warn("remove the standby", "err", err)
			}
		}()
	}
	for {
		r.mu.Lock()
		n := len(r.sup.list) + 1
		done := r.done
		seqBefore := r.cp.Seq
		last, window := r.sup.last(), r.sup.window()
		end := AttemptEnd{RunID: r.rec.ID, Attempt: n - 1, End: last.End, Done: done, Step: r.cp.Step}
		r.mu.Unlock()
		// A spent budget or a diverged replay ends the run whatever the
		// agent claims, so the verdict does not depend on which came first.
		select {
		case <-r.llm.limit():
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.llm.end(), nil
		default:
		}
		// A crash loop: max_attempts attempts in a row (since the run
		// began, or since the last renewed attempt) ended without done.
		loop := done == nil && !r.clock.reached() && n-window >= r.rec.MaxAttempts
		var loopReason string
		if loop {
			loopReason = fmt.Sprintf("crash loop: %s ended without the agent reporting done (last: %s); max_attempts is %d",
				history.Count(n-window, "attempt"), describe(last), r.rec.MaxAttempts)
			r.mu.Lock()
			r.failed(Failure{Kind: FailureCrashLoop, Attempt: n - 1, Detail: loopReason})
			r.unlock()
			end.CrashLoop = true
		}
		renew := false
		if r.hooks.Next != nil && n > 1 && !r.clock.reached() {
			d, err := r.hooks.Next.Next(ctx, end)
			switch {
			case err != nil && ctx.Err() != nil:
				return r.stopped(ctx)
			case err != nil:
				return endState{}, fmt.Errorf("attempt policy: %w", err)
			case d.Stop && loop:
				return endState{limit: true, verdict: d.Verdict, reason: loopReason + "; " + d.Reason}, nil
			case d.Stop:
				return endState{verdict: d.Verdict, reason: d.Reason}, nil
			case d.Renew && loop:
				renew, loop = true, false
			case d.Reopen && done != nil && done.Outcome == protocol.OutcomeFailure:
				if err := r.reopen(ctx); err != nil {
					return endState{}, err
				}
				done = nil
			}
		}
		if done != nil {
			return endState{reason: doneReason(done)}, nil
		}
		if r.clock.reached() {
			return endState{limit: true, reason: fmt.Sprintf("virtual horizon reached (%s of virtual time) before the agent finished", history.VirtualSpan(r.clock.span()))}, nil
		}
		if loop {
			return endState{limit: true, reason: loopReason}, nil
		}
		if n > 1 && wait > 0 {
			select {
			case <-ctx.Done():
				return r.stopped(ctx)
			case <-time.After(wait):
			}
		}
		if err := r.holdDown(ctx); err != nil {
			return endState{}, err
		}
		if err := r.attempt(ctx, b, n, renew, spec); err != nil {
			if ctx.Err() != nil {
				return r.stopped(ctx)
			}
			return endState{}, err
		}
		r.mu.Lock()
		progressed := r.cp.Seq > seqBefore
		_, faulted := r.sup.killedBy[n]
		r.mu.Unlock()
		wait = pace.after(progressed, faulted)
		if ctx.Err() != nil {
			return r.stopped(ctx)
		}
	}
}

// reopen takes back the agent's claim of failure, durably, so that the
// next attempt may act again.
func (r *run) reopen(ctx context.Context) error {
	r.mu.Lock()
	defer r.unlock()
	if r.done == nil {
		return nil
	}
	d := *r.done
	d.Withdrawn = true
	if err := r.put(context.WithoutCancel(ctx), history.DoneEntry(r.rec.ID, d)); err != nil {
		return fmt.Errorf("reopen run %s: %w", r.rec.ID, err)
	}
	r.event(ctx, "harness.reopen", fmt.Sprintf("the agent's claim of %s in attempt %d is taken back: the run goes on", d.Outcome, d.Attempt), nil)
	r.done, r.doneCh = nil, make(chan struct{})
	return nil
}

// stopped maps the context's end to the run's end.
func (r *run) stopped(ctx context.Context) (endState, error) {
	if errors.Is(context.Cause(ctx), errWallTimeout) {
		return endState{limit: true, reason: fmt.Sprintf("wall-clock timeout (%s) reached before the agent finished", time.Duration(r.rec.Timeout))}, nil
	}
	return endState{}, ErrInterrupted
}

// maxReasonSummary is how many characters of the agent's summary a run's
// reason quotes (the whole is in the journal and the run's report).
const maxReasonSummary = 160

// doneReason is the reason of a run that ended on the agent's claim: which
// claim, and for a failure the agent's own summary of it.
func doneReason(d *history.DoneRecord) string {
	s := "the agent reported done with outcome " + d.Outcome
	if d.Outcome != protocol.OutcomeFailure {
		return s
	}
	if sum := []rune(strings.Join(strings.Fields(d.Summary), " ")); len(sum) > 0 {
		if len(sum) > maxReasonSummary {
			sum = append(sum[:maxReasonSummary], '…')
		}
		s += fmt.Sprintf(": %q", string(sum))
	}
	return s
}

func describe(a history.AttemptRecord) string {
	s := a.End
	if s == "" {
		s = "ended"
	}
	if a.ExitCode != nil {
		s += fmt.Sprintf(", exit code %d", *a.ExitCode)
	}
	return fmt.Sprintf("attempt %d %s", a.N, s)
}

// sandboxPlan is what every attempt's sandbox is made of: the prepared
// agent and the environment the scenario gives it.
type sandboxPlan struct {
	image sandbox.Image
	env   map[string]string
}

// attempt runs one sandbox to its end. It returns an error only when the
// harness itself failed (the backend, the journal).
func (r *run) attempt(ctx context.Context, b sandbox.Backend, n int, renewed bool, plan sandboxPlan) (err error) {
	ctx, span := r.h.tracer().Start(ctx, SpanAttempt, trace.WithAttributes(AttrRunID.String(r.rec.ID), AttrAttempt.Int(n)))
	defer func() { endSpan(span, err) }()
	token, err := r.beginAttempt(ctx, n, renewed)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.sup.span = span.SpanContext()
	r.mu.Unlock()
	env := r.attemptEnv(plan, n, token)

	// Start runs to completion even on Ctrl-C, so that the harness always
	// learns the sandbox's id and can remove it; the cancellation is acted
	// on right after.
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer dcancel()
	spec := sandbox.Spec{
		RunID: r.rec.ID, Attempt: n, Image: plan.image, Env: env,
		SocketDir: r.rec.SocketDir, Workspace: true, Network: r.network,
	}
	// The agent may be at work before Start returns (on a loaded machine
	// the engine's answer can come late): its requests wait until then,
	// so a fault they trigger finds its sandbox, at the same point of the
	// history however late the answer.
	r.mu.Lock()
	r.sup.starts[n] = make(chan struct{})
	r.mu.Unlock()
	sb, standby, err := r.startSandbox(dctx, b, spec)
	r.mu.Lock()
	if err == nil {
		r.sup.list[n-1].HandedOverAt = time.Now().UTC()
		r.sup.list[n-1].Container = sb.ID()
		r.sup.list[n-1].Standby = standby
		r.sup.starting = sb
	}
	r.sup.started(n)
	att := r.sup.list[n-1]
	window := r.sup.window()
	r.mu.Unlock()
	if err != nil {
		r.endAttempt(ctx, n, nil, nil, "could not start its sandbox: "+err.Error())
		return fmt.Errorf("attempt %d: %w", n, err)
	}
	// The next attempts' sandboxes, started while this one runs, no
	// further than the last attempt max_attempts lets run.
	ahead := spec
	ahead.Env = r.sharedEnv(plan)
	r.standby.keepAhead(ctx, ahead, n, window+r.rec.MaxAttempts-1)
	// The sandbox's id is durable before the attempt's verdict on it, so a
	// resume after a harness crash can name the orphan it reaps.
	if err := r.put(context.WithoutCancel(ctx), history.AttemptEntry(r.rec.ID, att)); err != nil {
		r.log.Warn("record sandbox of attempt", "attempt", n, "err", err)
	}
	cleanup := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := sb.Remove(cctx); err != nil {
			r.log.Warn("remove sandbox", "sandbox", sb.ID(), "err", err)
		}
	}
	// Only a running sandbox is something a fault can act on — and not
	// one a kill took from the faults meanwhile (a request of the agent
	// may have triggered it since Start returned). A fresh sandbox has not
	// been idle: the clock's idle jump waits for it as for any agent that
	// just made a request.
	r.mu.Lock()
	if !r.sup.sigkilled[n] {
		r.sup.box = sb
		r.faults.reapplyToAttempt(ctx)
	}
	r.clock.lastActivity = time.Now()
	r.unlock()
	r.progress("attempt %d started (sandbox %.12s)", n, sb.ID())
	r.appendEvent(ctx, "harness.attempt", fmt.Sprintf("attempt %d started", n), map[string]any{"attempt": n})

	type waited struct {
		code int
		err  error
	}
	waitCh := make(chan waited, 1)
	waitCtx, stopWait := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWait()
	go func() {
		code, err := sb.Wait(waitCtx)
		waitCh <- waited{code, err}
	}()
	kill := func(why string) waited {
		r.mu.Lock()
		r.sup.ending[n] = true
		r.mu.Unlock()
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := sb.Signal(kctx, "SIGKILL"); err != nil {
			r.log.Warn("kill sandbox", "sandbox", sb.ID(), "why", why, "err", err)
		}
		select {
		case w := <-waitCh:
			return w
		case <-time.After(30 * time.Second):
			return waited{-1, fmt.Errorf("sandbox %s did not die within 30s of SIGKILL", sb.ID())}
		}
	}
	r.mu.Lock()
	doneCh := r.doneCh
	r.mu.Unlock()
	var w waited
	end := "exited"
	select {
	case w = <-waitCh:
	case <-ctx.Done():
		end = "stopped: " + context.Cause(ctx).Error()
		w = kill(end)
	case <-doneCh:
		select {
		case w = <-waitCh:
		case <-time.After(doneGrace):
			end = fmt.Sprintf("killed: did not exit within %s of reporting done", doneGrace)
			w = kill(end)
		}
	case <-r.clock.horizonCh:
		end = "killed: virtual horizon reached"
		w = kill(end)
	case <-r.llm.limit():
		r.mu.Lock()
		end = "killed: " + r.llm.ending()
		r.mu.Unlock()
		w = kill(end)
	}
	if w.err != nil {
		// The backend lost track of the sandbox: its fate is unknown, so
		// no exit code is recorded and no next attempt starts (two could
		// run at once). The run ends interrupted and resumable; the
		// janitor, or the resume, removes whatever is left.
		end := "lost: the sandbox backend stopped answering about its sandbox: " + w.err.Error()
		r.endAttempt(ctx, n, sb, nil, end)
		cleanup()
		r.progress("attempt %d %s", n, end)
		return fmt.Errorf("attempt %d: lost track of sandbox %.12s: %w", n, sb.ID(), w.err)
	}
	exitedAt := time.Now().UTC()
	r.mu.Lock()
	if f, ok := r.sup.killedBy[n]; ok && end == "exited" {
		if w.code == 0 {
			end = "exited after fault " + f
		} else {
			end = "killed by fault " + f
		}
	}
	r.sup.list[n-1].ExitedAt = exitedAt
	if t, ok := r.sup.killIssued[n]; ok {
		r.sup.list[n-1].KillIssuedAt = t.UTC()
	}
	r.mu.Unlock()
	code := w.code
	span.SetAttributes(AttrContainer.String(sb.ID()), AttrEnd.String(end), AttrExitCode.Int(code))
	r.endAttempt(ctx, n, sb, &code, end)
	// Its logs are kept; the dead container goes in the background so the
	// next attempt need not wait for it (supervise waits before returning).
	r.removals.Add(1)
	go func() {
		defer r.removals.Done()
		cleanup()
	}()
	r.progress("attempt %d ended: %s (exit code %d)", n, end, code)
	return nil
}

// sharedEnv is the environment every attempt of the run is given alike:
// the scenario's, and where the gateway is. A standby is started with it.
func (r *run) sharedEnv(plan sandboxPlan) map[string]string { return sharedEnv(plan, r.rec.ID) }

// sharedEnv is the environment every attempt of run runID is given alike.
func sharedEnv(plan sandboxPlan, runID string) map[string]string {
	env := map[string]string{}
	for k, v := range plan.env {
		env[k] = v
	}
	env[protocol.EnvSocket] = sandbox.GatewaySocket
	env[protocol.EnvURL] = sandbox.RelayURL
	env[protocol.EnvRunID] = runID
	// Any OpenAI client inside works unchanged: its base URL is the
	// gateway's LLM endpoint (through the init's relay) and its key is the
	// attempt's token. The provider's own key never enters the sandbox.
	env["OPENAI_BASE_URL"] = sandbox.RelayURL + "/v1/llm"
	return env
}

// attemptEnv is attempt n's whole environment: the shared one, and what
// carries its token and number.
func (r *run) attemptEnv(plan sandboxPlan, n int, token string) map[string]string {
	env := r.sharedEnv(plan)
	env[protocol.EnvToken] = token
	env[protocol.EnvAttempt] = fmt.Sprint(n)
	env["OPENAI_API_KEY"] = token
	// Each HTTP API the scenario declares, for an ordinary HTTP client: the
	// gateway's pass-through, the token in its path. The API's own
	// credential is added by the gateway and never enters the sandbox.
	for _, a := range r.scen.HTTP {
		env[a.EnvName()] = sandbox.RelayURL + gateway.HTTPPathPrefix + a.Name + "/" + token
	}
	// The scenario's MCP servers, for any MCP client: the gateway's MCP
	// endpoint (streamable HTTP), the token in its path.
	if len(r.scen.MCPServers()) > 0 {
		env[EnvMCPURL] = sandbox.RelayURL + gateway.MCPPathPrefix + token
	}
	return env
}

// startSandbox starts attempt n's sandbox: the standby started ahead for
// it, handed the attempt's environment, or else a new one. standby says
// which.
func (r *run) startSandbox(ctx context.Context, b sandbox.Backend, spec sandbox.Spec) (sb sandbox.Sandbox, standby bool, err error) {
	h := sandbox.Handover{Attempt: spec.Attempt, Env: spec.Env}
	st, err := r.standby.take(ctx, spec.Attempt, h)
	switch {
	case st != nil && err != nil:
		r.log.Warn("remove standbys made for earlier attempts", "attempt", spec.Attempt, "err", err)
	case err != nil:
		r.log.Warn("the standby could not serve: the attempt starts cold", "attempt", spec.Attempt, "err", err)
	}
	if st != nil {
		return st, true, nil
	}
	sb, err = b.Start(ctx, spec)
	return sb, false, err
}

// beginAttempt mints attempt n's token and makes the attempt — with the
// lessons it is handed — durable and the run's owner before its container
// exists: from here on every earlier attempt's token is fenced.
func (r *run) beginAttempt(ctx context.Context, n int, renewed bool) (string, error) {
	token, err := newToken()
	if err != nil {
		return "", err
	}
	att := history.AttemptRecord{N: n, TokenHash: hashHex([]byte(token)), StartedAt: time.Now().UTC(), Renewed: renewed}
	if src := r.hooks.Lessons; src != nil {
		lessons, err := src.Lessons(ctx, r.rec.ID, n)
		if err != nil {
			return "", fmt.Errorf("lessons for attempt %d: %w", n, err)
		}
		att.Lessons = lessons
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq, err := world.LedgerSeq(ctx, r.world); err == nil {
		att.WorldSeq = seq
	}
	rec := r.rec
	rec.Attempts = n
	entries := []history.Entry{history.AttemptEntry(r.rec.ID, att), history.RunEntry(rec)}
	rb, ev, err := r.rollbackLocked(ctx, n)
	if err != nil {
		return "", fmt.Errorf("attempt %d: %w", n, err)
	}
	if rb != nil {
		// The rollback is one commit with the attempt it is written for:
		// a harness killed here resumes to the same decision.
		entries = append(entries, history.CheckpointEntry(r.rec.ID, *rb), history.EventEntry(r.rec.ID, *ev))
	}
	if err := r.put(context.WithoutCancel(ctx), entries...); err != nil {
		return "", fmt.Errorf("record attempt %d: %w", n, err)
	}
	if rb != nil {
		r.cp, r.events = *rb, ev.Seq
		r.progress("attempt %d: checkpoint %d is poisoned; rolled back to step %d (checkpoint %d)", n, rb.RollbackOf, rb.Step, rb.Seq)
	}
	r.rec = rec
	r.sup.list = append(r.sup.list, att)
	r.sup.tokens[att.TokenHash] = n
	r.sup.current = n
	r.mcpAttemptEndedLocked(n - 1) // the earlier attempts' MCP sessions close: they are fenced
	r.holdMu.Lock()
	r.dead[n] = make(chan struct{})
	r.holdMu.Unlock()
	r.sup.box = nil
	return token, nil
}

// endAttempt keeps the attempt's logs as blobs and records how it ended.
func (r *run) endAttempt(ctx context.Context, n int, sb sandbox.Sandbox, code *int, end string) {
	r.seenDead(n) // before the logs are read: held replies need not wait for that
	ctx = context.WithoutCancel(ctx)
	var outHash, errHash string
	if sb != nil {
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		stdout, stderr, err := sb.Logs(lctx)
		cancel()
		if err != nil {
			// No blobs: the janitor may still recover the logs later.
			r.log.Warn("read sandbox logs", "sandbox", sb.ID(), "err", err)
		} else {
			outHash, errHash = keepLogs(ctx, r.h, stdout, stderr)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sup.current == n {
		r.sup.box, r.sup.starting = nil, nil // nothing left for a fault to act on until the next attempt
	}
	if sb != nil && r.sup.frozen == sb {
		r.sup.frozen = nil // a frozen sandbox that died needs no thawing
	}
	a := &r.sup.list[n-1]
	a.EndedAt, a.ExitCode, a.End, a.StdoutBlob, a.StderrBlob = time.Now().UTC(), code, end, outHash, errHash
	if err := r.put(ctx, history.AttemptEntry(r.rec.ID, *a)); err != nil {
		r.log.Error("record end of attempt", "attempt", n, "err", err)
	}
	detail := map[string]any{"attempt": n, "end": end}
	if code != nil {
		detail["exit_code"] = *code
	}
	r.event(ctx, "harness.attempt_end", fmt.Sprintf("attempt %d ended: %s", n, end), detail)
	r.mcpAttemptEndedLocked(n) // its MCP sessions close with it
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

// HoldReply implements gateway.Holder: a reply to an attempt that a process
// fault signalled waits until its container is seen dead, so the agent never
// hears an answer given after the fault — neither to the request that
// triggered it nor to any later one — however long the signal takes to land
// (the init forwards SIGTERM; a SIGKILLed init takes its children with it
// only when it exits). Without this, how far an agent got after a stop
// would depend on the machine's load.
func (r *run) HoldReply(ctx context.Context, c gateway.Caller) {
	r.holdMu.Lock()
	until, dying := r.dying[c.Attempt]
	dead, alive := r.dead[c.Attempt]
	r.holdMu.Unlock()
	if !dying || !alive {
		return
	}
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-dead:
	case <-ctx.Done():
	case <-r.stopCh:
	case <-t.C:
		r.log.Warn("a signalled container is still alive; its held replies go", "attempt", c.Attempt)
	}
}

// keepLogs stores an attempt's output as blobs; a hash is empty when its
// blob could not be stored.
func keepLogs(ctx context.Context, h *Harness, stdout, stderr []byte) (string, string) {
	out, err := h.w.PutBlob(ctx, stdout)
	if err != nil {
		h.log.Warn("store stdout", "err", err)
		return "", ""
	}
	errs, err := h.w.PutBlob(ctx, stderr)
	if err != nil {
		h.log.Warn("store stderr", "err", err)
		return "", ""
	}
	return out, errs
}
