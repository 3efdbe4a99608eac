package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// ErrWorldUnreachable is wrapped when a run's world, served over the world
// protocol, does not answer (or does not speak the protocol) where the
// scenario says it is: nothing is run.
var ErrWorldUnreachable = errors.New("the world does not answer")

// ErrWorldMismatch is wrapped when a world over the protocol answers but
// is not the world the scenario asks for: another name, no goal the task
// needs, or no API version a fault moves it to.
var ErrWorldMismatch = errors.New("the world is not the one the scenario asks for")

// worldDialTimeout bounds each call to a world over the protocol when the
// harness first reaches it.
const worldDialTimeout = 30 * time.Second

// openRunWorld opens the world run rec drives, writing through store under
// prefix: a built-in world from the registry (its state in the journal),
// or a world over the protocol with the journal of its answers there — and,
// when the scenario declares HTTP APIs, those beside it behind a router
// (openHTTPWorlds).
func (h *Harness) openRunWorld(ctx context.Context, rec history.RunRecord, scen *scenarios.Scenario, store world.Store, prefix []byte) (world.World, error) {
	if scen.HasAPIs() {
		// Several worlds behind one router: the scenario's world: (if any),
		// each HTTP API and each MCP server.
		return h.openHTTPWorlds(ctx, rec, scen, store, prefix, func(store world.Store, prefix []byte) (world.World, error) {
			return h.openBaseWorld(ctx, rec, scen, store, prefix)
		})
	}
	return h.openBaseWorld(ctx, rec, scen, store, prefix)
}

// openBaseWorld opens the scenario's world: of run rec in store under
// prefix.
func (h *Harness) openBaseWorld(ctx context.Context, rec history.RunRecord, scen *scenarios.Scenario, store world.Store, prefix []byte) (world.World, error) {
	if !scen.World.Remote() {
		return h.opts.Worlds.Open(ctx, scen.World.Name, store, prefix, scen.World.Options)
	}
	l, err := h.linkWorld(ctx, rec, scen.World)
	if err != nil {
		return nil, err
	}
	return openMirrored(l, store, prefix)
}

// linkWorld reaches run rec's world over the protocol: the world itself,
// as the run's own view of it (keys scoped by the run id), or — for an
// isolated run — the instance its shadow lives in, on its parent's world.
// A command or image world the harness starts is reached again wherever
// it answers next (see worldLink).
func (h *Harness) linkWorld(ctx context.Context, rec history.RunRecord, w scenarios.World) (*worldLink, error) {
	owner := rec.ID
	view := func(c *remote.Client) *remote.Client { return c.WithScope(owner) }
	if rec.Isolated != nil {
		owner = rec.Isolated.Parent
		view = func(c *remote.Client) *remote.Client { return c.Instance(shadowInstance(rec.ID)) }
	}
	base, err := h.worldBase(ctx, owner, w)
	if err != nil {
		return nil, err
	}
	c, err := remote.Dial(ctx, base, remote.Config{Timeout: worldDialTimeout})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrWorldUnreachable, w.Label(), err)
	}
	l := &worldLink{view: view, base: base, c: view(c)}
	if w.URL == "" {
		l.reach = func(ctx context.Context) (string, error) { return h.worldBase(ctx, owner, w) }
	}
	return l, nil
}

// worldLink is a run's client of its world over the protocol, dialled
// again where the world answers now: a command or image world the harness
// starts again on its data (found dead, or killed by a world-crash fault)
// listens at a new address, and the next call finds it there.
type worldLink struct {
	// reach says where the world answers now, starting it again if it
	// died; nil: it stays where it was dialled (a URL).
	reach func(ctx context.Context) (string, error)
	view  func(*remote.Client) *remote.Client // the run's view of a dialled world

	mu   sync.Mutex
	base string
	c    *remote.Client
}

// client is the run's client of the world where it answers now. An error
// is the world's (remote.ErrWorld): it cannot be started or dialled.
func (l *worldLink) client(ctx context.Context) (*remote.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reach == nil {
		return l.c, nil
	}
	base, err := l.reach(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", remote.ErrWorld, err)
	}
	if base == l.base {
		return l.c, nil
	}
	c, err := remote.Dial(ctx, base, remote.Config{Timeout: worldDialTimeout})
	if err != nil {
		return nil, fmt.Errorf("%w: dial the world started again at %s: %w", remote.ErrWorld, base, err)
	}
	l.base, l.c = base, l.view(c)
	return l.c, nil
}

// current is the client last dialled, for what needs no call (the
// world's name, kinds, description and API version as last seen).
func (l *worldLink) current() *remote.Client {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c
}

