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

// plan prepares the image and command every attempt of a run uses.
func (h *Harness) plan(ctx context.Context, a scenarios.AgentSpec) (sandboxPlan, error) {
	initBin, err := h.initBinary()
	if err != nil {
		return sandboxPlan{}, err
	}
	p := sandboxPlan{env: map[string]string{}}
	for k, v := range a.Env {
		p.env[k] = v
	}
	spec := sandbox.ImageSpec{InitBinary: initBin}
	switch {
	case a.Builtin != "":
		if known := h.opts.BuiltinAgents; known != nil && !slices.Contains(known, a.Builtin) {
			return sandboxPlan{}, fmt.Errorf("no built-in agent %q (built-in agents: %v)", a.Builtin, known)
		}
		p.cmd = append([]string{sandbox.InitPath, "agent", a.Builtin}, a.Args...)
	case a.Binary != "":
		spec.AgentBinary = a.Binary
		p.cmd = append([]string{"/agent"}, a.Args...)
	case a.Image != "":
		return h.planImage(ctx, a, initBin, p)
	default:
		return sandboxPlan{}, errors.New("the agent has none of builtin, binary or image")
	}
	img, err := h.image(ctx, spec)
	if err != nil {
		return sandboxPlan{}, err
	}
	p.image = img
	if _, ok := p.env["HOME"]; !ok {
		p.env["HOME"] = sandbox.WorkspacePath
	}
	return p, nil
}

// planImage plans the sandbox of an agent's own image: the image runs as
// it is, under the init bind-mounted at /overnight (no image is built on
// top of it), with command and args as Kubernetes and Compose mean them,
// in the image's working directory or /workspace, with HOME /workspace
// unless the image's ENV or the scenario sets it.
func (h *Harness) planImage(ctx context.Context, a scenarios.AgentSpec, initBin string, p sandboxPlan) (sandboxPlan, error) {
	eng, err := h.engine(ctx)
	if err != nil {
		return sandboxPlan{}, err
	}
	cfg, err := eng.InspectAgentImage(ctx, a.Image)
	if err != nil {
		return sandboxPlan{}, err
	}
	cmd, note, err := sandbox.AgentCommand(a.Image, a.Command, a.Args, cfg)
	if err != nil {
		return sandboxPlan{}, err
	}
	if note != "" {
		h.log.Warn(note)
		h.progress("warning: %s", note)
	}
	// The workspace volume is seeded from the init's own sandbox image,
	// whose /workspace the agent's user owns.
	seed, err := h.image(ctx, sandbox.ImageSpec{InitBinary: initBin})
	if err != nil {
		return sandboxPlan{}, err
	}
	p.image, p.cmd, p.initBin, p.seed = cfg.ID, cmd, initBin, seed
	p.entrypoint = []string{sandbox.InitPath, "init", "--"}
	p.workdir = cfg.WorkingDir
	if p.workdir == "" {
		p.workdir = sandbox.WorkspacePath
	}
	if _, ok := p.env["HOME"]; !ok && !cfg.HasEnv("HOME") {
		p.env["HOME"] = sandbox.WorkspacePath
	}
	return p, nil
}

// imageKey is what the sandbox image of a spec depends on, as far as this
// process can see without reading the binaries again: their size and
// modification time.
type imageKey struct {
	spec  sandbox.ImageSpec
	stats string
}

