package history

import (
	"time"

	"github.com/overnight-dev/overnight/chaos"
)

// VirtualInstant writes a moment of a run's virtual time for a person, as
// every report does (the text of `overnight run`, the run and reflection
// reports, the viewer): its offset d from the run's virtual start, with a
// plus sign, in the duration syntax of fault specs (chaos.FormatDuration),
// so "+3d11h43m" reads the way `t:3d11h43m` schedules it. A negative d (a
// moment before the start, which a run never records) is written as +0s.
// JSON results keep their numbers (applied_virtual_ms and the like).
func VirtualInstant(d time.Duration) string {
	return "+" + chaos.FormatDuration(max(d, 0))
}

// VirtualSince is VirtualInstant of t on a run whose virtual clock started
// at start, or "–" for a zero t (a moment that never came).
func VirtualSince(start, t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return VirtualInstant(t.Sub(start))
}

// VirtualSpan writes a length of virtual time (a run's, say) in the same
// syntax: "3d11h43m", "1m30s".
func VirtualSpan(d time.Duration) string { return chaos.FormatDuration(max(d, 0)) }
