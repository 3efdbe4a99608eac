package mcpworld

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// Redo replays entry e of a real run's journal of answers into w, a fresh
// instance of the same server (a shadow for reflection, as tau2-bench
// rebuilds an environment from a trajectory): a mutating call the real
// server answered done is sent again — the same tool, arguments and key
// in _meta — and its answer must be the recorded one; anything else (a
// read-only tool's call, which changed nothing; a refusal, which did not
// act) is journaled as it was, never sent; a call reconciled by a lookup
// (its answer lost) is sent again and must be done. An answer other than the
// recorded one — another result, a refusal, the call in doubt — is an
// error wrapping world.ErrNotReplayable naming both answers: the fresh
// instance does not stand where the real server stood, and nothing should
// be verified on it.
func (w *World) Redo(ctx context.Context, e world.LedgerEntry) error {
	if w.conn == nil || w.replay != nil {
		return fmt.Errorf("MCP server %s: ledger entry %d (%s): only a server reached live takes a replayed call: %w", w.cfg.Server.Name, e.Seq, e.Kind, ErrOffline)
	}
	tool, known := w.Tool(e.Kind)
	if !known {
		return fmt.Errorf("%w: MCP server %s's fresh instance lists no tool of kind %s (ledger entry %d)", world.ErrNotReplayable, w.cfg.Server.Name, e.Kind, e.Seq)
	}
	if ro, _, _ := Flags(tool); ro || e.Outcome.Status != protocol.StatusDone {
		return w.dups.Record(ctx, e)
	}
	out, err := w.Execute(ctx, world.Request{Key: e.Key, Kind: e.Kind, Args: e.Args, Now: e.At})
	if err != nil {
		return fmt.Errorf("%w: MCP server %s's fresh instance left ledger entry %d (tools/call %s %s, key %q) in doubt: %w", world.ErrNotReplayable, w.cfg.Server.Name, e.Seq, tool.Name, e.Args, e.Key, err)
	}
	if out.Status != protocol.StatusDone || (!scenarios.MCPReconciled(e.Outcome.Result) && !sameJSON(out.Result, e.Outcome.Result)) {
		got := string(out.Result)
		if out.Status != protocol.StatusDone && out.Error != nil {
			got = fmt.Sprintf("%s (%s: %s)", out.Status, out.Error.Code, out.Error.Message)
		}
		return fmt.Errorf("%w: MCP server %s's fresh instance answered ledger entry %d (tools/call %s %s, key %q) %s, and the real server %s: replaying the run's calls does not rebuild its state, so nothing is verified on it",
			world.ErrNotReplayable, w.cfg.Server.Name, e.Seq, tool.Name, e.Args, e.Key, snippet([]byte(got)), snippet(e.Outcome.Result))
	}
	return nil
}

// sameJSON reports whether a and b are the same JSON value (object keys
// in any order).
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	ca, _ := json.Marshal(x)
	cb, _ := json.Marshal(y)
	return bytes.Equal(ca, cb)
}
