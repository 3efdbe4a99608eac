package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/docker"
)

// DefaultBackends returns a registry of the sandbox backends this version
// ships: docker. The CLI's --backend names one of them.
func DefaultBackends() *sandbox.Registry {
	r := sandbox.NewRegistry()
	r.Register(docker.Type)
	return r
}

// DefaultBackend is the backend type of Options.Sandbox's zero value:
// Docker.
func DefaultBackend() sandbox.Type { return docker.Type }

// Backend is the type of the sandbox backend this harness runs on.
func (h *Harness) Backend() sandbox.Type { return h.opts.Sandbox }

// backend opens the sandbox backend on first use, and starts the janitor
// with it.
func (h *Harness) backend(ctx context.Context) (sandbox.Backend, error) {
	h.mu.Lock()
	if b := h.sandbox; b != nil {
		h.mu.Unlock()
		return b, nil
	}
	h.mu.Unlock()
	bin, err := h.initBinary()
	if err != nil {
		return nil, err
	}
	b, err := h.opts.Sandbox.Open(ctx, sandbox.Config{StateDir: h.state, InitBinary: bin, Logger: h.log, KeepWorkspace: h.resumable})
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.sandbox != nil {
		h.mu.Unlock()
		_ = b.Close(ctx)
		return h.sandbox, nil
	}
	h.sandbox = b
	h.janitor = startJanitor(h, b, janitorEvery)
	h.mu.Unlock()
	return b, nil
}

// closeBackend stops the janitor and closes the backend, if they were
// opened.
func (h *Harness) closeBackend() {
	h.mu.Lock()
	b, j := h.sandbox, h.janitor
	h.mu.Unlock()
	if j != nil {
		j.stop()
	}
	if b != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			h.log.Warn("close the sandbox backend", "err", err)
		}
	}
}

// capable says why the backend cannot do what a fault needs (nil: it can).
func (h *Harness) capable(need sandbox.Capability) error {
	if t := h.opts.Sandbox; !t.Has(need) {
		return fmt.Errorf("the %s sandbox backend lacks the %s capability: %w", t.Name, need, sandbox.ErrUnsupported)
	}
	return nil
}

// warmer is the backend's Warmer, when it has one and is open.
func (h *Harness) warmer(ctx context.Context) sandbox.Warmer {
	b, err := h.backend(ctx)
	if err != nil {
		return nil
	}
	w, _ := b.(sandbox.Warmer)
	return w
}
