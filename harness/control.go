package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/harness/history"
)

// ControlSocketName is the control socket in a state dir. While a process
// owns the state dir (a run is live), other commands reach its runs, logs
// and held effects through it, and a person's gate decisions: the journal
// itself admits one process at a time.
const ControlSocketName = "control.sock"

// maxSocketPath is the longest path a unix socket can be bound to on Linux
// (sun_path is 108 bytes, NUL included).
const maxSocketPath = 107

// controlServer serves a Harness's runs and logs on the state dir's control
// socket, read-only.
type controlServer struct {
	srv  *http.Server
	l    net.Listener
	path string
	once sync.Once
}

// serveControl starts the control socket. A state dir whose path is too
// long for a socket gets none: other commands then say who owns it.
func (h *Harness) serveControl() *controlServer {
	path := filepath.Join(h.state, ControlSocketName)
	if len(path) > maxSocketPath {
		h.log.Debug("no control socket: the state dir's path is too long for one", "path", path)
		return nil
	}
	// The state dir's lock is ours: a socket left here is a dead owner's.
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		h.log.Warn("no control socket", "path", path, "err", err)
		return nil
	}
	_ = os.Chmod(path, 0o600)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/runs", func(w http.ResponseWriter, r *http.Request) {
		runs, err := h.Runs()
		controlReply(w, map[string]any{"runs": runs}, err)
	})
	mux.HandleFunc("GET /v1/runs/{id}/logs", func(w http.ResponseWriter, r *http.Request) {
		logs, err := h.Logs(r.PathValue("id"))
		controlReply(w, map[string]any{"attempts": logs}, err)
	})
	mux.HandleFunc("GET /v1/runs/query", func(w http.ResponseWriter, r *http.Request) {
		q, err := history.ParseRunQuery(r.URL.Query())
		var page history.RunPage
		if err == nil {
			page, err = h.QueryRuns(r.Context(), q)
		}
		controlReply(w, page, err)
	})
	mux.HandleFunc("GET /v1/suites", func(w http.ResponseWriter, r *http.Request) {
		suites, err := h.Suites(r.Context())
		controlReply(w, map[string]any{"suites": suites}, err)
	})
	mux.HandleFunc("GET /v1/suites/{id}", func(w http.ResponseWriter, r *http.Request) {
		suite, err := h.Suite(r.Context(), r.PathValue("id"))
		controlReply(w, suite, err)
	})
	mux.HandleFunc("GET /v1/reflections", func(w http.ResponseWriter, r *http.Request) {
		refls, err := h.Reflections(r.Context())
		controlReply(w, map[string]any{"reflections": refls}, err)
	})
	mux.HandleFunc("GET /v1/runs/{id}/full", func(w http.ResponseWriter, r *http.Request) {
		full, err := h.Full(r.Context(), r.PathValue("id"))
		controlReply(w, full, err)
	})
	mux.HandleFunc("GET /v1/runs/{id}/gate", func(w http.ResponseWriter, r *http.Request) {
		held, err := h.Held(r.Context(), r.PathValue("id"))
		controlReply(w, map[string]any{"held": nonNilHeld(held)}, err)
	})
	mux.HandleFunc("POST /v1/runs/{id}/gate/{decision}", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Effect     string `json:"effect"`
			Key        string `json:"key"` // an older client's name for effect
			ArgsDigest string `json:"args_digest"`
			By         string `json:"by"`
		}
		err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body)
		if body.Effect == "" {
			body.Effect = body.Key
		}
		if err == nil {
			switch d := r.PathValue("decision"); d {
			case "approve", "deny":
				err = h.Decide(r.Context(), r.PathValue("id"), Decision{Effect: body.Effect, ArgsDigest: body.ArgsDigest, Approve: d == "approve", By: body.By})
			default:
				err = fmt.Errorf("no gate decision %q: approve or deny", d)
			}
		}
		controlReply(w, map[string]any{"ok": err == nil}, err)
	})
	c := &controlServer{path: path, l: l, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
	go func() { _ = c.srv.Serve(l) }()
	return c
}

// close stops serving and removes the socket, before the state dir's lock
// is released. The listener is closed here, not only by Serve, so that no
// late Serve can remove a socket the next owner made.
func (c *controlServer) close() {
	if c == nil {
		return
	}
	c.once.Do(func() {
		if ul, ok := c.l.(*net.UnixListener); ok {
			ul.SetUnlinkOnClose(false) // removed below, while the lock is still held
		}
		_ = c.l.Close()
		_ = c.srv.Close()
		_ = os.Remove(c.path)
	})
}

type controlError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func controlReply(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		var e controlError
		e.Error.Code, e.Error.Message = "internal", err.Error()
		status := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrRunNotFound):
			e.Error.Code, status = "not_found", http.StatusNotFound
		case errors.Is(err, ErrNotHeld):
			e.Error.Code, status = "not_held", http.StatusNotFound
		case errors.Is(err, history.ErrSuiteNotFound):
			e.Error.Code, status = "suite_not_found", http.StatusNotFound
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(e)
		return
	}
	_ = json.NewEncoder(w).Encode(v)
}

func nonNilHeld(h []HeldEffect) []HeldEffect {
	if h == nil {
		return []HeldEffect{}
	}
	return h
}

// Remote reads the runs of a state dir that another process owns, through
// its control socket, and passes a person's gate decisions to it.
type Remote struct {
	state string
	c     *http.Client
}

