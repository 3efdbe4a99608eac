package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/scenarios"
)

// ErrFaultSources is returned for a RunRequest that gives its schedule in
// more than one way: Faults, RandomFaults and ReplayFaults each give the
// whole schedule, replacing the scenario's.
var ErrFaultSources = errors.New("fault sources do not combine")

// seedOf is the run's seed: the request's, else the scenario's, else 1.
func seedOf(scen *scenarios.Scenario, seed *int64) int64 {
	switch {
	case seed != nil:
		return *seed
	case scen.Seed != nil:
		return *scen.Seed
	}
	return 1
}

func newRunID(now time.Time) (string, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b), nil
}

// checkSources enforces that the request gives its schedule one way at most.
func (req RunRequest) checkSources() error {
	var given []string
	if req.Faults != nil {
		given = append(given, "Faults (--fault)")
	}
	if req.RandomFaults > 0 {
		given = append(given, "RandomFaults (--chaos random)")
	}
	if req.ReplayFaults != "" {
		given = append(given, "ReplayFaults (--replay-faults)")
	}
	if len(given) > 1 {
		return fmt.Errorf("%w: %v each give the whole schedule; use one", ErrFaultSources, given)
	}
	if len(req.RandomKinds) > 0 && req.RandomFaults == 0 {
		return fmt.Errorf("%w: RandomKinds (--chaos-kinds) limits what RandomFaults (--chaos random) draws; it needs RandomFaults", ErrFaultSources)
	}
	return nil
}

// CheckRandom checks that --chaos random can draw a schedule for a run of
// scen: the scenario has a reach: block, and every kind the draw would
// take — kinds (--chaos-kinds) when given, else the scenario's
// reach.kinds — is one random draws at a trigger that reach allows. Run
// checks this itself; a suite calls it for each scenario before any run.
func (h *Harness) CheckRandom(scen *scenarios.Scenario, kinds []string) error {
	_, err := h.randomReach(scen, kinds)
	return err
}

// randomReach is what --chaos random draws from for a run of scen: the
// scenario's reach, its kinds replaced by kinds (--chaos-kinds) when
// given. Every kind is checked: one the draw cannot make is an error
// saying why, at the place of reach.kinds in the file when it comes from
// there.
func (h *Harness) randomReach(scen *scenarios.Scenario, kinds []string) (chaos.Reach, error) {
	if scen.Reach == nil {
		return chaos.Reach{}, fmt.Errorf("--chaos random needs to know what a run of scenario %s can reach: add a reach: block (steps, effects, llm_calls, virtual) to it", scen.Name)
	}
	reach := *scen.Reach
	reach.MCP = len(scen.MCPServers()) > 0
	if len(kinds) == 0 {
		for i, name := range reach.Kinds {
			if err := h.opts.Faults.CheckDrawable(name, reach); err != nil {
				return chaos.Reach{}, scen.ErrorAt(fmt.Sprintf("/reach/kinds/%d", i), "reach.kinds[%d]: %v", i, err)
			}
		}
		return reach, nil
	}
	reach.Kinds = kinds
	for _, name := range kinds {
		if err := h.opts.Faults.CheckDrawable(name, reach); err != nil {
			return chaos.Reach{}, fmt.Errorf("--chaos-kinds, scenario %s: %w", scen.Name, err)
		}
	}
	return reach, nil
}

// schedule returns the run's fault schedule: the specs as written (for the
// run record) and their concrete instances (for the fault log). --fault,
// --chaos random and --replay-faults each replace the scenario's faults and
// draws. Every instance is checked against the catalog, and against what
// the scenario's sandbox offers.
func (h *Harness) schedule(req RunRequest, seed int64) ([]string, []chaos.Instance, error) {
	if err := req.checkSources(); err != nil {
		return nil, nil, err
	}
	scen := req.Scenario
	streams := chaos.NewStreams(seed)
	var specs []chaos.Spec
	switch {
	case req.ReplayFaults != "":
		orig, err := h.runRecord(req.ReplayFaults)
		if err != nil {
			return nil, nil, err
		}
		if orig.Scenario != scen.Name {
			return nil, nil, fmt.Errorf("--replay-faults %s: that run is of scenario %s, not %s; its fault log is made for it", req.ReplayFaults, orig.Scenario, scen.Name)
		}
		recs, err := h.history.Faults(req.ReplayFaults)
		if err != nil {
			return nil, nil, err
		}
		var instances []chaos.Instance
		written := []string{}
		for _, fr := range recs {
			s, err := chaos.ParseSpec(fr.Spec)
			if err != nil {
				return nil, nil, fmt.Errorf("fault log of run %s: %w", req.ReplayFaults, err)
			}
			instances = append(instances, chaos.Instance{Spec: s, From: fr.From})
			written = append(written, s.String())
		}
		return written, instances, h.check(scen, instances)
	case req.RandomFaults > 0:
		reach, err := h.randomReach(scen, req.RandomKinds)
		if err != nil {
			return nil, nil, err
		}
		drawn, err := chaos.RandomSchedule(streams.For("random-chaos"), h.opts.Faults, reach, req.RandomFaults)
		if err != nil {
			return nil, nil, err
		}
		specs = drawn
	case req.Faults != nil:
		specs = req.Faults
	default:
		specs = append(specs, scen.Faults...)
		for i, d := range scen.Draws {
			drawn, err := d.Specs(streams.For(fmt.Sprintf("draw-%d", i)), h.opts.Faults)
			if err != nil {
				return nil, nil, fmt.Errorf("scenario %s: draws[%d]: %w", scen.Name, i, err)
			}
			specs = append(specs, drawn...)
		}
	}
	for _, s := range specs {
		if _, err := h.opts.Faults.Build(s); err != nil {
			return nil, nil, err
		}
	}
	instances, err := chaos.Expand(specs, scen.Limits.Horizon, streams.For("schedule"))
	if err != nil {
		return nil, nil, err
	}
	written := []string{}
	for _, s := range specs {
		written = append(written, s.String())
	}
	return written, instances, h.check(scen, instances)
}

