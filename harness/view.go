package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/journal"
)

// Reads are the reads a viewer makes of a state dir: a page of its runs, a
// run's whole history, its suites and its reflections. A Harness answers
// them for the state dir it owns, a Remote through the control socket of
// the process that owns one, and a View whoever owns it.
type Reads interface {
	QueryRuns(ctx context.Context, q history.RunQuery) (history.RunPage, error)
	Full(ctx context.Context, runID string) (*history.Full, error)
	Suites(ctx context.Context) ([]history.SuiteRecord, error)
	Suite(ctx context.Context, id string) (history.SuiteRecord, error)
	Reflections(ctx context.Context) ([]history.RunReflection, error)
}

var (
	_ Reads = (*Harness)(nil)
	_ Reads = (*Remote)(nil)
	_ Reads = (*View)(nil)
)

// readerReads answers Reads from a history reader.
type readerReads struct {
	rd    *history.Reader
	index *history.RunIndex
	live  func(runID string) bool
}

func (r readerReads) QueryRuns(_ context.Context, q history.RunQuery) (history.RunPage, error) {
	if err := r.index.Refresh(r.rd); err != nil {
		return history.RunPage{}, err
	}
	return r.index.Query(q, r.live), nil
}

func (r readerReads) Full(ctx context.Context, runID string) (*history.Full, error) {
	full, err := r.rd.Full(ctx, runID)
	if err != nil {
		return nil, err
	}
	if rec := &full.Run.Record; rec.Status == StatusRunning && (r.live == nil || !r.live(runID)) {
		rec.Status = StatusInterrupted // its harness died
	}
	return full, nil
}

func (r readerReads) Suites(context.Context) ([]history.SuiteRecord, error) { return r.rd.Suites() }

func (r readerReads) Suite(_ context.Context, id string) (history.SuiteRecord, error) {
	rec, found, err := r.rd.Suite(id)
	if err == nil && !found {
		err = fmt.Errorf("%w %q", history.ErrSuiteNotFound, id)
	}
	return rec, err
}

func (r readerReads) Reflections(context.Context) ([]history.RunReflection, error) {
	return r.rd.AllReflections()
}

// reads answers Reads for the state dir h owns; its run index is kept up
// to date by h's writer.
func (h *Harness) reads() readerReads {
	return readerReads{rd: h.history, index: h.index, live: h.isLive}
}

// QueryRuns answers a page of the state dir's runs, newest first, from an
// index of their headers kept in memory (built on the first call).
func (h *Harness) QueryRuns(ctx context.Context, q history.RunQuery) (history.RunPage, error) {
	return h.reads().QueryRuns(ctx, q)
}

// Suites lists the suites run in the state dir, newest first.
func (h *Harness) Suites(ctx context.Context) ([]history.SuiteRecord, error) {
	return h.reads().Suites(ctx)
}

// Suite returns one suite's record, or an error matching
// history.ErrSuiteNotFound.
func (h *Harness) Suite(ctx context.Context, id string) (history.SuiteRecord, error) {
	return h.reads().Suite(ctx, id)
}

// Reflections lists every reflection of every run, newest run first.
func (h *Harness) Reflections(ctx context.Context) ([]history.RunReflection, error) {
	return h.reads().Reflections(ctx)
}

// DefaultViewGap is ViewOptions.Gap's default.
const DefaultViewGap = 20 * time.Millisecond

// ownerWait bounds how long a View waits for a state dir's owner to answer
// on its control socket (a process that has just taken the state dir
// serves it a moment later).
const ownerWait = 3 * time.Second

// ViewOptions configure a View.
type ViewOptions struct {
	// StateDir is the state dir to read. Default DefaultStateDir.
	StateDir string
	// Gap is the least time a View leaves the state dir free between two
	// of its own reads of the journal, so that a process waiting to take
	// it (a run starting) always gets it. Default DefaultViewGap.
	Gap time.Duration
	// Logger receives diagnostics. Default: discard.
	Logger *slog.Logger
}

// View reads a state dir without ever holding it while idle, so that it
// never blocks a run of the same state dir: while another process owns
// the state dir, it asks that process through its control socket; while
// nobody does, it opens the journal read-only for the moment of each read
// (a run that starts meanwhile waits those milliseconds instead of
// failing: journal.Options.ReadOnly), and leaves it free at least Gap
// between two reads. The runs' headers are kept in memory between reads
// and read again only when the journal changed. It is what `overnight
// serve` and `overnight report` read through. Safe for concurrent use.
type View struct {
	dir   string
	gap   time.Duration
	log   *slog.Logger
	index *history.RunIndex

	mu        sync.Mutex // one read of the journal at a time; guards lastClose and remote
	lastClose time.Time
	remote    *Remote
}

