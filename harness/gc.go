package harness

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox"
)

// resumable reports whether a run that no process drives can still be
// resumed (its workspace volume must survive the reaper). An isolated
// re-run never is: a reflection whose harness died redoes the stage with
// new ones.
func (h *Harness) resumable(runID string) bool {
	rec, err := h.history.Run(runID)
	if err != nil {
		return true // when in doubt (or unknown), keep the agent's files
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

// reap keeps the logs of this state dir's orphaned containers (a harness
// that died leaves its attempt's container running) and removes them.
func (h *Harness) reap(ctx context.Context, eng *sandbox.Engine) ([]string, error) {
	boxes, err := eng.List(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, b := range boxes {
		if h.isLive(b.RunID) || b.Attempt < 1 {
			continue
		}
		att, found, err := h.history.Attempt(b.RunID, b.Attempt)
		if err != nil || !found || att.StdoutBlob != "" {
			continue
		}
		_ = eng.Kill(ctx, b.ID, "SIGKILL")
		stdout, stderr, err := eng.Logs(ctx, b.ID)
		if err != nil {
			h.log.Warn("read logs of orphaned container", "container", b.ID, "err", err)
		} else {
			att.StdoutBlob, att.StderrBlob = keepLogs(ctx, h, stdout, stderr)
		}
		att.EndedAt = time.Now().UTC()
		if att.End == "" {
			att.End = "orphaned: the harness died while it ran; reaped"
		}
		if err := h.w.Put(ctx, history.AttemptEntry(b.RunID, att)); err != nil {
			h.log.Warn("record orphaned attempt", "run", b.RunID, "attempt", b.Attempt, "err", err)
		}
	}
	h.removeStaleSocketDirs()
	// Holders a dead process left (this one's are its pool's).
	if _, err := eng.ReapNetHolders(ctx, h.currentPool().ID()); err != nil {
		h.log.Warn("reap network namespace holders", "err", err)
	}
	return eng.Reap(ctx, h.isLive)
}

// GCResult says what GC removed.
type GCResult struct {
	Containers []string `json:"containers"`
	Images     []string `json:"images"`
}

// GC removes leftover containers: this state dir's dead runs', or with all
// every container (and workspace volume) labelled overnight.managed=true.
// With images it also removes the sandbox images this state dir made or
// used that no container uses and no other state dir claims, but the one
// of this overnight binary (each build of overnight makes its own); with
// all too, every unused sandbox image on the engine.
func (h *Harness) GC(ctx context.Context, all, images bool) (GCResult, error) {
	res := GCResult{Containers: []string{}, Images: []string{}}
	eng, err := h.engine(ctx)
	if err != nil {
		return res, err
	}
	var removed []string
	if all {
		removed, err = eng.ReapAll(ctx)
	} else {
		removed, err = h.reap(ctx, eng)
	}
	res.Containers = append(res.Containers, removed...)
	if err != nil || !images {
		return res, err
	}
	var keep []string
	if bin, berr := h.initBinary(); berr == nil {
		if ref, rerr := eng.ImageRef(ctx, sandbox.ImageSpec{InitBinary: bin}); rerr == nil {
			keep = append(keep, ref)
		}
	}
	imgs, err := eng.ReapImages(ctx, all, keep...)
	res.Images = append(res.Images, imgs...)
	return res, err
}