// check builds every instance and checks it against what the scenario
// offers the fault to act on.
func (h *Harness) check(scen *scenarios.Scenario, instances []chaos.Instance) error {
	for _, in := range instances {
		if _, err := h.opts.Faults.Build(in.Spec); err != nil {
			return err
		}
		k, _ := h.opts.Faults.Lookup(in.Spec.Kind)
		if why := lacking(scen, k, h.opts.Sandbox, h.opts.Worlds); len(why) > 0 {
			return fmt.Errorf("fault %q: %w: %s", in.Spec.String(), chaos.ErrUnsupported, strings.Join(why, "; "))
		}
	}
	return nil
}

// create records a new run — its header, fault schedule and clock in one
// durable commit, before anything is applied — and returns its id.
func (h *Harness) create(ctx context.Context, req RunRequest) (string, error) {
	scen := req.Scenario
	seed := seedOf(scen, req.Seed)
	if req.ReplayFaults != "" && req.Seed == nil {
		// A replayed schedule keeps its run's seed unless told otherwise.
		if orig, err := h.runRecord(req.ReplayFaults); err == nil {
			seed = orig.Seed
		}
	}
	written, instances, err := h.schedule(req, seed)
	if err != nil {
		return "", err
	}
	timeout, maxAttempts := scen.Limits.Timeout, scen.Limits.MaxAttempts
	if req.Timeout > 0 {
		timeout = req.Timeout
	}
	if req.MaxAttempts > 0 {
		maxAttempts = req.MaxAttempts
	}
	now := time.Now().UTC()
	id, err := newRunID(now)
	if err != nil {
		return "", fmt.Errorf("mint run id: %w", err)
	}
	if req.standby != nil {
		id = req.standby.id // reserved with its sandbox (StandbyIsolated)
	}
	blob, err := h.w.PutBlob(ctx, scen.Raw)
	if err != nil {
		return "", fmt.Errorf("store scenario: %w", err)
	}
	rec := history.RunRecord{
		ID: id, Scenario: scen.Name, Source: scen.Source, ScenarioBlob: blob, Agent: req.Agent, Seed: seed, LLM: req.LLM,
		Faults: written, Timeout: history.Duration(timeout), MaxAttempts: maxAttempts, Status: StatusRunning,
		StartedAt: now, VirtualStart: VirtualEpoch, OwnerPID: os.Getpid(), Isolated: req.isolation, Extras: req.Extras,
	}
	var forked []history.Entry
	if req.prepare != nil {
		// An isolated run's shadow world and starting point are in place
		// before the run exists (and prepare completes its isolation record).
		if forked, err = req.prepare(ctx, id); err != nil {
			return "", err
		}
		if req.isolation != nil {
			iso := *req.isolation
			rec.Isolated = &iso
		}
	}
	rec.WorldURL = req.World
	rec.HTTPReplay = req.HTTPReplay
	rec.MCPReplay = req.MCPReplay
	if scen.ReplaysMCP() {
		rec.MCPReplay = scen.MCP.Replay // the scenario's mcp.replay, or the flag's
	}
	if scen.World.Remote() && req.isolation == nil {
		// A world over the protocol answers, and is the one asked for,
		// before the run exists (a command or image world is started for it
		// here, and kept for its drive).
		specs := make([]chaos.Spec, len(instances))
		for i, in := range instances {
			specs[i] = in.Spec
		}
		if err := h.reachWorld(ctx, id, scen, specs); err != nil {
			h.releaseWorld(id, scen.World, false)
			return "", err
		}
	}
	if req.isolation == nil && !scen.ReplaysMCP() {
		// Its MCP servers answer — started, initialized, their tools
		// listed and valid — before the run exists; the connections are
		// kept for its drive.
		for _, s := range scen.MCPServers() {
			if _, err := h.mcpServers().conn(ctx, id, s); err != nil {
				h.releaseWorld(id, scen.World, false)
				return "", err
			}
		}
	}
	entries := []history.Entry{history.RunEntry(rec), history.ClockEntry(id, history.ClockRecord{Now: VirtualEpoch})}
	for i, in := range instances {
		entries = append(entries, history.FaultEntry(id, history.FaultRecord{Index: i, Spec: in.Spec.String(), From: in.From, Kind: in.Spec.Kind, At: in.Spec.Trigger.String()}))
	}
	entries = append(entries, forked...) // last: the fork's clock replaces the epoch
	if err := h.w.Put(ctx, entries...); err != nil {
		return "", fmt.Errorf("record run %s: %w", id, err)
	}
	if req.Started != nil {
		req.Started(id)
	}
	if iso := rec.Isolated; iso != nil {
		h.progress("  [%s] run %s of %s: faults %v", shadowName(id, iso), id, iso.Parent, rec.Faults)
	} else {
		h.progress("run %s: scenario %s, seed %d, faults %v", id, scen.Name, seed, rec.Faults)
	}
	return id, nil
}