// OpenView returns a View of opts.StateDir, which must hold a journal.
func OpenView(opts ViewOptions) (*View, error) {
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir
	}
	abs, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("state dir %q: %w", opts.StateDir, err)
	}
	if err := requireJournal(abs); err != nil {
		return nil, err
	}
	if opts.Gap <= 0 {
		opts.Gap = DefaultViewGap
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &View{dir: abs, gap: opts.Gap, log: opts.Logger, index: history.NewRunIndex()}, nil
}

// StateDir returns the absolute state dir.
func (v *View) StateDir() string { return v.dir }

// QueryRuns answers a page of the state dir's runs, newest first.
func (v *View) QueryRuns(ctx context.Context, q history.RunQuery) (history.RunPage, error) {
	return viewRead(ctx, v, func(r Reads) (history.RunPage, error) { return r.QueryRuns(ctx, q) })
}

// Full reads everything a report of a run shows.
func (v *View) Full(ctx context.Context, runID string) (*history.Full, error) {
	return viewRead(ctx, v, func(r Reads) (*history.Full, error) { return r.Full(ctx, runID) })
}

// Suites lists the suites run in the state dir, newest first.
func (v *View) Suites(ctx context.Context) ([]history.SuiteRecord, error) {
	return viewRead(ctx, v, func(r Reads) ([]history.SuiteRecord, error) { return r.Suites(ctx) })
}

// Suite returns one suite's record, or an error matching
// history.ErrSuiteNotFound.
func (v *View) Suite(ctx context.Context, id string) (history.SuiteRecord, error) {
	return viewRead(ctx, v, func(r Reads) (history.SuiteRecord, error) { return r.Suite(ctx, id) })
}

// Reflections lists every reflection of every run, newest run first.
func (v *View) Reflections(ctx context.Context) ([]history.RunReflection, error) {
	return viewRead(ctx, v, func(r Reads) ([]history.RunReflection, error) { return r.Reflections(ctx) })
}

// viewRead makes one read through v (see View.read).
func viewRead[T any](ctx context.Context, v *View, fn func(Reads) (T, error)) (T, error) {
	var out T
	err := v.read(ctx, func(r Reads) (err error) {
		out, err = fn(r)
		return err
	})
	return out, err
}

// Owned reports whether another process owns the state dir now (the View
// then reads through its control socket).
func (v *View) Owned(ctx context.Context) bool { return v.owner(ctx) != nil }

// owner returns the Remote of the process that owns the state dir, or nil
// when none answers on its control socket.
func (v *View) owner(ctx context.Context) *Remote {
	v.mu.Lock()
	rm := v.remote
	v.mu.Unlock()
	if rm != nil {
		return rm
	}
	rm, err := DialControl(ctx, v.dir)
	if err != nil {
		return nil
	}
	v.mu.Lock()
	v.remote = rm
	v.mu.Unlock()
	return rm
}

// forget drops a Remote whose process stopped answering.
func (v *View) forget(rm *Remote) {
	v.mu.Lock()
	if v.remote == rm {
		v.remote = nil
	}
	v.mu.Unlock()
}

// read runs fn against the owner of the state dir, or the journal for the
// moment fn takes when nobody owns it.
func (v *View) read(ctx context.Context, fn func(Reads) error) error {
	deadline := time.Now().Add(ownerWait)
	for {
		if rm := v.owner(ctx); rm != nil {
			err := fn(rm)
			if !errors.Is(err, errNoAnswer) {
				return err
			}
			v.forget(rm)
			v.log.Debug("the state dir's owner stopped answering: reading the journal", "err", err)
		}
		err := v.readJournal(ctx, fn)
		if !errors.Is(err, journal.ErrLocked) || time.Now().After(deadline) {
			return err
		}
		// Owned, and no control socket answers yet: a process that has
		// just taken the state dir serves one a moment later.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// readJournal runs fn against the journal opened read-only for the moment.
func (v *View) readJournal(ctx context.Context, fn func(Reads) error) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if wait := v.gap - time.Since(v.lastClose); wait > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	j, err := journal.Open(v.dir, journal.Options{ReadOnly: true, Logger: v.log})
	if err != nil {
		return err
	}
	defer func() {
		if err := j.Close(); err != nil {
			v.log.Warn("close the journal after a read", "err", err)
		}
		v.lastClose = time.Now()
	}()
	// The lock is ours: no process drives a run of this state dir.
	return fn(readerReads{rd: history.NewReader(j, nil), index: v.index})
}
