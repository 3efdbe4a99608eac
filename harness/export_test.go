package harness

// NetNSStats is how often this process's sandboxes found a warm network
// namespace ready (tests only).
func NetNSStats(h *Harness) (hits, misses int) { return h.currentPool().Stats() }

// NetHolders are the holders this process's pool owns.
func NetHolders(h *Harness) []string { return h.currentPool().Holders() }