// DialControl returns a Remote for the process that owns stateDir, or an
// error when none answers on its control socket.
func DialControl(ctx context.Context, stateDir string) (*Remote, error) {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(abs, ControlSocketName)
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "unix", path)
	}
	rm := &Remote{state: abs, c: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dial}}}
	conn, err := dial(ctx, "", "")
	if err != nil {
		return nil, fmt.Errorf("no control socket answers in %s: %w", abs, err)
	}
	_ = conn.Close()
	return rm, nil
}

// Runs lists the runs, as (*Harness).Runs does in the owning process.
func (rm *Remote) Runs(ctx context.Context) ([]RunSummary, error) {
	var out struct {
		Runs []RunSummary `json:"runs"`
	}
	err := rm.get(ctx, "/v1/runs", &out)
	return out.Runs, err
}

// Logs returns a run's kept attempt logs, as (*Harness).Logs does in the
// owning process.
func (rm *Remote) Logs(ctx context.Context, runID string) ([]AttemptLog, error) {
	var out struct {
		Attempts []AttemptLog `json:"attempts"`
	}
	err := rm.get(ctx, "/v1/runs/"+url.PathEscape(runID)+"/logs", &out)
	return out.Attempts, err
}

// QueryRuns answers a page of the runs, as (*Harness).QueryRuns does in
// the owning process.
func (rm *Remote) QueryRuns(ctx context.Context, q history.RunQuery) (history.RunPage, error) {
	var page history.RunPage
	err := rm.get(ctx, "/v1/runs/query?"+q.Values().Encode(), &page)
	return page, err
}

// Suites lists the suites, as (*Harness).Suites does in the owning process.
func (rm *Remote) Suites(ctx context.Context) ([]history.SuiteRecord, error) {
	var out struct {
		Suites []history.SuiteRecord `json:"suites"`
	}
	err := rm.get(ctx, "/v1/suites", &out)
	return out.Suites, err
}

// Suite returns one suite's record, as (*Harness).Suite does in the owning
// process.
func (rm *Remote) Suite(ctx context.Context, id string) (history.SuiteRecord, error) {
	var rec history.SuiteRecord
	err := rm.get(ctx, "/v1/suites/"+url.PathEscape(id), &rec)
	return rec, err
}

// Reflections lists every reflection of every run, as (*Harness).Reflections
// does in the owning process.
func (rm *Remote) Reflections(ctx context.Context) ([]history.RunReflection, error) {
	var out struct {
		Reflections []history.RunReflection `json:"reflections"`
	}
	err := rm.get(ctx, "/v1/reflections", &out)
	return out.Reflections, err
}

// Full reads everything a report of a run shows, as (*Harness).Full does
// in the owning process.
func (rm *Remote) Full(ctx context.Context, runID string) (*history.Full, error) {
	var out history.Full
	if err := rm.get(ctx, "/v1/runs/"+url.PathEscape(runID)+"/full", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Held lists a run's effects waiting at its gate, as (*Harness).Held does
// in the owning process.
func (rm *Remote) Held(ctx context.Context, runID string) ([]HeldEffect, error) {
	var out struct {
		Held []HeldEffect `json:"held"`
	}
	err := rm.get(ctx, "/v1/runs/"+url.PathEscape(runID)+"/gate", &out)
	return out.Held, err
}

// Decide approves or denies a held effect, as (*Harness).Decide does in the
// owning process.
func (rm *Remote) Decide(ctx context.Context, runID string, d Decision) error {
	decision := "deny"
	if d.Approve {
		decision = "approve"
	}
	body, err := json.Marshal(map[string]string{"effect": d.Effect, "key": d.Effect, "args_digest": d.ArgsDigest, "by": d.By})
	if err != nil {
		return err
	}
	var out map[string]any
	return rm.send(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(runID)+"/gate/"+decision, body, &out)
}

func (rm *Remote) get(ctx context.Context, path string, v any) error {
	return rm.send(ctx, http.MethodGet, path, nil, v)
}

func (rm *Remote) send(ctx context.Context, method, path string, body []byte, v any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://control"+path, rd)
	if err != nil {
		return err
	}
	resp, err := rm.c.Do(req)
	if err != nil {
		return &wrapped{fmt.Sprintf("ask the owner of %s: %v", rm.state, err), errNoAnswer}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read the answer of the owner of %s: %w", rm.state, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e controlError
		if json.Unmarshal(answer, &e) == nil && e.Error.Message != "" {
			switch e.Error.Code {
			case "not_found":
				return &wrapped{e.Error.Message, ErrRunNotFound}
			case "not_held":
				return &wrapped{e.Error.Message, ErrNotHeld}
			case "suite_not_found":
				return &wrapped{e.Error.Message, history.ErrSuiteNotFound}
			}
			return errors.New(e.Error.Message)
		}
		return fmt.Errorf("the owner of %s answered %s", rm.state, resp.Status)
	}
	if err := json.Unmarshal(answer, v); err != nil {
		return fmt.Errorf("the owner of %s answered: %w", rm.state, err)
	}
	return nil
}

// errNoAnswer is matched by an error of a Remote whose process did not
// answer at all (it exited, or is not there): a View then reads the
// journal itself.
var errNoAnswer = errors.New("the state dir's owner does not answer")

// wrapped is an error with the owner's own message that matches a sentinel.
type wrapped struct {
	msg string
	is  error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.is }
