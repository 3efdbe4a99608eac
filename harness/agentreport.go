package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox"
)

// copyReportTimeout bounds copying the agent's report file out of its
// sandbox.
const copyReportTimeout = 30 * time.Second

// copyReport copies the scenario's report file out of attempt's sandbox as
// the agent reports done — before anything removes the sandbox — and keeps
// it as a blob. It returns nil when there is nothing to copy: no report:
// in the scenario, a claim already recorded (a retry), or attempt's
// sandbox not the current one (Done refuses the claim). A file that is
// missing or cannot be kept is recorded as such, never an error of the
// run; the error is a blob that could not be stored.
func (r *run) copyReport(ctx context.Context, attempt int) (*history.ReportRecord, error) {
	want := r.scen.Report
	if want == nil {
		return nil, nil
	}
	r.mu.Lock()
	var sb sandbox.Sandbox
	if r.done == nil && !r.ended && r.sup.current == attempt {
		if sb = r.sup.box; sb == nil {
			sb = r.sup.starting
		}
	}
	r.mu.Unlock()
	if sb == nil {
		return nil, nil
	}
	rec := &history.ReportRecord{Path: want.Path}
	copier, ok := sb.(sandbox.Copier)
	if !ok {
		rec.Status, rec.Error = history.ReportUnreadable, fmt.Sprintf("the %s sandbox backend cannot copy a file out (it lacks the %s capability)", r.h.Backend().Name, sandbox.CapCopyOut)
		return rec, nil
	}
	cctx, cancel := context.WithTimeout(ctx, copyReportTimeout)
	data, err := copier.CopyOut(cctx, want.Path, want.MaxBytes)
	cancel()
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		rec.Status = history.ReportMissing
		return rec, nil
	case err != nil:
		rec.Status, rec.Error = history.ReportUnreadable, err.Error()
		return rec, nil
	}
	hash, err := r.w.PutBlob(ctx, data)
	if err != nil {
		return nil, fmt.Errorf("keep the agent's report %s: %w", want.Path, err)
	}
	rec.Status, rec.SHA256, rec.Bytes = history.ReportKept, hash, int64(len(data))
	return rec, nil
}

// reportEventText says what became of the report file, for the run's
// events.
func reportEventText(rec *history.ReportRecord) string {
	switch rec.Status {
	case history.ReportKept:
		return fmt.Sprintf("the agent's report %s was kept (%d bytes)", rec.Path, rec.Bytes)
	case history.ReportMissing:
		return fmt.Sprintf("the agent's report %s is missing: the agent wrote no such file", rec.Path)
	}
	return fmt.Sprintf("the agent's report %s could not be kept: %s", rec.Path, rec.Error)
}