// shadowInstance names the instance an isolated run's shadow lives in.
func shadowInstance(runID string) string { return "shadow-" + runID }

// worldBase is where run runID's world answers: the scenario's URL, or
// the process or container the harness starts for the run.
func (h *Harness) worldBase(ctx context.Context, runID string, w scenarios.World) (string, error) {
	switch {
	case w.URL != "":
		return w.URL, nil
	case len(w.Command) > 0:
		return h.worldProcs().ensure(ctx, runID, w)
	case w.Image != "":
		return h.imageWorlds().ensure(ctx, runID, w)
	}
	return "", fmt.Errorf("world %s is built in, not served over the protocol", w.Name)
}

// reachWorld checks, before anything runs, that a world over the protocol
// answers and is the one the scenario asks for: its name (when the
// scenario names one), a goal when the scenario checks goal-reached, and
// every API version an api-version fault moves it to, and every world
// event a fault fires (a dep-update's).
func (h *Harness) reachWorld(ctx context.Context, runID string, scen *scenarios.Scenario, specs []chaos.Spec) error {
	w := scen.World
	base, err := h.worldBase(ctx, runID, w)
	if err != nil {
		return err
	}
	c, err := remote.Dial(ctx, base, remote.Config{Timeout: worldDialTimeout})
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrWorldUnreachable, w.Label(), err)
	}
	d := c.Description()
	if w.Name != "" && d.Name != w.Name {
		return fmt.Errorf("%w: the scenario asks for world %q, and %s is world %q", ErrWorldMismatch, w.Name, w.Label(), d.Name)
	}
	for _, k := range slices.Sorted(maps.Keys(w.Options)) {
		// The scenario's options for a built-in world it was pointed away
		// from (--world): the world must have been started with the same.
		want, got := fmt.Sprint(w.Options[k]), fmt.Sprint(d.Options[k])
		if _, ok := d.Options[k]; !ok || want != got {
			return fmt.Errorf("%w: the scenario runs world %q with option %s=%s, and %s was started with %s (start it with that option, e.g. overnight world serve %s --option %s=%s)",
				ErrWorldMismatch, d.Name, k, want, w.Label(), optionText(d.Options, k), d.Name, k, want)
		}
	}
	if slices.Contains(scen.Invariants, "goal-reached") && !d.Capabilities.Goal {
		return fmt.Errorf("%w: the scenario checks goal-reached, and world %q at %s judges no goal (its describe declares no goal capability)", ErrWorldMismatch, d.Name, w.Label())
	}
	var versions []string
	for _, v := range d.Versions {
		versions = append(versions, v.Name)
	}
	for _, s := range specs {
		if k, ok := h.opts.Faults.Lookup(s.Kind); ok && k.WorldEvent != "" && !world.HasEvent(c.Events(), k.WorldEvent) {
			return fmt.Errorf("%w: fault %s fires the world event %s, and world %q at %s does not undergo it (its describe declares %s)",
				chaos.ErrUnsupported, s, k.WorldEvent, d.Name, w.Label(), describedEvents(c.Events()))
		}
		if s.Kind != "api-version" {
			continue
		}
		if !d.Capabilities.Versions {
			return fmt.Errorf("%w: fault %s: world %q at %s cannot change API version (its describe declares no versions capability)", chaos.ErrUnsupported, s, d.Name, w.Label())
		}
		if !slices.Contains(versions, s.Arg) {
			return fmt.Errorf("%w: fault %s: world %q at %s has no API version %q (it declares %s)", chaos.ErrUnsupported, s, d.Name, w.Label(), s.Arg, strings.Join(versions, ", "))
		}
	}
	return nil
}

// describedEvents is the world events a world over the protocol
// describes, for an error.
func describedEvents(events []world.EventInfo) string {
	if len(events) == 0 {
		return "no events capability"
	}
	names := make([]string, len(events))
	for i, e := range events {
		names[i] = e.Name
	}
	return "the events " + strings.Join(names, ", ")
}

// optionText is how a world's option k reads in an error.
func optionText(opts map[string]any, k string) string {
	if v, ok := opts[k]; ok {
		return fmt.Sprintf("%s=%v", k, v)
	}
	return "no " + k + " option"
}

// checkWorldURL checks a --world base URL.
func checkWorldURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("world URL %q: want the http(s) base URL of a world served over the world protocol, e.g. http://127.0.0.1:8080", s)
	}
	return nil
}

