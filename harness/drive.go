package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/scenarios"
)

// plan prepares what every attempt of a run runs: the agent, readied by
// the sandbox backend (Prepare), and its environment — the scenario's on
// top of the image's defaults.
func (h *Harness) plan(ctx context.Context, a scenarios.AgentSpec) (sandboxPlan, error) {
	if a.Builtin != "" {
		if known := h.opts.BuiltinAgents; known != nil && !slices.Contains(known, a.Builtin) {
			return sandboxPlan{}, fmt.Errorf("no built-in agent %q (built-in agents: %v)", a.Builtin, known)
		}
	}
	if a.Builtin == "" && a.Binary == "" && a.Image == "" {
		return sandboxPlan{}, errors.New("the agent has none of builtin, binary or image")
	}
	b, err := h.backend(ctx)
	if err != nil {
		return sandboxPlan{}, err
	}
	img, err := b.Prepare(ctx, sandbox.Agent{Builtin: a.Builtin, Binary: a.Binary, Image: a.Image, Command: a.Command, Args: a.Args})
	if err != nil {
		return sandboxPlan{}, err
	}
	if img.Warning != "" {
		h.log.Warn(img.Warning)
		h.progress("warning: %s", img.Warning)
	}
	p := sandboxPlan{image: img, env: map[string]string{}}
	for k, v := range img.Env {
		p.env[k] = v
	}
	for k, v := range a.Env {
		p.env[k] = v
	}
	return p, nil
}

// drive runs a recorded run to its end: world, gateway, supervisor, verdict.
func (h *Harness) drive(ctx context.Context, runID string, plan sandboxPlan) (res *Result, err error) {
	ctx, span := h.tracer().Start(ctx, SpanRun, trace.WithAttributes(AttrRunID.String(runID)))
	defer func() {
		if res != nil {
			span.SetAttributes(AttrVerdict.String(res.Verdict), AttrReason.String(res.Reason))
		}
		endSpan(span, err)
	}()
	if rec, err := h.history.Run(runID); err == nil {
		span.SetAttributes(AttrScenario.String(rec.Scenario), AttrSeed.Int64(rec.Seed), AttrAgent.String(rec.Agent))
		if rec.Isolated != nil {
			span.SetAttributes(AttrParent.String(rec.Isolated.Parent))
		}
	}
	b, err := h.backend(ctx)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.live[runID] {
		h.mu.Unlock()
		return nil, fmt.Errorf("run %s is already being driven by this process", runID)
	}
	j := h.janitor
	h.mu.Unlock()
	// A run resumed after its harness died has its own orphan reaped first:
	// its logs are kept, then it is removed, before any new attempt starts.
	// (Everything else dead runs left is the janitor's, in the background.)
	if rec, err := h.history.Run(runID); err == nil && rec.Attempts > 0 {
		if err := j.reapRun(ctx, runID); err != nil {
			h.log.Warn("reap the run's own leftovers", "run", runID, "err", err)
		}
	}
	h.mu.Lock()
	h.live[runID] = true
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.live, runID)
		h.mu.Unlock()
	}()
	defer h.releaseStandbysOf(context.WithoutCancel(ctx), runID) // reserved by its reflection, left unused
	// The run's own context ends with this drive: what its extension
	// started for it (a reflection under way) stops with it.
	runCtx, endRun := context.WithCancel(ctx)
	defer endRun()
	r, err := h.load(runCtx, runID)
	if err != nil {
		return nil, err
	}
	// A world the harness started for the run (or an isolated run's
	// instance) goes when the drive ends; its data stays for a resume.
	defer h.releaseWorld(runID, r.scen.World, r.rec.Isolated != nil)
	if r.rec.Isolated != nil {
		defer h.stopShadows(runID) // an HTTP API's scratch upstream goes with its isolated run
	}
	started := time.Now()

	dir, cleanupDir, reserved, err := h.socketDir(runID)
	if err != nil {
		return nil, fmt.Errorf("make the gateway socket dir: %w", err)
	}
	defer func() {
		if err := cleanupDir(); err != nil {
			h.log.Warn("remove socket dir", "dir", dir, "err", err)
		}
	}()
	if reserved != nil {
		// An isolated run reserved ahead: its first attempt takes over the
		// sandbox started for it; one it never takes goes with the drive.
		r.standby = reserved.sb
		defer func() {
			if err := r.standby.drop(ctx); err != nil {
				r.log.Warn("remove the standby", "err", err)
			}
		}()
	}
	link, err := chaos.ListenLink(filepath.Join(dir, gateway.SocketName), chaos.LinkOptions{
		Rand: chaos.NewStreams(r.rec.Seed).For("link"), Logger: h.log,
	})
	if err != nil {
		return nil, err
	}
	srv := gateway.New(r, h.log)
	go func() {
		if err := srv.Serve(link); err != nil {
			h.log.Error("gateway stopped", "err", err)
		}
	}()
	defer srv.Close()
	r.mu.Lock()
	r.link = link
	r.faults.resume(ctx)
	r.unlock()
	// The idle jump stops at once on Ctrl-C: nothing may heal for good
	// while the run is being interrupted.
	idleCtx, stopIdle := context.WithCancel(ctx)
	go r.idleLoop(idleCtx)
	defer func() {
		stopIdle()
		close(r.stopCh)
		// No fault outlives the run's drive: a paused container is thawed,
		// a dropped link healed, even on Ctrl-C (where the faults stay
		// active in the journal, for a resume).
		r.mu.Lock()
		r.faults.healAll(context.WithoutCancel(ctx), false)
		r.unlock()
	}()

	if r.scen.Sandbox.Network == "internal" {
		r.network = true
	} else {
		h.warmFor(ctx, r)
	}
	r.mu.Lock()
	r.rec.Status, r.rec.OwnerPID, r.rec.SocketDir = StatusRunning, os.Getpid(), dir
	rec := r.rec
	r.mu.Unlock()
	if err := r.put(ctx, history.RunEntry(rec)); err != nil {
		return nil, fmt.Errorf("record run %s: %w", runID, err)
	}

	// The wall-clock limit applies to each invocation (run, or resume).
	rctx, cancel := context.WithTimeoutCause(ctx, time.Duration(rec.Timeout), errWallTimeout)
	defer cancel()
	end, err := r.supervise(rctx, plan)
	if err != nil {
		r.mu.Lock()
		r.ended = true
		r.rec.Status, r.rec.Reason = StatusInterrupted, err.Error()
		rec := r.rec
		r.mu.Unlock()
		if perr := r.put(context.WithoutCancel(ctx), history.RunEntry(rec)); perr != nil {
			err = errors.Join(err, perr)
		}
		h.progress("run %s interrupted after %s; resume with: overnight resume %s", runID, time.Since(started).Round(time.Millisecond), runID)
		return nil, err
	}
	r.mu.Lock()
	r.faults.healAll(ctx, true)
	r.unlock()
	res, err = r.finish(context.WithoutCancel(ctx), end)
	if err != nil {
		return nil, err
	}
	rmCtx, rmCancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer rmCancel()
	r.removals.Wait() // what the run kept goes once no sandbox uses it
	// The world the harness started for the run stops first, its output
	// kept, before Release removes every container of the run.
	h.releaseWorld(runID, r.scen.World, r.rec.Isolated != nil)
	if err := b.Release(rmCtx, runID); err != nil {
		h.log.Warn("release what the run kept (workspace, network)", "run", runID, "err", err)
	}
	return res, nil
}

