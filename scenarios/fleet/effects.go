package fleet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// Effect kinds the fleet world offers.
const (
	KindDescribe          = "fleet.describe"
	KindMeasure           = "fleet.measure"
	KindProposeCandidate  = "fleet.propose_candidate"
	KindTryCandidate      = "fleet.try_candidate"
	KindApplyCandidate    = "fleet.apply_candidate"
	KindRollbackCandidate = "fleet.rollback_candidate"
)

// Error codes of the fleet world's refusals, in error.code.
const (
	CodeInvalid     = "invalid_argument" // 400
	CodeUnknownKind = "unknown_kind"     // 400
	CodeNotFound    = "not_found"        // 404: no such service or candidate
	CodeIDInUse     = "id_in_use"        // 409: a candidate id proposed with another change
	CodeNotTried    = "not_tried"        // 409: apply of a candidate never tried
	CodeTrialFailed = "trial_failed"     // 409: apply of a candidate whose last trial failed
	CodeStale       = "stale_candidate"  // 409: the service's configuration is no longer the candidate's base
	CodeRolledBack  = "rolled_back"      // 409: apply of a candidate rolled back
)

const retentionMax = 3650

var kinds = []world.KindInfo{
	{Name: KindDescribe, Idempotent: true, ReadOnly: true, Args: "{}",
		Result: "{services: [{name, library, deps, config, staging, figures, parsers, min_retention_days, pinned}], libraries, totals: {cost_day, start_cost_day, volume_gb_day}, candidates}",
		Doc:    "the whole fleet: every service's configuration, staging copy and figures, and every candidate"},
	{Name: KindMeasure, Idempotent: true, ReadOnly: true, Args: "{service} or {candidate}",
		Result: "{service, config, figures, staging, staging_figures} or {candidate, service, config, figures, production_figures}",
		Doc:    "a service's figures (production and staging), or what a candidate's configuration would make them"},
	{Name: KindProposeCandidate, Idempotent: true, Identity: "args.id", Args: "{id, service, change: {level?, sampling?, exempt_errors?, retention_days?, format?}}",
		Result: "{id, service, change, base, config, status, trials, passed}",
		Doc:    "records a candidate change of a service's configuration, written against its configuration now (its base); proposing the same id and change again changes nothing"},
	{Name: KindTryCandidate, Identity: "args.id", Args: "{id}",
		Result: "{id, service, trial, passed, reason, figures, production_figures}",
		Doc:    "applies the candidate to the service's staging copy and measures it; the trial fails when the candidate is stale, its format is one the service's shipper cannot parse, or its retention is below the service's minimum. Not idempotent: each try is a new trial"},
	{Name: KindApplyCandidate, Idempotent: true, Identity: "args.id", Args: "{id}",
		Result: "{id, service, config, figures}",
		Doc:    "makes a tried, passing, not stale candidate the service's production configuration; applying an applied one changes nothing"},
	{Name: KindRollbackCandidate, Idempotent: true, Identity: "args.id", Args: "{id}",
		Result: "{id, service, status, config}",
		Doc:    "undoes a candidate: staging goes back to production, and an applied candidate's service back to its base; rolling back a rolled-back one changes nothing"},
}

var idRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

func decodeArgs(raw json.RawMessage, v any) *world.Outcome {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		o := world.Failed(400, CodeInvalid, "arguments: %v", err)
		return &o
	}
	return nil
}

// apply works request req out (w.mu held): its outcome and what it
// changes. A refusal is a failed outcome with nothing to change.
func (w *World) apply(req world.Request) (world.Outcome, pending, error) {
	switch req.Kind {
	case KindDescribe:
		var a struct{}
		if f := decodeArgs(req.Args, &a); f != nil {
			return *f, pending{}, nil
		}
		o, err := world.Done(w.describe())
		return o, pending{}, err
	case KindMeasure:
		return w.measure(req)
	case KindProposeCandidate:
		return w.propose(req)
	case KindTryCandidate:
		return w.try(req)
	case KindApplyCandidate:
		return w.applyCandidate(req)
	case KindRollbackCandidate:
		return w.rollback(req)
	}
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name
	}
	return world.Failed(400, CodeUnknownKind, "the fleet world has no effect kind %q (it has %s)", req.Kind, strings.Join(names, ", ")), pending{}, nil
}