// releaseWorld lets go of what run runID's world holds once its drive
// ends: an isolated run's shadow instance is dropped; a command or image
// world the harness started for the run is stopped (its data stays, for a
// resume).
func (h *Harness) releaseWorld(runID string, w scenarios.World, isolated bool) {
	h.mu.Lock()
	mcp := h.mcp
	h.mu.Unlock()
	if mcp != nil {
		mcp.stop(runID)
	}
	if !w.Remote() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if isolated {
		rec, err := h.runRecord(runID)
		if err != nil || rec.Isolated == nil {
			return
		}
		base, err := h.worldBase(ctx, rec.Isolated.Parent, w)
		if err != nil {
			h.log.Warn("drop the shadow instance: the world does not answer", "run", runID, "err", err)
			return
		}
		c, err := remote.Dial(ctx, base, remote.Config{Timeout: worldDialTimeout})
		if err == nil {
			err = c.DropInstance(ctx, shadowInstance(runID))
		}
		var refused *remote.RefusedError
		if err != nil && !(errors.As(err, &refused) && refused.Code == remote.CodeUnknownInstance) {
			h.log.Warn("drop the shadow instance", "run", runID, "err", err)
		}
		return
	}
	switch {
	case len(w.Command) > 0:
		h.worldProcs().stop(runID)
	case w.Image != "":
		h.imageWorlds().stop(ctx, runID)
	}
}

// holdsWorld reports whether this harness runs an image world or an
// image MCP server of run runID now (or is starting one): the janitor
// reaps nothing of such a run.
func (h *Harness) holdsWorld(runID string) bool {
	h.mu.Lock()
	images, mcp := h.images, h.mcp
	h.mu.Unlock()
	return (images != nil && images.holds(runID)) || (mcp != nil && mcp.holdsImage(runID))
}

// killWorld kills run runID's command or image world at once (the
// world-crash fault); it is started again on its data when next reached.
func (h *Harness) killWorld(ctx context.Context, runID string, w scenarios.World) error {
	switch {
	case len(w.Command) > 0:
		return h.worldProcs().killWorld(runID)
	case w.Image != "":
		return h.imageWorlds().killWorld(ctx, runID)
	}
	return fmt.Errorf("world %s is not one the harness starts", w.Label())
}

// stopWorlds stops every world the harness started (at Close), shadow
// upstreams included.
func (h *Harness) stopWorlds() {
	h.stopAllShadows()
	h.mu.Lock()
	procs, images, mcp := h.procs, h.images, h.mcp
	h.mu.Unlock()
	if mcp != nil {
		mcp.stopAll()
	}
	if procs != nil {
		procs.stopAll()
	}
	if images != nil {
		images.stopAll()
	}
}

// ErrNoShadow is wrapped when a shadow of a run's world cannot be built:
// the world out of process offers no instances. Reflection then cannot
// verify anything, and a gate that waits for a verified lesson stays shut.
var ErrNoShadow = errors.New("no shadow of the world can be built")

// forkRemote makes isolated run id's shadow of parent's world out of
// process: an instance of that world, restored from the parent's ledger —
// the answers the parent journaled — up to worldSeq. The real world is only
// read.
func (h *Harness) forkRemote(ctx context.Context, parent history.RunRecord, id string, scen *scenarios.Scenario, real world.World, worldSeq int64) (world.State, error) {
	m, ok := real.(*mirrored)
	if !ok {
		return world.State{}, fmt.Errorf("run %s's world %s is not reachable to fork a shadow from", parent.ID, scen.World.Label())
	}
	c, err := m.link.client(ctx)
	if err != nil {
		return world.State{}, fmt.Errorf("run %s's world %s: %w", parent.ID, scen.World.Label(), err)
	}
	if !c.Description().Capabilities.Instances {
		return world.State{}, fmt.Errorf("%w: world %q (%s) offers no instances (its describe declares no instances capability), and nothing ever resets the real one",
			ErrNoShadow, m.Name(), scen.World.Label())
	}
	// Cut where the checkpoint's seq counts: the run's journal of the
	// world's answers (mirrored.LedgerSeq).
	ledger, err := m.journal.Ledger(ctx)
	if err != nil {
		return world.State{}, fmt.Errorf("the ledger of run %s's world: %w", parent.ID, err)
	}
	st := world.State{World: m.Name()}
	for _, e := range ledger {
		if e.Seq <= worldSeq {
			st.Ledger = append(st.Ledger, e)
			st.Seq = e.Seq
		}
	}
	if err := c.CreateInstance(ctx, shadowInstance(id), st.Ledger); err != nil {
		return world.State{}, fmt.Errorf("restore the shadow of run %s's world for run %s: %w", parent.ID, id, err)
	}
	return st, nil
}
