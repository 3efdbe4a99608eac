package httpworld

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// EventProbe is the journal Kind of a goal's probe: the request sent
// upstream when the run was judged ({route, body}: its args) and the answer
// (a Result, as a request's). A replay of the run judges goal-reached from
// it without sending anything upstream. As a world event it has no key and
// is never an effect.
const EventProbe = "world.probe"

// probeArgs are a probe event's args.
type probeArgs struct {
	Route string          `json:"route"`
	Body  json.RawMessage `json:"body,omitempty"`
}

func newProbeArgs(method, path string, body json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(probeArgs{Route: method + " " + path, Body: compactOrNil(body)})
	return b
}

func compactOrNil(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return nil
	}
	return world.CompactJSON(raw)
}

// Probe sends a read-only request upstream (a goal's probe), with the
// credentials, and returns the status and the JSON answer (nil for an
// empty body). A 5xx or no answer is an *UpstreamError; a body that is not
// JSON is an error. The exchange is journaled (EventProbe), so that a
// replay of the run is judged as the run was. In replay nothing is sent:
// the recording's last answer to the same probe answers, and a recording
// without one is an *UpstreamError (the goal is then unknown).
func (w *World) Probe(ctx context.Context, method, path string, body json.RawMessage) (int, any, error) {
	if w.offline {
		return 0, nil, fmt.Errorf("HTTP API %s: the probe %s %s: %w", w.cfg.API.Name, method, path, ErrOffline)
	}
	args := newProbeArgs(method, path, body)
	var res Result
	if w.cfg.API.Mode == scenarios.HTTPReplay {
		r, ok := w.recordedProbe(args)
		if !ok {
			return 0, nil, &UpstreamError{API: w.cfg.API.Name, Route: method + " " + path,
				Msg: fmt.Sprintf("a replay sends nothing upstream, and the recording of run %s holds no answer to the goal's probe %s", w.cfg.RecordingRun, args)}
		}
		res = r
	} else {
		a, err := w.send(ctx, method, path, body)
		if err != nil {
			return 0, nil, err
		}
		if a.overSize > 0 {
			return a.status, nil, fmt.Errorf("HTTP API %s: the probe %s %s answered %d with a body over its max_body (%d bytes)", w.cfg.API.Name, method, path, a.status, MaxBody(w.cfg.API))
		}
		res = Result{Status: a.status, ContentType: a.header.Get("Content-Type")}
		if err := w.keepBody(ctx, &res, a.body); err != nil {
			return 0, nil, err
		}
		b, err := json.Marshal(res)
		if err != nil {
			return 0, nil, err
		}
		e := world.LedgerEntry{Kind: EventProbe, Args: args, Outcome: world.Outcome{Status: protocol.StatusDone, Result: b}}
		if err := w.record(ctx, e); err != nil {
			return 0, nil, fmt.Errorf("journal the goal's probe of HTTP API %s: %w", w.cfg.API.Name, err)
		}
	}
	res, err := res.Resolve(w.cfg.Blobs)
	if err != nil {
		return 0, nil, fmt.Errorf("HTTP API %s: the probe %s %s: %w", w.cfg.API.Name, method, path, err)
	}
	var response any
	if raw := res.Bytes(); len(raw) > 0 {
		if err := json.Unmarshal(raw, &response); err != nil {
			return res.Status, nil, fmt.Errorf("HTTP API %s: %s %s answered %d with no JSON: %s", w.cfg.API.Name, method, path, res.Status, snippet(raw))
		}
	}
	return res.Status, response, nil
}

// recordedProbe is the recording's last answer to the probe args.
func (w *World) recordedProbe(args json.RawMessage) (Result, bool) {
	want := world.CompactJSON(args)
	for i := len(w.cfg.Recording) - 1; i >= 0; i-- {
		e := w.cfg.Recording[i]
		if e.Kind != EventProbe || !bytes.Equal(world.CompactJSON(e.Args), want) {
			continue
		}
		if r, ok := ResultOf(e.Outcome.Result); ok {
			return r, true
		}
	}
	return Result{}, false
}