// serviceView is a service as describe shows it.
type serviceView struct {
	Service
	Deps    []Dep   `json:"deps"`
	Figures Figures `json:"figures"`
}

// Dep is a library a service depends on, at the version the fleet uses.
type Dep struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Totals are the fleet's figures.
type Totals struct {
	CostPerDay      float64 `json:"cost_day"`
	StartCostPerDay float64 `json:"start_cost_day"`
	VolumePerDayGB  float64 `json:"volume_gb_day"`
}

// Description is what fleet.describe answers and Snapshot gives.
type Description struct {
	Services   []serviceView     `json:"services"`
	Libraries  map[string]string `json:"libraries"`
	Totals     Totals            `json:"totals"`
	Candidates []Candidate       `json:"candidates"`
}

// describe is the whole fleet (w.mu held).
func (w *World) describe() Description {
	d := Description{Libraries: w.meta.Libraries, Candidates: w.sortedCandidates()}
	var vol float64
	for _, n := range w.names() {
		s := w.services[n]
		f := Measure(s.Rates, s.Config)
		vol += f.VolumePerDayGB
		d.Services = append(d.Services, serviceView{Service: *s, Deps: []Dep{{Name: s.Library, Version: w.meta.Libraries[s.Library]}}, Figures: f})
	}
	d.Totals = Totals{CostPerDay: w.totalCost(), StartCostPerDay: w.meta.StartCost, VolumePerDayGB: round(vol, 6)}
	return d
}

func (w *World) measure(req world.Request) (world.Outcome, pending, error) {
	var a struct {
		Service   string `json:"service"`
		Candidate string `json:"candidate"`
	}
	if f := decodeArgs(req.Args, &a); f != nil {
		return *f, pending{}, nil
	}
	if (a.Service == "") == (a.Candidate == "") {
		return world.Failed(400, CodeInvalid, "fleet.measure: give exactly one of service or candidate"), pending{}, nil
	}
	if a.Candidate != "" {
		c := w.candidates[a.Candidate]
		if c == nil {
			return w.noCandidate(a.Candidate), pending{}, nil
		}
		s := w.services[c.Service]
		o, err := world.Done(map[string]any{"candidate": c.ID, "service": c.Service, "config": c.Config,
			"figures": Measure(s.Rates, c.Config), "production_figures": Measure(s.Rates, s.Config)})
		return o, pending{}, err
	}
	s := w.services[a.Service]
	if s == nil {
		return w.noService(a.Service), pending{}, nil
	}
	o, err := world.Done(map[string]any{"service": s.Name, "config": s.Config, "figures": Measure(s.Rates, s.Config),
		"staging": s.Staging, "staging_figures": Measure(s.Rates, s.Staging)})
	return o, pending{}, err
}

func (w *World) noService(name string) world.Outcome {
	return world.Failed(404, CodeNotFound, "no service %q (services: %s)", name, strings.Join(w.names(), ", "))
}

func (w *World) noCandidate(id string) world.Outcome {
	return world.Failed(404, CodeNotFound, "no candidate %q (fleet.propose_candidate records one)", id)
}

// checkChange refuses a change with no field, or a value out of range.
func checkChange(c Change) *world.Outcome {
	fail := func(format string, args ...any) *world.Outcome {
		o := world.Failed(400, CodeInvalid, format, args...)
		return &o
	}
	switch {
	case c == (Change{}):
		return fail("change: set at least one of level, sampling, exempt_errors, retention_days, format")
	case c.Level != nil && !slices.Contains(levels, *c.Level):
		return fail("change.level: %q is not a level (want %s)", *c.Level, joinOr(levels))
	case c.Sampling != nil && (*c.Sampling <= 0 || *c.Sampling > 1):
		return fail("change.sampling: %v is not in (0, 1]", *c.Sampling)
	case c.RetentionDays != nil && (*c.RetentionDays < 1 || *c.RetentionDays > retentionMax):
		return fail("change.retention_days: %d is not in 1..%d", *c.RetentionDays, retentionMax)
	case c.Format != nil && !slices.Contains(formats, *c.Format):
		return fail("change.format: %q is not a format (want %s)", *c.Format, joinOr(formats))
	}
	return nil
}