// load rebuilds a run's live state from its history.
func (h *Harness) load(ctx context.Context, runID string) (*run, error) {
	rd := h.history
	rec, err := h.runRecord(runID)
	if err != nil {
		return nil, err
	}
	scen, err := rd.Scenario(rec)
	if err != nil {
		return nil, err
	}
	wr := h.w
	if rec.Isolated != nil {
		// An isolated re-run is redone, not resumed, if the harness dies:
		// its writes need no sync (the reflection's record of it does).
		wr = h.w.Scratch()
	}
	store, prefix := wr.WorldStore(runID)
	w, err := h.openRunWorld(ctx, rec, scen, store, prefix)
	if err != nil {
		return nil, err
	}
	r := &run{
		h: h, w: wr, log: h.log.With("run", runID), scen: scen, world: w, task: scen.TaskJSON(), rec: rec,
		doneCh: make(chan struct{}), stopCh: make(chan struct{}),
		dying: map[int]time.Time{}, dead: map[int]chan struct{}{},
	}
	if h.opts.Extension != nil {
		if r.hooks, err = h.opts.Extension.Hooks(ctx, h, rec, scen); err != nil {
			return nil, fmt.Errorf("run %s: %w", runID, err)
		}
	}
	if iso := rec.Isolated; iso != nil {
		r.hooks.Lessons = fixedLessons(iso.Lessons) // an isolated run is handed what its request gave
	}
	atts, err := rd.Attempts(runID)
	if err != nil {
		return nil, err
	}
	r.sup = newAttempts(atts)
	if r.cp, err = rd.LastCheckpoint(runID); err != nil {
		return nil, err
	}
	if ev, found, err := rd.LastEvent(runID); err != nil {
		return nil, err
	} else if found {
		r.events = ev.Seq
	}
	effects, err := rd.Effects(runID)
	if err != nil {
		return nil, err
	}
	r.fx = newEffectPath(r, effects)
	// A run forked from a checkpoint counts on from where its parent stood.
	r.fx.intents = max(r.fx.intents, r.cp.Intents)
	now, _, err := rd.Clock(runID)
	if err != nil {
		return nil, err
	}
	if now.IsZero() {
		now = rec.VirtualStart
	}
	r.clock = newClock(rec.VirtualStart, now, rec.VirtualStart.Add(scen.Limits.Horizon), func(ctx context.Context, t time.Time) error {
		return r.put(ctx, history.ClockEntry(runID, history.ClockRecord{Now: t}))
	})
	if r.done, err = rd.Done(runID); err != nil {
		return nil, err
	} else if r.done != nil {
		close(r.doneCh)
	}
	faults, err := rd.Faults(runID)
	if err != nil {
		return nil, err
	}
	if r.faults, err = newFaultEngine(r, r.log, h.opts.Faults, faults); err != nil {
		return nil, fmt.Errorf("faults of run %s: %w", runID, err)
	}
	mc, err := h.model(scen, rec.LLM)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", runID, err)
	}
	if mc.model != nil {
		recs, err := rd.LLM(runID)
		if err != nil {
			return nil, err
		}
		r.llm = newLLMPath(r, mc, recs)
		r.llm.calls = max(r.llm.calls, r.cp.LLMCalls)
	}
	// Effects in doubt (an intent without a result) are reconciled with the
	// world before any agent may retry them.
	keys := make([]string, 0, len(r.fx.effects))
	for k := range r.fx.effects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		if err := r.fx.reconcile(ctx, r.fx.effects[k]); err != nil {
			var ge *gateway.Error
			if errors.As(err, &ge) && (ge.Code == CodeWorldUnavailable || ge.Code == CodeInDoubt) {
				// It stays in doubt: reconciled again when its key is retried.
				r.log.Warn("an effect stays in doubt", "effect", k, "err", err)
				continue
			}
			return nil, err
		}
	}
	return r, nil
}
