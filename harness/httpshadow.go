package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/httpworld"
	"github.com/overnight-dev/overnight/scenarios/world/mcpworld"
)

// shadowReadyTimeout bounds the wait for a shadow upstream to accept
// connections.
const shadowReadyTimeout = 30 * time.Second

// shadowUpstreams are the scratch upstreams the harness started for
// isolated runs (an HTTP API's shadow: {command}), by run.
type shadowUpstreams struct {
	mu    sync.Mutex
	byRun map[string][]*shadowUpstream
}

// shadowUpstream is one scratch upstream, running.
type shadowUpstream struct {
	api    string
	url    string
	cmd    *exec.Cmd
	exited chan struct{}
	out    *lockedOutput
}

// lockedOutput is what a shadow upstream printed, for an error.
type lockedOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *lockedOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.buf.Len() < 64<<10 {
		o.buf.Write(p)
	}
	return len(p), nil
}

func (o *lockedOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.TrimSpace(o.buf.String())
}

func (h *Harness) shadowUpstreams() *shadowUpstreams {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.shadows == nil {
		h.shadows = &shadowUpstreams{byRun: map[string][]*shadowUpstream{}}
	}
	return h.shadows
}

// shadowURL is where isolated run runID's shadow of API api answers.
func (h *Harness) shadowURL(runID, api string) (string, bool) {
	s := h.shadowUpstreams()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.byRun[runID] {
		if u.api == api {
			return u.url, true
		}
	}
	return "", false
}

// startShadow starts API a's shadow command for isolated run runID — in
// the scenario file's directory, {{data_dir}} (under the state dir),
// {{host}}, {{port}}, {{url}} and {{spare_port}} filled in — and waits for
// it to accept connections.
func (h *Harness) startShadow(ctx context.Context, runID string, a scenarios.HTTPAPI) (string, error) {
	ports, err := freePorts(2)
	if err != nil {
		return "", err
	}
	data := filepath.Join(h.state, "shadows", runID, a.Name)
	if err := os.MkdirAll(data, 0o700); err != nil {
		return "", fmt.Errorf("shadow of HTTP API %s: %w", a.Name, err)
	}
	host, port := "127.0.0.1", strconv.Itoa(ports[0])
	url := "http://" + host + ":" + port
	fill := strings.NewReplacer("{{data_dir}}", data, "{{host}}", host, "{{port}}", port, "{{url}}", url, "{{spare_port}}", strconv.Itoa(ports[1]))
	args := make([]string, len(a.Shadow.Command))
	for i, arg := range a.Shadow.Command {
		args[i] = fill.Replace(arg)
	}
	u := &shadowUpstream{api: a.Name, url: url, exited: make(chan struct{}), out: &lockedOutput{}}
	u.cmd = exec.Command(args[0], args[1:]...)
	u.cmd.Dir = a.Shadow.Dir
	u.cmd.Stdout, u.cmd.Stderr = u.out, u.out
	u.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := u.cmd.Start(); err != nil {
		return "", fmt.Errorf("start the shadow of HTTP API %s (%s): %w", a.Name, strings.Join(args, " "), err)
	}
	go func() {
		_ = u.cmd.Wait()
		close(u.exited)
	}()
	s := h.shadowUpstreams()
	s.mu.Lock()
	s.byRun[runID] = append(s.byRun[runID], u)
	s.mu.Unlock()
	deadline := time.Now().Add(shadowReadyTimeout)
	for {
		c, err := net.DialTimeout("tcp", host+":"+port, time.Second)
		if err == nil {
			_ = c.Close()
			h.log.Debug("shadow upstream started", "run", runID, "api", a.Name, "url", url)
			return url, nil
		}
		select {
		case <-u.exited:
			return "", fmt.Errorf("the shadow of HTTP API %s (%s) exited before it answered: %s", a.Name, strings.Join(args, " "), u.out)
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the shadow of HTTP API %s (%s) did not answer at %s within %s: %s", a.Name, strings.Join(args, " "), url, shadowReadyTimeout, u.out)
		}
	}
}

// stopShadows kills isolated run runID's shadow upstreams and removes
// their data.
func (h *Harness) stopShadows(runID string) {
	h.stopMCPShadows(runID)
	s := h.shadowUpstreams()
	s.mu.Lock()
	ups := s.byRun[runID]
	delete(s.byRun, runID)
	s.mu.Unlock()
	for _, u := range ups {
		u.stop()
	}
	if len(ups) > 0 {
		_ = os.RemoveAll(filepath.Join(h.state, "shadows", runID))
	}
}

