package harness

import "github.com/overnight-dev/overnight/sandbox/docker"

// pool is the Docker backend's pool of network-namespace holders (nil:
// none yet, or another backend).
func pool(h *Harness) *docker.NetPool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if b, ok := h.sandbox.(*docker.Backend); ok {
		return b.Pool()
	}
	return nil
}

// NetNSStats is how often this process's sandboxes found a warm network
// namespace ready (tests only).
func NetNSStats(h *Harness) (hits, misses int) { return pool(h).Stats() }

// NetHolders are the holders this process's pool owns.
func NetHolders(h *Harness) []string { return pool(h).Holders() }