// with is cfg with c's fields set.
func (c Change) with(cfg Config) Config {
	if c.Level != nil {
		cfg.Level = *c.Level
	}
	if c.Sampling != nil {
		cfg.Sampling = *c.Sampling
	}
	if c.ExemptErrors != nil {
		cfg.ExemptErrors = *c.ExemptErrors
	}
	if c.RetentionDays != nil {
		cfg.RetentionDays = *c.RetentionDays
	}
	if c.Format != nil {
		cfg.Format = *c.Format
	}
	return cfg
}

// fields names the fields c sets.
func (c Change) fields() []string {
	var out []string
	if c.Level != nil {
		out = append(out, "level")
	}
	if c.Sampling != nil {
		out = append(out, "sampling")
	}
	if c.ExemptErrors != nil {
		out = append(out, "exempt_errors")
	}
	if c.RetentionDays != nil {
		out = append(out, "retention_days")
	}
	if c.Format != nil {
		out = append(out, "format")
	}
	return out
}

func sameChange(a, b Change) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func (w *World) propose(req world.Request) (world.Outcome, pending, error) {
	var a struct {
		ID      string `json:"id"`
		Service string `json:"service"`
		Change  Change `json:"change"`
	}
	if f := decodeArgs(req.Args, &a); f != nil {
		return *f, pending{}, nil
	}
	if !idRE.MatchString(a.ID) {
		return world.Failed(400, CodeInvalid, "id: %q is not a candidate id (lower case letters, digits, '.', '_', '-'; at most 63)", a.ID), pending{}, nil
	}
	s := w.services[a.Service]
	if s == nil {
		return w.noService(a.Service), pending{}, nil
	}
	if f := checkChange(a.Change); f != nil {
		return *f, pending{}, nil
	}
	if c := w.candidates[a.ID]; c != nil {
		if c.Service != a.Service || !sameChange(c.Change, a.Change) {
			return world.FailedWith(409, CodeIDInUse, map[string]any{"id": c.ID, "service": c.Service, "change": c.Change},
				"candidate %s was proposed for %s with another change; propose this one under a new id", c.ID, c.Service), pending{}, nil
		}
		o, err := world.Done(c)
		return o, pending{resource: c.ID}, err
	}
	c := &Candidate{ID: a.ID, Service: s.Name, Change: a.Change, Base: s.Config, Config: a.Change.with(s.Config), Status: StatusProposed, Key: req.Key}
	o, err := world.Done(c)
	return o, pending{candidates: []*Candidate{c}, resource: c.ID}, err
}

// candidateArgs decodes {id} and finds the candidate.
func (w *World) candidateArgs(req world.Request) (*Candidate, *world.Outcome) {
	var a struct {
		ID string `json:"id"`
	}
	if f := decodeArgs(req.Args, &a); f != nil {
		return nil, f
	}
	c := w.candidates[a.ID]
	if c == nil {
		o := w.noCandidate(a.ID)
		return nil, &o
	}
	return c, nil
}

// judge is the trial of c on service s: whether it passes, and why not.
func judge(s *Service, c *Candidate) (bool, string) {
	if s.Config != c.Base {
		return false, fmt.Sprintf("stale: candidate %s was written for %s's configuration before %s; propose it again against the configuration now",
			c.ID, s.Name, strings.Join(fieldsDiffering(c.Base, s.Config), ", "))
	}
	if !slices.Contains(s.Parsers, c.Config.Format) {
		return false, fmt.Sprintf("%s's log shipper parses only %s: its %s logs would be dropped", s.Name, joinOr(s.Parsers), c.Config.Format)
	}
	if c.Config.RetentionDays < s.MinRetentionDays {
		return false, fmt.Sprintf("retention_days %d is below %s's compliance minimum of %d", c.Config.RetentionDays, s.Name, s.MinRetentionDays)
	}
	return true, ""
}

