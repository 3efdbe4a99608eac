package harness

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/scenarios"
)

// janitorEvery is how often the janitor sweeps in the background: one
// process owns a state dir, so what dead runs left behind is there when
// the backend is opened (the first sweep); later it can only be a sandbox
// this process lost track of.
const janitorEvery = 30 * time.Second

// janitor reaps what dead runs left behind — sandboxes still running after
// their harness died (their logs kept first), workspaces of runs that can
// no longer be resumed, stale gateway socket dirs — when the backend is
// opened and then every janitorEvery, in the background: never in a run's
// path. A resumed run has its own leftovers reaped first (reapRun).
type janitor struct {
	h *Harness
	b sandbox.Backend

	mu     sync.Mutex // one sweep at a time
	stopCh chan struct{}
	done   chan struct{}
}

// startJanitor starts sweeping: at once, then every every.
func startJanitor(h *Harness, b sandbox.Backend, every time.Duration) *janitor {
	j := &janitor{h: h, b: b, stopCh: make(chan struct{}), done: make(chan struct{})}
	go j.loop(every)
	return j
}

func (j *janitor) loop(every time.Duration) {
	defer close(j.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), every)
		if _, err := j.sweep(ctx); err != nil {
			j.h.log.Warn("the janitor could not reap everything", "err", err)
		}
		cancel()
		select {
		case <-t.C:
		case <-j.stopCh:
			return
		}
	}
}

// stop ends the background sweeps, waiting for one under way.
func (j *janitor) stop() {
	close(j.stopCh)
	<-j.done
}

// sweep keeps the logs of this state dir's orphaned sandboxes (a harness
// that died leaves its attempt's sandbox running) and reaps whatever runs
// no process drives left behind.
func (j *janitor) sweep(ctx context.Context) ([]string, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	left, err := j.b.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, l := range left {
		if !j.h.holdsRun(l.RunID) {
			j.keepOrphanLogs(ctx, l)
		}
	}
	j.h.removeStaleSocketDirs()
	return j.b.Reap(ctx, j.h.holdsRun)
}

// holdsRun reports whether this process has a use for what run runID
// left: it drives the run, runs its image world (started for the run
// before its drive, or for a report or a reflection after it), or keeps
// its standby reserved (an isolated run to be, StandbyIsolated).
func (h *Harness) holdsRun(runID string) bool {
	return h.isLive(runID) || h.holdsWorld(runID) || h.isReserved(runID)
}

