package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// MaxMCPSessions bounds the sessions (Mcp-Session-Id) one attempt keeps
// open on the MCP endpoint: opening one more closes its oldest. An
// attempt's sessions are closed when it ends.
const MaxMCPSessions = 16

// mcpSessionHeader is streamable HTTP's session header.
const mcpSessionHeader = "Mcp-Session-Id"

// mcpFront is the gateway's MCP endpoint: the official SDK's streamable
// HTTP handlers in front of one mcp.Server per attempt, which lists the
// attempt's tools and sends each call to the backend.
//
// Two handlers serve the same servers. The stateless one answers every
// request that carries no session: a client of protocol 2026-07-28 (the
// SDK's own client by default), whose notifications travel on the
// subscriptions/listen stream it opens, and a client that keeps no
// session. The stateful one answers an initialize — its answer carries an
// Mcp-Session-Id — and every request that sends that id back: a client of
// protocol 2025-11-25 or older, whose notifications travel on its
// session's GET stream. When the backend's tools change (MCPToolsChanged),
// each attempt's server is changed in place (AddTool, RemoveTools), and
// the SDK notifies its sessions.
type mcpFront struct {
	s         *Server
	b         MCPBackend
	stateless *mcp.StreamableHTTPHandler
	stateful  *mcp.StreamableHTTPHandler
	stopWatch func()

	mu       sync.Mutex
	attempts map[int]*mcpAttempt
	ended    int // attempts up to this one are over (MCPAttemptEnded)

	gen    atomic.Uint64 // bumped by MCPToolsChanged
	wake   chan struct{}
	done   chan struct{}
	closed sync.Once
}

// mcpAttempt is one attempt's MCP server and the tools it lists.
type mcpAttempt struct {
	c   Caller
	srv *mcp.Server

	listMu    sync.Mutex        // one listing at a time; guards listed
	listed    map[string][]byte // tool -> its JSON as the server lists it
	listedGen atomic.Uint64     // the front's gen when the last listing began

	mu   sync.Mutex
	gone map[string]bool // tools the backend marks gone: unlisted, their calls still answered
}

// The options of both handlers: JSON answers; the socket is behind the
// token, never reached by a browser.
func mcpOptions(stateless bool) *mcp.StreamableHTTPOptions {
	return &mcp.StreamableHTTPOptions{Stateless: stateless, JSONResponse: true, DisableLocalhostProtection: true, MaxRequestBodyBytes: MaxBodyBytes}
}

// mcpServerKey carries, in a request's context, the MCP server
// mcpEndpoint looked up for the request's attempt: the SDK's handlers ask
// for it (getServer) without looking it up again.
type mcpServerKey struct{}

// requestServer is the server mcpEndpoint put in r's context.
func requestServer(r *http.Request) *mcp.Server {
	srv, _ := r.Context().Value(mcpServerKey{}).(*mcp.Server)
	return srv
}