// stopAllShadows stops every shadow upstream (at Close).
func (h *Harness) stopAllShadows() {
	h.mu.Lock()
	s := h.shadows
	h.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	var runs []string
	for id := range s.byRun {
		runs = append(runs, id)
	}
	s.mu.Unlock()
	for _, id := range runs {
		h.stopShadows(id)
	}
}

func (u *shadowUpstream) stop() {
	if u.cmd.Process != nil {
		_ = syscall.Kill(-u.cmd.Process.Pid, syscall.SIGKILL)
	}
	select {
	case <-u.exited:
	case <-time.After(10 * time.Second):
	}
}

// freePorts returns n loopback ports free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// forkHTTP makes isolated run id's shadow of parent's worlds when its
// scenario declares HTTP APIs or MCP servers: for each API, its declared
// scratch upstream, started; for each MCP server, a fresh instance (its
// command started anew on a data dir of its own, by the isolated run's
// connection); for the scenario's world: (if any), a shadow as for a run
// of it alone — a built-in world rebuilt in the isolated run's own key
// space, a remote world's instance created from its ledger (which needs
// the instances capability) —; then every mutating request of the
// parent's ledger done up to worldSeq replayed into them in arrival order
// (an MCP call answered otherwise than recorded stops it: mcpworld.Redo).
// The real upstreams, servers and world are only read through the
// journal. An API without shadow:, or an MCP server that is not a
// replayable stdio server, makes no shadow at all: reflection says so, and
// the gate stays shut for guarded kinds.
func (h *Harness) forkHTTP(ctx context.Context, parent history.RunRecord, id string, scen *scenarios.Scenario, real world.World, worldSeq int64) (st world.State, err error) {
	if err := mcpShadowable(scen); err != nil {
		return world.State{}, err
	}
	var missing []string
	for _, a := range scen.HTTP {
		if a.Shadow == nil {
			missing = append(missing, a.Name)
		}
	}
	if len(missing) > 0 {
		also := ""
		if scen.HasWorld() {
			also = fmt.Sprintf(" (world %s could be shadowed, but a verification would act on every world the run does)", scen.World.Label())
		}
		return world.State{}, fmt.Errorf("%w: HTTP API %s declares no shadow: {command: [...]} (a scratch upstream to verify on), and the real one is never touched%s", ErrNoShadow, strings.Join(missing, ", "), also)
	}
	ledger, err := real.Ledger(ctx)
	if err != nil {
		return world.State{}, fmt.Errorf("the ledger of run %s's worlds: %w", parent.ID, err)
	}
	st = world.State{World: real.Name()}
	var baseEntries []world.LedgerEntry // the world:'s entries by the fork, in its own numbering
	var base world.World
	if scen.HasWorld() {
		rt := world.RouterOf(real)
		if rt == nil {
			return world.State{}, fmt.Errorf("run %s's worlds are not behind a router", parent.ID)
		}
		for _, r := range rt.Routes() {
			if r.Prefix == "" {
				base = r.World
			}
		}
		if base == nil {
			return world.State{}, fmt.Errorf("run %s's router has no route for its world %s", parent.ID, scen.World.Label())
		}
		// Numbered as the router's arrival order counts them: a world
		// out of process by the journal of its answers.
		if j, ok := base.(world.Journaling); ok {
			baseEntries, err = j.Journal().Ledger(ctx)
		} else {
			baseEntries, err = base.Ledger(ctx)
		}
		if err != nil {
			return world.State{}, fmt.Errorf("the ledger of run %s's world %s: %w", parent.ID, scen.World.Label(), err)
		}
	}
	nBase := 0
	for _, e := range ledger {
		if e.Seq > worldSeq {
			continue
		}
		st.Ledger = append(st.Ledger, e)
		st.Seq = e.Seq
		if !strings.HasPrefix(e.Kind, scenarios.HTTPKindPrefix) && !strings.HasPrefix(e.Kind, scenarios.MCPKindPrefix) && (base != nil && !isAPIEvent(e, scen)) {
			nBase++
		}
	}
	if nBase > len(baseEntries) {
		return world.State{}, fmt.Errorf("run %s: its arrival order has %d entries of world %s by the fork, and its ledger %d", parent.ID, nBase, scen.World.Label(), len(baseEntries))
	}
	baseEntries = baseEntries[:nBase]
	defer func() {
		if err != nil {
			h.stopShadows(id) // a fresh MCP instance too
		}
	}()
	rec := history.RunRecord{ID: id, Isolated: &history.Isolation{Parent: parent.ID}}
	if scen.HasWorld() && scen.World.Remote() {
		// The instance holds the world's state by the fork before the
		// isolated run's link reaches it.
		var baseSeq int64
		if nBase > 0 {
			baseSeq = baseEntries[nBase-1].Seq
		}
		if _, err := h.forkRemote(ctx, parent, id, scen, base, baseSeq); err != nil {
			return world.State{}, err
		}
	}
	for _, a := range scen.HTTP {
		if _, err := h.startShadow(ctx, id, a); err != nil {
			return world.State{}, err
		}
	}
	store, prefix := h.w.Scratch().WorldStore(id)
	shadow, err := h.openHTTPWorlds(ctx, rec, scen, store, prefix, func(store world.Store, prefix []byte) (world.World, error) {
		return h.openBaseWorld(ctx, rec, scen, store, prefix)
	})
	if err != nil {
		return world.State{}, err
	}
	apis := map[string]*httpworld.World{}
	servers := map[string]*mcpworld.World{}
	var shadowBase world.World
	for _, rt := range world.RouterOf(shadow).Routes() {
		if w, ok := rt.World.(*httpworld.World); ok {
			apis[w.Name()] = w
		} else if w, ok := rt.World.(*mcpworld.World); ok {
			servers[w.Name()] = w
		} else if rt.Prefix == "" {
			shadowBase = rt.World
		}
	}
	for _, e := range st.Ledger {
		if strings.HasPrefix(e.Kind, scenarios.MCPKindPrefix) {
			name, _, _ := strings.Cut(strings.TrimPrefix(e.Kind, scenarios.MCPKindPrefix), ".")
			w, ok := servers[name]
			if !ok {
				return world.State{}, fmt.Errorf("restore the shadow of run %s: ledger entry %d is of kind %s, of no declared MCP server", parent.ID, e.Seq, e.Kind)
			}
			if err := w.Redo(ctx, e); err != nil {
				return world.State{}, fmt.Errorf("restore the shadow of run %s: %w", parent.ID, err)
			}
			continue
		}
		if !strings.HasPrefix(e.Kind, scenarios.HTTPKindPrefix) {
			if isAPIEvent(e, scen) {
				continue // a goal's probe (httpworld.EventProbe): nothing the agent did
			}
			if scen.World.Remote() {
				continue // the instance was created with it
			}
			if err := world.Restore(ctx, shadowBase, world.State{World: scen.World.Name, Ledger: []world.LedgerEntry{e}}); err != nil {
				return world.State{}, fmt.Errorf("restore the shadow of run %s's world %s: %w", parent.ID, scen.World.Label(), err)
			}
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(e.Kind, scenarios.HTTPKindPrefix), ".")
		w, ok := apis[name]
		if !ok {
			return world.State{}, fmt.Errorf("restore the shadow of run %s: ledger entry %d is of kind %s, of no declared HTTP API", parent.ID, e.Seq, e.Kind)
		}
		route, _ := w.API().Route(e.Kind)
		if route.ReadOnly || e.Outcome.Status != protocol.StatusDone {
			// Nothing to redo upstream: the answer is journaled as it was.
			if err := w.Journal().Record(ctx, e); err != nil {
				return world.State{}, err
			}
			continue
		}
		out, err := w.Execute(ctx, world.Request{Key: e.Key, Kind: e.Kind, Args: e.Args, Now: e.At})
		if err != nil {
			return world.State{}, fmt.Errorf("restore the shadow of HTTP API %s: ledger entry %d (%s): %w", w.Name(), e.Seq, e.Kind, err)
		}
		if out.Status != protocol.StatusDone {
			msg := ""
			if out.Error != nil {
				msg = out.Error.Message
			}
			return world.State{}, fmt.Errorf("%w: the shadow of HTTP API %s answered ledger entry %d (%s %s) %s: %s", world.ErrNotReplayable, w.Name(), e.Seq, e.Kind, e.Args, out.Status, msg)
		}
	}
	return st, nil
}

// isAPIEvent reports whether ledger entry e, of a run of scen, is an event
// an HTTP API's journal holds (a goal's probe) rather than the world:'s.
func isAPIEvent(e world.LedgerEntry, scen *scenarios.Scenario) bool {
	return e.IsEvent() && e.Kind == httpworld.EventProbe && len(scen.HTTP) > 0
}

// errNoShadowURL is wrapped when an isolated run's world is opened and its
// shadow upstream is not running (an isolated run is never resumed).
var errNoShadowURL = errors.New("the shadow upstream of an isolated run is not running")