func (w *World) try(req world.Request) (world.Outcome, pending, error) {
	old, f := w.candidateArgs(req)
	if f != nil {
		return *f, pending{}, nil
	}
	s := *w.services[old.Service]
	c := *old
	passed, reason := judge(&s, &c)
	s.Staging = c.Config
	fig := Measure(s.Rates, s.Staging)
	m := w.meta
	m.Trials++
	c.Trials++
	c.Passed, c.Reason, c.Figures = passed, reason, &fig
	if c.Status != StatusApplied {
		c.Status = StatusTried
	}
	trial := fmt.Sprintf("trial-%d", m.Trials)
	o, err := world.Done(map[string]any{"id": c.ID, "service": s.Name, "trial": trial, "passed": passed, "reason": reason,
		"figures": fig, "production_figures": Measure(s.Rates, s.Config)})
	return o, pending{meta: &m, services: []*Service{&s}, candidates: []*Candidate{&c}, resource: trial}, err
}

func (w *World) applyCandidate(req world.Request) (world.Outcome, pending, error) {
	old, f := w.candidateArgs(req)
	if f != nil {
		return *f, pending{}, nil
	}
	s := *w.services[old.Service]
	result := func(c *Candidate) (world.Outcome, error) {
		return world.Done(map[string]any{"id": c.ID, "service": s.Name, "config": s.Config, "figures": Measure(s.Rates, s.Config)})
	}
	switch {
	case old.Status == StatusApplied:
		o, err := result(old)
		return o, pending{resource: old.ID}, err
	case old.Status == StatusProposed:
		return world.Failed(409, CodeNotTried, "candidate %s was never tried: fleet.try_candidate first", old.ID), pending{}, nil
	case old.Status == StatusRolledBack:
		return world.Failed(409, CodeRolledBack, "candidate %s was rolled back; propose it again under a new id", old.ID), pending{}, nil
	case !old.Passed:
		return world.Failed(409, CodeTrialFailed, "candidate %s failed its last trial (%s): roll it back", old.ID, old.Reason), pending{}, nil
	case s.Config != old.Base:
		return world.FailedWith(409, CodeStale, map[string]any{"changed": fieldsDiffering(old.Base, s.Config)},
			"candidate %s is stale: %s's configuration changed since it was proposed (%s); roll it back and propose it again",
			old.ID, s.Name, strings.Join(fieldsDiffering(old.Base, s.Config), ", ")), pending{}, nil
	}
	c := *old
	c.Status = StatusApplied
	s.Config, s.Staging = c.Config, c.Config
	s.Pinned = pin(s.Pinned, c.Change.fields())
	o, err := result(&c)
	return o, pending{services: []*Service{&s}, candidates: []*Candidate{&c}, resource: c.ID}, err
}

// pin adds fields to pinned, sorted, without repeats.
func pin(pinned, fields []string) []string {
	out := slices.Clone(pinned)
	for _, f := range fields {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

func (w *World) rollback(req world.Request) (world.Outcome, pending, error) {
	old, f := w.candidateArgs(req)
	if f != nil {
		return *f, pending{}, nil
	}
	s := *w.services[old.Service]
	result := func(c *Candidate) (world.Outcome, error) {
		return world.Done(map[string]any{"id": c.ID, "service": s.Name, "status": c.Status, "config": s.Config})
	}
	if old.Status == StatusRolledBack {
		o, err := result(old)
		return o, pending{resource: old.ID}, err
	}
	if old.Status == StatusApplied {
		if s.Config != old.Config {
			return world.FailedWith(409, CodeStale, map[string]any{"changed": fieldsDiffering(old.Config, s.Config)},
				"candidate %s cannot be rolled back: %s's configuration changed since it was applied (%s)",
				old.ID, s.Name, strings.Join(fieldsDiffering(old.Config, s.Config), ", ")), pending{}, nil
		}
		s.Config = old.Base
	}
	s.Staging = s.Config
	c := *old
	c.Status = StatusRolledBack
	o, err := result(&c)
	return o, pending{services: []*Service{&s}, candidates: []*Candidate{&c}, resource: c.ID}, err
}