// front is the MCP endpoint of a backend that serves MCP (nil: none),
// made on first use.
func (s *Server) front() *mcpFront {
	b, ok := s.backend.(MCPBackend)
	if !ok {
		return nil
	}
	s.mcpOnce.Do(func() {
		f := &mcpFront{s: s, b: b, attempts: map[int]*mcpAttempt{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
		f.gen.Store(1)
		f.stateless = mcp.NewStreamableHTTPHandler(requestServer, mcpOptions(true))
		f.stateful = mcp.NewStreamableHTTPHandler(requestServer, mcpOptions(false))
		if w, ok := s.backend.(MCPWatcher); ok {
			f.stopWatch = w.WatchMCP(f)
		}
		go f.work()
		s.mcp = f
	})
	return s.mcp
}

// closeMCP closes every session of the MCP endpoint, if it was used.
func (s *Server) closeMCP() {
	s.mcpOnce.Do(func() {}) // none made from now on
	if s.mcp != nil {
		s.mcp.close()
	}
}

// mcpEndpoint serves MCPPathPrefix+"{token}": the token authenticates, the
// official SDK's streamable HTTP handlers speak MCP (see mcpFront).
func (s *Server) mcpEndpoint(w http.ResponseWriter, r *http.Request) {
	// A stream a client holds open for notifications is no request in
	// flight: the run's clock may jump while it is open.
	finished := func() {}
	if obs, ok := s.backend.(Observer); ok {
		obs.RequestStarted()
		var once sync.Once
		finished = func() { once.Do(obs.RequestFinished) }
		defer finished()
	}
	c, w, ok := s.pathCaller(w, r, writeError, "use $OVERNIGHT_MCP_URL as it is given")
	if !ok {
		return
	}
	f := s.front()
	if f == nil {
		writeError(w, Errorf(http.StatusNotImplemented, protocol.CodeNotImplemented, "this gateway fronts no MCP servers"))
		return
	}
	srv := f.server(r.Context(), c) // made, or listed again if the tools changed: this request sees them as they are now
	if srv == nil {
		writeError(w, Errorf(http.StatusInternalServerError, protocol.CodeInternal, "the MCP servers' tools could not be listed (the harness's log says why)"))
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), mcpServerKey{}, srv))
	h := f.stateless
	switch id := r.Header.Get(mcpSessionHeader); {
	case id != "":
		if !owns(srv, id) {
			http.Error(w, fmt.Sprintf("session not found: it is not one of attempt %d's open sessions (an attempt's sessions end with it); initialize again", c.Attempt), http.StatusNotFound)
			return
		}
		if r.Method == http.MethodGet {
			finished()
		}
		h = f.stateful
	case r.Method == http.MethodGet || r.Method == http.MethodDelete:
		h = f.stateful // which says that they need a session
	case r.Method == http.MethodPost:
		body, e := readBody(w, r, MaxBodyBytes, "")
		if e != nil {
			writeError(w, e)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		initialize, listen := rpcMethods(body)
		switch {
		case initialize && f.live(c):
			f.makeRoom(srv, c)
			h = f.stateful
		case listen:
			finished()
		}
	}
	h.ServeHTTP(w, r)
}

// rpcMethods says whether a JSON-RPC message (or batch) holds an
// initialize, or a subscriptions/listen.
func rpcMethods(body []byte) (initialize, listen bool) {
	if !bytes.Contains(body, []byte(`initialize"`)) && !bytes.Contains(body, []byte(`subscriptions/listen"`)) {
		return false, false
	}
	type message struct {
		Method string `json:"method"`
	}
	var msgs []message
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '[' {
		_ = json.Unmarshal(trimmed, &msgs)
	} else {
		var m message
		_ = json.Unmarshal(trimmed, &m)
		msgs = append(msgs, m)
	}
	for _, m := range msgs {
		initialize = initialize || m.Method == "initialize"
		listen = listen || m.Method == "subscriptions/listen"
	}
	return initialize, listen
}

// live says whether c's attempt is not over.
func (f *mcpFront) live(c Caller) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return c.Attempt > f.ended
}

// owns says whether session id is one of srv's open sessions. An
// attempt's server is its own (an attempt that is over gets a new one,
// with no sessions), so another attempt's session id is not found.
func owns(srv *mcp.Server, id string) bool {
	for ss := range srv.Sessions() {
		if ss.ID() == id {
			return true
		}
	}
	return false
}

// makeRoom closes the oldest sessions of srv, c's attempt's server, while
// it holds MaxMCPSessions: a new one is about to open.
func (f *mcpFront) makeRoom(srv *mcp.Server, c Caller) {
	var open []*mcp.ServerSession
	for ss := range srv.Sessions() { // oldest first
		if ss.ID() != "" {
			open = append(open, ss)
		}
	}
	for len(open) >= MaxMCPSessions {
		f.s.log.Debug("MCP: an attempt's oldest session closed to make room", "attempt", c.Attempt, "session", open[0].ID())
		_ = open[0].Close()
		open = open[1:]
	}
}

// server is c's attempt's MCP server, made with the backend's tools on
// first use, and listing them again if they changed since. An attempt
// that is over gets a server of its own per request, kept nowhere: its
// calls are fenced by the backend anyway.
func (f *mcpFront) server(ctx context.Context, c Caller) *mcp.Server {
	f.mu.Lock()
	a := f.attempts[c.Attempt]
	f.mu.Unlock()
	if a != nil {
		if a.stale(f) {
			if err := f.list(ctx, a); err != nil {
				f.s.log.Error("MCP: list the changed tools", "attempt", c.Attempt, "err", err)
			}
		}
		return a.srv
	}
	a = f.newAttempt(c)
	if err := f.list(ctx, a); err != nil {
		f.s.log.Error("MCP: list the tools", "attempt", c.Attempt, "err", err)
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.Attempt <= f.ended {
		return a.srv
	}
	if old := f.attempts[c.Attempt]; old != nil {
		return old.srv // made meanwhile by another request
	}
	f.attempts[c.Attempt] = a
	if a.stale(f) {
		f.poke() // the tools changed while they were listed
	}
	return a.srv
}

// stale says whether the tools changed since a's last listing began.
func (a *mcpAttempt) stale(f *mcpFront) bool { return a.listedGen.Load() < f.gen.Load() }

func (f *mcpFront) newAttempt(c Caller) *mcpAttempt {
	a := &mcpAttempt{c: c, listed: map[string][]byte{}, gone: map[string]bool{}}
	a.srv = mcp.NewServer(&mcp.Implementation{Name: "overnight", Version: "v1"}, &mcp.ServerOptions{Logger: f.s.log,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}})
	a.srv.AddReceivingMiddleware(f.callGone(a))
	if w, ok := f.s.backend.(MCPWatcher); ok {
		a.srv.AddSendingMiddleware(noticeSent(w, c))
	}
	return a
}

