package suite

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/harness/history"
)

// Progress hears of a suite's runs as they end. Its methods are called one
// at a time.
type Progress interface {
	Start(total int)
	Finished(r RunResult, done, total int, tally Counts)
	Stop()
}

// NewProgress reports a suite's progress to w. On a terminal (tty) it
// keeps one status line — runs done, passing, failing, unknown, ETA —
// redrawn in place, with a line above it for each run that did not pass
// (in colour unless color is false: NO_COLOR, or not a terminal); elsewhere
// (CI logs) it writes plain lines: one per run that did not pass, and the
// status every interval.
func NewProgress(w io.Writer, tty, color bool, interval time.Duration) Progress {
	if interval <= 0 {
		interval = 10 * time.Second
	}
	return &progress{w: w, tty: tty, color: tty && color, interval: interval}
}

type progress struct {
	w          io.Writer
	tty, color bool
	interval   time.Duration

	mu      sync.Mutex
	started time.Time
	total   int
	last    time.Time
	line    string
}

func (p *progress) Start(total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started, p.total, p.last = time.Now(), total, time.Now()
	fmt.Fprintf(p.w, "suite: %d runs\n", total)
}

func (p *progress) Finished(r RunResult, done, total int, t Counts) {
	p.mu.Lock()
	defer p.mu.Unlock()
	status := p.status(done, total, t)
	if r.Verdict != history.VerdictPass {
		what := fmt.Sprintf("%s %s/%s seed %d (run %s): %s", r.Verdict, r.Scenario, r.Agent, r.Seed, r.RunID, r.Reason)
		if p.color {
			what = "\x1b[31m" + what + "\x1b[0m"
		}
		if p.tty {
			fmt.Fprintf(p.w, "\r\x1b[K%s\n", what)
		} else {
			fmt.Fprintf(p.w, "suite: %s\n", what)
		}
	}
	switch {
	case p.tty:
		fmt.Fprintf(p.w, "\r\x1b[K%s", status)
		p.line = status
	case done == total || time.Since(p.last) >= p.interval:
		fmt.Fprintf(p.w, "suite: %s\n", status)
		p.last = time.Now()
	}
}

func (p *progress) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.line != "" {
		fmt.Fprintln(p.w)
	}
}

// status is "12/40 runs: 10 pass, 2 fail, 0 unknown; ETA 1m20s".
func (p *progress) status(done, total int, t Counts) string {
	s := fmt.Sprintf("%d/%d runs: %d pass, %d fail, %d unknown", done, total, t.Pass, t.Fail, t.Unknown)
	if done > 0 && done < total {
		per := time.Since(p.started) / time.Duration(done)
		s += fmt.Sprintf("; ETA %s", (per * time.Duration(total-done)).Round(time.Second))
	}
	return s
}