// reapRun removes what run runID left behind before it is driven again:
// its orphan (of a harness that died), whose logs are kept first.
func (j *janitor) reapRun(ctx context.Context, runID string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	left, err := j.b.List(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range left {
		if l.RunID != runID || (l.Service != "" && j.h.holdsWorld(runID)) {
			continue
		}
		sb := j.keepOrphanLogs(ctx, l)
		if sb == nil {
			if sb, err = j.b.Attach(ctx, l.ID); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		errs = append(errs, sb.Remove(ctx))
	}
	return errors.Join(errs...)
}

// keepOrphanLogs kills an orphaned attempt's sandbox whose logs are not
// kept yet, keeps them, and records how the attempt ended. It returns the
// handle it used (nil: none, nothing to keep).
func (j *janitor) keepOrphanLogs(ctx context.Context, l sandbox.Leftover) sandbox.Sandbox {
	h := j.h
	if name, ok := strings.CutPrefix(l.Service, worldServicePrefix); ok {
		// An image world a dead harness left running: its output goes to
		// its log, as when the harness stops it.
		sb, err := j.b.Attach(ctx, l.ID)
		if err != nil {
			h.log.Warn("attach to an orphaned image world", "container", l.ID, "err", err)
			return nil
		}
		w := scenarios.World{Name: name}
		if name == "world" {
			w.Name = ""
		}
		_ = sb.Signal(ctx, "SIGKILL")
		keepServiceLog(ctx, h.log, filepath.Join(worldDir(h.state, l.RunID, w), "world.log"), sb, "orphaned: the harness died while it ran; reaped")
		return sb
	}
	if name, ok := strings.CutPrefix(l.Service, mcpServicePrefix); ok {
		// An image MCP server a dead harness left running: its output goes
		// to its server.log, as when the harness stops it.
		sb, err := j.b.Attach(ctx, l.ID)
		if err != nil {
			h.log.Warn("attach to an orphaned MCP server", "container", l.ID, "err", err)
			return nil
		}
		_ = sb.Signal(ctx, "SIGKILL")
		keepServiceLog(ctx, h.log, filepath.Join(mcpDir(h.state, l.RunID, scenarios.MCPServer{Name: name}), "server.log"), sb, "orphaned: the harness died while it ran; reaped")
		return sb
	}
	if l.Attempt < 1 {
		return nil
	}
	att, found, err := h.history.Attempt(l.RunID, l.Attempt)
	if err != nil || !found || att.StdoutBlob != "" {
		return nil
	}
	sb, err := j.b.Attach(ctx, l.ID)
	if err != nil {
		h.log.Warn("attach to an orphaned sandbox", "sandbox", l.ID, "err", err)
		return nil
	}
	_ = sb.Signal(ctx, "SIGKILL")
	stdout, stderr, err := sb.Logs(ctx)
	if err != nil {
		h.log.Warn("read logs of an orphaned sandbox", "sandbox", l.ID, "err", err)
	} else {
		att.StdoutBlob, att.StderrBlob = keepLogs(ctx, h, stdout, stderr)
	}
	att.EndedAt = time.Now().UTC()
	if att.End == "" {
		att.End = "orphaned: the harness died while it ran; reaped"
	}
	if err := h.w.Put(ctx, history.AttemptEntry(l.RunID, att)); err != nil {
		h.log.Warn("record orphaned attempt", "run", l.RunID, "attempt", l.Attempt, "err", err)
	}
	return sb
}

// resumable reports whether a run that no process drives can still be
// resumed (its workspace must survive the janitor). An isolated re-run
// never is: a reflection whose harness died redoes the stage with new ones.
func (h *Harness) resumable(runID string) bool {
	rec, err := h.history.Run(runID)
	if errors.Is(err, ErrRunNotFound) {
		// A run the journal never recorded ran no agent: a standby
		// reserved for an isolated run (StandbyIsolated) a harness crash
		// left behind.
		return false
	}
	if err != nil {
		return true // when in doubt, keep the agent's files
	}
	return rec.Status != StatusFinished && rec.Isolated == nil
}

// removeStaleSocketDirs removes the gateway socket dirs that harnesses of
// runs no process drives left behind (a killed harness cannot clean up).
func (h *Harness) removeStaleSocketDirs() {
	recs, err := h.history.Runs()
	if err != nil {
		h.log.Warn("list runs for stale socket dirs", "err", err)
		return
	}
	for _, rec := range recs {
		dir := rec.SocketDir
		// Only directories this harness made: short, named ovn-*, holding at most a socket.
		if dir == "" || h.isLive(rec.ID) || !strings.HasPrefix(filepath.Base(dir), "ovn-") {
			continue
		}
		if _, err := os.Lstat(dir); err != nil {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			h.log.Warn("remove stale socket dir", "run", rec.ID, "dir", dir, "err", err)
		} else {
			h.log.Debug("removed stale socket dir", "run", rec.ID, "dir", dir)
		}
	}
}

// GCResult says what GC removed.
type GCResult struct {
	Containers []string `json:"containers"`
	Images     []string `json:"images"`
	// Worlds counts the command worlds a dead harness of this state dir
	// left running, killed.
	Worlds int `json:"worlds"`
}

// GC removes leftovers now, as the janitor does in the background: this
// state dir's dead runs' sandboxes (their logs kept), or with all
// everything the backend made, whatever its state dir. With images it also
// removes the images this state dir made or used that nothing uses and no
// other state dir claims, but the one of this overnight binary (each build
// of overnight makes its own); with all too, every unused image the
// backend made. A backend without images to reap (sandbox.ImageReaper)
// removes none.
func (h *Harness) GC(ctx context.Context, all, images bool) (GCResult, error) {
	res := GCResult{Containers: []string{}, Images: []string{}}
	b, err := h.backend(ctx)
	if err != nil {
		return res, err
	}
	var removed []string
	if all {
		removed, err = b.ReapAll(ctx)
	} else {
		h.mu.Lock()
		j := h.janitor
		h.mu.Unlock()
		removed, err = j.sweep(ctx)
	}
	res.Containers = append(res.Containers, removed...)
	if err != nil {
		return res, err
	}
	if res.Worlds, err = h.reapStaleWorlds(); err != nil {
		return res, err
	}
	if !images {
		return res, err
	}
	if ir, ok := b.(sandbox.ImageReaper); ok {
		imgs, err := ir.ReapImages(ctx, all)
		res.Images = append(res.Images, imgs...)
		return res, err
	}
	return res, nil
}
