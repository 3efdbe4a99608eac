package httpworld

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// ErrReplayDiverged is world.ErrReplayDiverged, shared by every world
// that replays a recording.
var ErrReplayDiverged = world.ErrReplayDiverged

// Divergence is world.Divergence: the first request of a replay its
// recording could not answer.
type Divergence = world.Divergence

// divergenceDetails are the machine-readable details of a replay_diverged
// failure, kept in the journal with it.
type divergenceDetails struct {
	Route      string `json:"route"`
	Occurrence int    `json:"occurrence"`
	Recording  string `json:"recording,omitempty"`
}

// diverged is the failure answering a request the recording cannot answer.
func (w *World) diverged(route scenarios.HTTPRoute, occurrence, recorded int) world.Outcome {
	run := w.cfg.RecordingRun
	if run == "" {
		run = "(none given)"
	}
	o := world.FailedWith(502, CodeReplayDiverged, divergenceDetails{Route: route.String(), Occurrence: occurrence, Recording: w.cfg.RecordingRun},
		"replay of HTTP API %s diverged: the recording of run %s answers %s with these args %d time(s), and this is request %d; it was not sent upstream",
		w.cfg.API.Name, run, route, recorded, occurrence)
	o.Error.Transient = false // the recording will not answer it on a retry either
	return o
}

// Divergence is the first request of this run the recording could not
// answer, read from the journal of answers (so it survives a resume and is
// read by a journal-only view); nil when the run has not diverged, or the
// API is not replayed.
func (w *World) Divergence(ctx context.Context) (*Divergence, error) {
	w.mu.Lock()
	e, err := world.FirstDivergedIn(ctx, w.journal, w.replay)
	w.mu.Unlock()
	if err != nil || e == nil {
		return nil, err
	}
	d := &Divergence{API: w.cfg.API.Name, Kind: e.Kind, Ordinal: e.Seq, Key: e.Key, Message: e.Outcome.Error.Message, At: e.At}
	var det divergenceDetails
	if json.Unmarshal(e.Outcome.Error.Details, &det) == nil {
		d.Route, d.Occurrence, d.Recording = det.Route, det.Occurrence, det.Recording
	}
	if d.Route == "" {
		if r, ok := w.cfg.API.Route(e.Kind); ok {
			d.Route = r.String()
		}
	}
	return d, nil
}

// notDiverged is nil, or an error wrapping ErrReplayDiverged naming the
// first divergence: what cannot be judged of a diverged replay.
func (w *World) notDiverged(ctx context.Context, what string) error {
	if w.cfg.API.Mode != scenarios.HTTPReplay {
		return nil
	}
	d, err := w.Divergence(ctx)
	if err != nil || d == nil {
		return err
	}
	return fmt.Errorf("%w: %s is not judged, since request %d to HTTP API %s (%s, %s) was answered by no recorded exchange and never reached a world", ErrReplayDiverged, what, d.Ordinal, d.API, d.Kind, d.Route)
}
