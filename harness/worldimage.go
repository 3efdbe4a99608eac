package harness

import (
	"context"
	"errors"

	"github.com/overnight-dev/overnight/scenarios"
)

// imageWorlds are the image worlds this harness started: one container
// per run.
type imageWorlds struct{}

func (h *Harness) imageWorlds() *imageWorlds {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.images == nil {
		h.images = &imageWorlds{}
	}
	return h.images
}

func (iw *imageWorlds) ensure(ctx context.Context, runID string, w scenarios.World) (string, error) {
	return "", errors.New("image worlds: not built yet")
}

func (iw *imageWorlds) stop(ctx context.Context, runID string) {}

func (iw *imageWorlds) stopAll() {}
