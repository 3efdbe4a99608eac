package mcpworld

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// CodeReplayDiverged: in replay, the recording has no answer for the call
// (the same code as an HTTP API's, world.CodeReplayDiverged).
const CodeReplayDiverged = world.CodeReplayDiverged

// Recording is what a recorded run journaled of an MCP server — its tools
// as listed and every answer — that a replay answers from.
type Recording struct {
	Run     string              // the recorded run
	Tools   []*mcp.Tool         // its tools/list
	Answers []world.LedgerEntry // its journal of answers, in order
}

// ReadRecording reads what run journaled of server in its store under
// prefix (where OpenConn journaled its tools and answers).
func ReadRecording(ctx context.Context, run string, server scenarios.MCPServer, store world.Store, prefix []byte) (Recording, error) {
	w, err := OpenJournal(server, store, prefix)
	if err != nil {
		return Recording{}, err
	}
	answers, err := w.journal.Ledger(ctx)
	if err != nil {
		return Recording{}, err
	}
	return Recording{Run: run, Tools: w.Tools(), Answers: answers}, nil
}

// OpenReplay opens the world of cfg's server answered from rec alone: no
// server is started or reached. Its tools are the recorded tools/list; a
// call is answered with the recorded answer to the same occurrence of the
// same tool and (canonical) arguments — the n-th such call of this run
// gets the n-th such answer — and one the recording lacks is the first
// divergence: a permanent failure, code replay_diverged, never sent. The
// answers are journaled in store under prefix like a live server's, and
// what a diverged replay cannot judge (duplicates) wraps
// world.ErrReplayDiverged.
func OpenReplay(cfg Config, rec Recording, store world.Store, prefix []byte) (*World, error) {
	w, err := open(cfg, store, prefix)
	if err != nil {
		return nil, err
	}
	w.replay, w.replayer = &rec, world.NewReplay(rec.Answers, w.journal)
	w.tools = rec.Tools
	if b, err := json.Marshal(rec.Tools); err == nil {
		if err := store.Commit(context.Background(), world.Entry{Key: toolsKeyOf(prefix), Value: b}); err != nil {
			return nil, fmt.Errorf("MCP server %s: journal its recorded tools: %w", cfg.Server.Name, err)
		}
	}
	return w, nil
}

// Replaying is the run the world replays ("" when it reaches its server).
func (w *World) Replaying() string {
	if w.replay == nil {
		return ""
	}
	return w.replay.Run
}

// answer is the recorded answer to req. w.mu is held.
func (w *World) answer(ctx context.Context, req world.Request, tool string) (world.Outcome, error) {
	a, err := w.replayer.Answer(ctx, req)
	if err != nil {
		return world.Outcome{}, err
	}
	if a.Found {
		return a.Outcome, nil
	}
	o := world.FailedWith(http.StatusBadGateway, CodeReplayDiverged, divergenceDetails{Tool: tool, Occurrence: a.Occurrence, Recording: w.replay.Run},
		"replay of MCP server %s diverged: the recording of run %s answers tools/call %s with these arguments %d time(s), and this is call %d; it was not sent to the server",
		w.cfg.Server.Name, w.replay.Run, tool, a.Recorded, a.Occurrence)
	o.Error.Transient = false // the recording will not answer it on a retry either
	return o, nil
}

// divergenceDetails are the machine-readable details of a replay_diverged
// failure, kept in the journal with it.
type divergenceDetails struct {
	Tool       string `json:"tool"`
	Occurrence int    `json:"occurrence"`
	Recording  string `json:"recording,omitempty"`
}

// Divergence is the first call of this run the recording could not
// answer, read from the journal of answers (so it survives a resume); nil
// when the run has not diverged, or the server is not replayed.
func (w *World) Divergence(ctx context.Context) (*world.Divergence, error) {
	w.mu.Lock()
	e, err := world.FirstDivergedIn(ctx, w.journal, w.replayer)
	w.mu.Unlock()
	if err != nil || e == nil {
		return nil, err
	}
	d := &world.Divergence{API: w.cfg.Server.Name, Kind: e.Kind, Ordinal: e.Seq, Key: e.Key, Message: e.Outcome.Error.Message, At: e.At}
	var det divergenceDetails
	if json.Unmarshal(e.Outcome.Error.Details, &det) == nil {
		d.Route, d.Occurrence, d.Recording = "tools/call "+det.Tool, det.Occurrence, det.Recording
	}
	return d, nil
}

// notDiverged is nil, or an error wrapping world.ErrReplayDiverged
// naming the first divergence: what cannot be judged of a diverged replay.
func (w *World) notDiverged(ctx context.Context, what string) error {
	if w.replay == nil {
		return nil
	}
	d, err := w.Divergence(ctx)
	if err != nil || d == nil {
		return err
	}
	return fmt.Errorf("%w: %s is not judged, since call %d to MCP server %s (%s) was answered by no recorded call and never reached a server", world.ErrReplayDiverged, what, d.Ordinal, d.API, d.Kind)
}

// executeReplay answers req from the recording and journals the answer.
func (w *World) executeReplay(ctx context.Context, req world.Request) (world.Outcome, error) {
	tool, known := w.Tool(req.Kind)
	if !known {
		return world.Failed(http.StatusBadRequest, CodeUnknownTool, "MCP server %s (replayed from run %s) lists no tool of kind %q", w.cfg.Server.Name, w.replay.Run, req.Kind), nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out, err := w.answer(ctx, req, tool.Name)
	if err != nil {
		return world.Outcome{}, err
	}
	e := world.LedgerEntry{Key: req.Key, Kind: req.Kind, Args: req.Args, Outcome: out, At: req.Now}
	if err := w.dups.Record(ctx, e); err != nil {
		return world.Outcome{}, fmt.Errorf("journal the replayed answer of MCP server %s to %s (key %q): %w", w.cfg.Server.Name, tool.Name, req.Key, err)
	}
	w.replayer.Journaled(e)
	return out, nil
}
