package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/httpworld"
	"github.com/overnight-dev/overnight/scenarios/world/mcpworld"
)

// ErrNoCredential is wrapped when an HTTP API's credential is not in the
// harness's environment: nothing is run.
var ErrNoCredential = errors.New("an HTTP API's credential is not in the harness's environment")

// ErrNoRecording is wrapped when an HTTP API replays from a run this state
// dir does not hold (or that recorded nothing of it): nothing is run.
var ErrNoRecording = errors.New("no recording to replay the HTTP API from")

// getenv reads the harness's own environment (Options.Env).
func (h *Harness) getenv(name string) string {
	if h.opts.Env != nil {
		return h.opts.Env(name)
	}
	return os.Getenv(name)
}

// checkHTTP checks, before a run is recorded, what its HTTP APIs need from
// the harness: each credential in its environment, each replay's
// recording in the state dir.
func (h *Harness) checkHTTP(scen *scenarios.Scenario) error {
	var missing []string
	for _, a := range scen.HTTP {
		if c := a.Credentials; c != nil && h.getenv(c.Env) == "" {
			missing = append(missing, fmt.Sprintf("HTTP API %s needs $%s (its %s header)", a.Name, c.Env, c.Header))
		}
		if a.Mode != scenarios.HTTPReplay {
			continue
		}
		if a.Recording == "" {
			return fmt.Errorf("%w: HTTP API %s is in mode replay and names no recording (give recording: RUN-ID, or --http-replay RUN-ID)", ErrNoRecording, a.Name)
		}
		if _, err := h.recording(a); err != nil {
			return err
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s; set it where the harness runs (the agent's sandbox never sees it)", ErrNoCredential, strings.Join(missing, "; "))
	}
	if scen.ReplaysMCP() {
		for _, s := range scen.MCPServers() {
			if _, err := h.mcpRecording(context.Background(), scen.MCP.Replay, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// mcpRecording reads what run journaled of MCP server s: its tools/list
// and every answer, for a replay (--mcp-replay).
func (h *Harness) mcpRecording(ctx context.Context, run string, s scenarios.MCPServer) (mcpworld.Recording, error) {
	rec, err := h.runRecord(run)
	if err != nil {
		return mcpworld.Recording{}, fmt.Errorf("%w: MCP server %s replays run %s: %w", ErrNoRecording, s.Name, run, err)
	}
	store, prefix := h.w.WorldStore(rec.ID)
	r, err := mcpworld.ReadRecording(ctx, rec.ID, s, store, httpworld.MCPPrefix(prefix, s.Name))
	if err != nil {
		return mcpworld.Recording{}, err
	}
	if len(r.Tools) == 0 {
		return mcpworld.Recording{}, fmt.Errorf("%w: run %s journaled no tools/list of MCP server %s", ErrNoRecording, rec.ID, s.Name)
	}
	return r, nil
}

// recording reads the journal of API a's answers in the run it replays.
func (h *Harness) recording(a scenarios.HTTPAPI) ([]world.LedgerEntry, error) {
	rec, err := h.runRecord(a.Recording)
	if err != nil {
		return nil, fmt.Errorf("%w: HTTP API %s replays run %s: %w", ErrNoRecording, a.Name, a.Recording, err)
	}
	store, prefix := h.w.WorldStore(rec.ID)
	j, err := world.OpenJournal(a.Name, store, httpworld.APIPrefix(prefix, a.Name))
	if err != nil {
		return nil, err
	}
	l, err := j.Ledger(context.Background())
	if err != nil {
		return nil, err
	}
	if len(l) == 0 {
		return nil, fmt.Errorf("%w: run %s journaled no exchange with HTTP API %s", ErrNoRecording, rec.ID, a.Name)
	}
	return l, nil
}

// openHTTPWorlds opens the world of run rec, whose scenario declares HTTP
// APIs or MCP servers, in store under prefix: the scenario's world: (if
// any, opened by base), each API's world and each MCP server's (on the
// run's connection to it), behind one router.
func (h *Harness) openHTTPWorlds(ctx context.Context, rec history.RunRecord, scen *scenarios.Scenario, store world.Store, prefix []byte, base httpworld.OpenBase) (world.World, error) {
	// The journal of an API's answers is made durable by each effect's
	// result (AnswersStore): the pass-through costs the effect path's two
	// durable writes, intent and result. A shadow's is a scratch store's.
	// The answers of a server or API a recording answers are held in
	// memory a moment, as its effects' records are (effectPath.put).
	var answers world.Store
	if rec.Isolated == nil {
		answers, _ = h.w.AnswersStore(rec.ID, recordedPrefixes(scen, prefix)...)
	}
	return httpworld.Assemble(scen, store, answers, prefix, base, func(a scenarios.HTTPAPI, store world.Store, prefix []byte) (*httpworld.World, error) {
		cfg := httpworld.Config{API: a, Blobs: h.blobs()}
		if rec.Isolated != nil {
			// An isolated run acts on the API's shadow, a scratch upstream
			// the harness started for it, with no credential: the real
			// upstream is never reached from a shadow.
			url, ok := h.shadowURL(rec.ID, a.Name)
			if !ok {
				return nil, fmt.Errorf("%w: HTTP API %s of isolated run %s", errNoShadowURL, a.Name, rec.ID)
			}
			cfg.BaseURL = url
			cfg.API.Mode = scenarios.HTTPLive
			return httpworld.Open(cfg, store, prefix)
		}
		if c := a.Credentials; c != nil {
			v := h.getenv(c.Env)
			if v == "" {
				return nil, fmt.Errorf("%w: HTTP API %s needs $%s (its %s header) for run %s", ErrNoCredential, a.Name, c.Env, c.Header, rec.ID)
			}
			cfg.Credential = c.Prefix + v
		}
		if a.Mode == scenarios.HTTPReplay {
			l, err := h.recording(a)
			if err != nil {
				return nil, err
			}
			cfg.Recording, cfg.RecordingRun = l, a.Recording
		}
		return httpworld.Open(cfg, store, prefix)
	}, func(m scenarios.MCPServer, store world.Store, prefix []byte) (world.World, error) {
		if rec.Isolated != nil {
			// An isolated run acts on a fresh instance of the server of its
			// own (started here for it, on a data dir of its own), restored
			// by replaying the real run's calls: never on the real one.
			if err := mcpShadowable(scen); err != nil {
				return nil, fmt.Errorf("MCP server %s of isolated run %s: %w", m.Name, rec.ID, err)
			}
		} else if scen.ReplaysMCP() {
			r, err := h.mcpRecording(ctx, scen.MCP.Replay, m)
			if err != nil {
				return nil, err
			}
			return mcpworld.OpenReplay(mcpworld.Config{Server: m}, r, store, prefix)
		}
		c, err := h.mcpServers().conn(ctx, rec.ID, m)
		if err != nil {
			return nil, err
		}
		return mcpworld.OpenConn(ctx, c, store, prefix)
	})
}

// recordedPrefixes are where the journals of answers of scen's worlds a
// recording answers (answeredFromRecording, asked of each world's kinds)
// live under the world prefix.
func recordedPrefixes(scen *scenarios.Scenario, prefix []byte) [][]byte {
	var out [][]byte
	for _, m := range scen.MCPServers() {
		if answeredFromRecording(scen, m.EffectKind("")) {
			out = append(out, httpworld.MCPPrefix(prefix, m.Name))
		}
	}
	for _, a := range scen.HTTP {
		if answeredFromRecording(scen, a.EffectKind("")) {
			out = append(out, httpworld.APIPrefix(prefix, a.Name))
		}
	}
	return out
}

// journalBlobs are the state dir's journal blobs, for the bodies of large
// answers (httpworld.Blobs).
type journalBlobs struct {
	w *history.Writer
	r *history.Reader
}

func (b journalBlobs) PutBlob(ctx context.Context, data []byte) (string, error) {
	return b.w.PutBlob(ctx, data)
}

func (b journalBlobs) Blob(hash string) ([]byte, error) { return b.r.Blob(hash) }

// blobs are the harness's journal blobs as httpworld.Blobs.
func (h *Harness) blobs() httpworld.Blobs { return journalBlobs{w: h.w, r: h.history} }