// list makes a's server list the backend's tools as they are now: a tool
// that changed is added again, one that went is removed — each of which
// notifies the server's sessions (after a short delay, once for changes
// close together).
func (f *mcpFront) list(ctx context.Context, a *mcpAttempt) error {
	a.listMu.Lock()
	defer a.listMu.Unlock()
	gen := f.gen.Load()
	if a.listedGen.Load() >= gen {
		return nil // listed meanwhile
	}
	tools, err := f.b.MCPTools(ctx, a.c)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := map[string]bool{}
	for _, t := range tools {
		seen[t.Name] = true
		if t.Meta[MCPMetaGone] == true {
			a.gone[t.Name] = true
			if _, ok := a.listed[t.Name]; ok {
				delete(a.listed, t.Name)
				a.srv.RemoveTools(t.Name)
			}
			continue
		}
		delete(a.gone, t.Name)
		raw, _ := json.Marshal(t)
		if old, ok := a.listed[t.Name]; ok && bytes.Equal(old, raw) {
			continue
		}
		a.listed[t.Name] = raw
		a.srv.AddTool(t, f.s.toolHandler(f.b, a.c, t.Name))
	}
	for name := range a.listed {
		if !seen[name] {
			delete(a.listed, name)
			a.srv.RemoveTools(name)
		}
	}
	for name := range a.gone {
		if !seen[name] {
			delete(a.gone, name)
		}
	}
	a.listedGen.Store(gen)
	return nil
}

// callGone is middleware that sends a tools/call of a tool the backend
// marks gone — unknown to the server, which stopped listing it — to the
// backend all the same, which answers what became of it.
func (f *mcpFront) callGone(a *mcpAttempt) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			call, ok := req.(*mcp.CallToolRequest)
			if !ok || call.Params == nil {
				return next(ctx, method, req)
			}
			a.mu.Lock()
			gone := a.gone[call.Params.Name]
			a.mu.Unlock()
			if !gone {
				return next(ctx, method, req)
			}
			return f.s.toolHandler(f.b, a.c, call.Params.Name)(ctx, call)
		}
	}
}

// noticeSent is middleware that tells w of each list_changed notification
// delivered to a client of c: the SDK's write fails for a session with no
// stream open, so a notice is a notification a client could read.
func noticeSent(w MCPWatcher, c Caller) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if err != nil || method != "notifications/tools/list_changed" {
				return res, err
			}
			n := MCPNotice{Method: method, Stream: "subscriptions/listen"}
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss.ID() != "" {
				n.Session, n.Stream = ss.ID(), "GET"
			}
			w.MCPNotified(context.WithoutCancel(ctx), c, n)
			return res, err
		}
	}
}

// MCPToolsChanged implements MCPListener.
func (f *mcpFront) MCPToolsChanged() {
	f.gen.Add(1)
	f.poke()
}

// MCPAttemptEnded implements MCPListener.
func (f *mcpFront) MCPAttemptEnded(n int) {
	f.mu.Lock()
	f.ended = max(f.ended, n)
	f.mu.Unlock()
	f.poke()
}

func (f *mcpFront) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// work does, outside the backend's locks, what MCPToolsChanged and
// MCPAttemptEnded ask: it lists the tools again, and closes the sessions
// of the attempts that are over.
func (f *mcpFront) work() {
	for {
		select {
		case <-f.done:
			return
		case <-f.wake:
		}
		f.mu.Lock()
		var over, live []*mcpAttempt
		for n, a := range f.attempts {
			if n <= f.ended {
				over = append(over, a)
				delete(f.attempts, n)
			} else {
				live = append(live, a)
			}
		}
		f.mu.Unlock()
		for _, a := range over {
			closeSessions(a.srv)
		}
		for _, a := range live {
			if !a.stale(f) {
				continue
			}
			if err := f.list(context.Background(), a); err != nil {
				f.s.log.Error("MCP: list the changed tools", "attempt", a.c.Attempt, "err", err)
			}
		}
	}
}

// close stops the endpoint and closes every session.
func (f *mcpFront) close() {
	f.closed.Do(func() {
		close(f.done)
		if f.stopWatch != nil {
			f.stopWatch()
		}
		f.mu.Lock()
		all := f.attempts
		f.attempts = map[int]*mcpAttempt{}
		f.mu.Unlock()
		for _, a := range all {
			closeSessions(a.srv)
		}
	})
}

// closeSessions closes every session of srv: their streams end, and
// their ids are unknown from now on.
func closeSessions(srv *mcp.Server) {
	for ss := range srv.Sessions() {
		_ = ss.Close()
	}
}