// image is the sandbox image for spec, made once per process for each
// distinct input (the reflection loop starts many isolated runs of one
// agent: hashing its binaries again for each would cost ~100 ms).
func (h *Harness) image(ctx context.Context, spec sandbox.ImageSpec) (string, error) {
	var stats []string
	for _, f := range []string{spec.InitBinary, spec.AgentBinary} {
		if f == "" {
			continue
		}
		fi, err := os.Stat(f)
		if err != nil {
			stats = nil
			break
		}
		stats = append(stats, fmt.Sprintf("%s:%d:%d", f, fi.Size(), fi.ModTime().UnixNano()))
	}
	key := imageKey{spec, fmt.Sprint(stats)}
	h.mu.Lock()
	img, ok := h.images[key]
	h.mu.Unlock()
	if ok && stats != nil {
		return img, nil
	}
	eng, err := h.engine(ctx)
	if err != nil {
		return "", err
	}
	img, err = eng.EnsureImage(ctx, spec)
	if err != nil {
		return "", err
	}
	h.mu.Lock()
	h.images[key] = img
	h.mu.Unlock()
	return img, nil
}

// reapEvery bounds how often runs of one process reap: one process owns a
// state dir, so what dead runs left behind is there when it starts (and
// the first run reaps it); later it can only be a container this process
// lost track of. Reaping lists every container and volume of the state
// dir and every run record: a suite of many short runs must not pay that
// for each.
const reapEvery = 30 * time.Second

// reapDue reports whether a run about to be driven should reap first: the
// first in this process, one resumed (its own orphan goes first), or when
// the last reap is reapEvery old.
func (h *Harness) reapDue(resumed bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !resumed && !h.reapedAt.IsZero() && time.Since(h.reapedAt) < reapEvery {
		return false
	}
	h.reapedAt = time.Now()
	return true
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
	eng, err := h.engine(ctx)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.live[runID] {
		h.mu.Unlock()
		return nil, fmt.Errorf("run %s is already being driven by this process", runID)
	}
	h.mu.Unlock()
	// Whatever dead runs left behind goes first — this run's own orphan of
	// an earlier, crashed harness included: its logs are kept, then it is
	// removed. (An isolated re-run starts while its parent, which reaped,
	// is live: it has nothing of its own to reap.)
	if rec, err := h.history.Run(runID); err != nil || rec.Isolated == nil || rec.Attempts > 0 {
		if h.reapDue(err != nil || rec.Attempts > 0) {
			if _, err := h.reap(ctx, eng); err != nil {
				h.log.Warn("reap", "err", err)
				h.mu.Lock()
				h.reapedAt = time.Time{}
				h.mu.Unlock()
			}
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
	// The run's own context ends with this drive: what its extension
	// started for it (a reflection under way) stops with it.
	runCtx, endRun := context.WithCancel(ctx)
	defer endRun()
	r, err := h.load(runCtx, runID)
	if err != nil {
		return nil, err
	}
	started := time.Now()

	dir, cleanupDir, err := sandbox.NewSocketDir()
	if err != nil {
		return nil, fmt.Errorf("make the gateway socket dir: %w", err)
	}
	defer func() {
		if err := cleanupDir(); err != nil {
			h.log.Warn("remove socket dir", "dir", dir, "err", err)
		}
	}()
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
		name, err := eng.EnsureNetwork(ctx, runID)
		if err != nil {
			return nil, err
		}
		r.network = name
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
	if err := eng.RemoveVolume(rmCtx, workspaceVolume(runID)); err != nil {
		h.log.Warn("remove workspace volume", "run", runID, "err", err)
	}
	if r.network != "" {
		r.removals.Wait() // the network goes once no container is on it
		if err := eng.RemoveNetwork(rmCtx, r.network); err != nil {
			h.log.Warn("remove sandbox network", "run", runID, "err", err)
		}
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
	w, err := rd.World(ctx, rec, scen)
	if err != nil {
		return nil, err
	}
	wr := h.w
	if rec.Isolated != nil {
		// An isolated re-run is redone, not resumed, if the harness dies:
		// its writes need no sync (the reflection's record of it does).
		wr = h.w.Scratch()
		store, prefix := wr.WorldStore(runID)
		if w, err = h.opts.Worlds.Open(ctx, scen.World.Name, store, prefix, scen.World.Options); err != nil {
			return nil, err
		}
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
			return nil, err
		}
	}
	return r, nil
}
