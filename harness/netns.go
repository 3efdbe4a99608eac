package harness

import (
	"context"
	"slices"

	"github.com/overnight-dev/overnight/sandbox"
)

// netPool is the process's pool of network-namespace holders (see
// sandbox.NetPool), made on first use from the init's sandbox image. Nil
// when it cannot be made: sandboxes then get namespaces of their own.
func (h *Harness) netPool(ctx context.Context) *sandbox.NetPool {
	if p := h.currentPool(); p != nil {
		return p
	}
	eng, err := h.engine(ctx)
	if err != nil {
		return nil
	}
	bin, err := h.initBinary()
	if err != nil {
		return nil
	}
	img, err := h.image(ctx, sandbox.ImageSpec{InitBinary: bin})
	if err != nil {
		h.log.Warn("no network namespace holders: the init's image", "err", err)
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pool == nil {
		h.pool = eng.NewNetPool(img)
	}
	return h.pool
}

// WarmSandboxes keeps n sandboxes' network namespaces ready in the
// background (see sandbox.NetPool), for a caller about to start that many
// runs at once: a suite's worker pool. It returns at once.
func (h *Harness) WarmSandboxes(ctx context.Context, n int) {
	if p := h.netPool(ctx); p != nil {
		p.Warm(n)
	}
}

// WarmReady is how many warm network namespaces are ready now (0 before
// WarmSandboxes): a caller that must not pay for their start, a benchmark
// of what a long-lived harness does, waits for it.
func (h *Harness) WarmReady() int { return h.currentPool().Idle() }

// warmFor warms the pool for what a run will start beyond its first
// attempt when its schedule kills or restarts the agent: the next
// attempt's namespace is ready when the fault strikes. (A run with
// reflection does not warm its isolated runs' namespaces: measured on
// deploy-v2, five holders started beside the run's first attempt were not
// ready when it failed a second later, and slowed the replays' own starts —
// the engine's CPU is what both wait for.)
func (h *Harness) warmFor(ctx context.Context, r *run) {
	if slices.ContainsFunc(r.faults.faults, func(f *faultState) bool { return f.kind.Group == "process" && !f.kind.EndsHarness }) {
		h.WarmSandboxes(ctx, 1)
	}
}

// currentPool is the pool if this process made one (nil: none; a nil pool
// hands out no holder).
func (h *Harness) currentPool() *sandbox.NetPool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pool
}
