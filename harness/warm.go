package harness

import (
	"context"
	"slices"
)

// WarmSandboxes keeps n sandboxes' costly parts ready in the background
// (sandbox.Warmer: Docker keeps network namespaces), for a caller about to
// start that many runs at once: a suite's worker pool. It returns at once;
// a backend without the capability does nothing.
func (h *Harness) WarmSandboxes(ctx context.Context, n int) {
	if w := h.warmer(ctx); w != nil {
		w.Warm(n)
	}
}

// WarmReady is how many warm sandboxes are ready now (0 before
// WarmSandboxes): a caller that must not pay for their start, a benchmark
// of what a long-lived harness does, waits for it.
func (h *Harness) WarmReady() int {
	h.mu.Lock()
	b := h.sandbox
	h.mu.Unlock()
	if w, ok := b.(interface{ Warmed() int }); ok {
		return w.Warmed()
	}
	return 0
}

// warmFor warms the backend for what a run will start beyond its first
// attempt when its schedule kills or restarts the agent: the next
// attempt's sandbox is quicker to start when the fault strikes. (A run
// with reflection does not warm its isolated runs': measured on
// deploy-v2, five holders started beside the run's first attempt were not
// ready when it failed a second later, and slowed the replays' own starts —
// the engine's CPU is what both wait for. Its reflection loop reserves the
// isolated runs' whole sandboxes instead, StandbyIsolated.)
func (h *Harness) warmFor(ctx context.Context, r *run) {
	if slices.ContainsFunc(r.faults.faults, func(f *faultState) bool { return f.kind.Group == "process" && !f.kind.EndsHarness }) {
		h.WarmSandboxes(ctx, 1)
	}
}
