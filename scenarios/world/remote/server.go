package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// MaxRequestBytes bounds the body of a call the Server accepts (a
// create_instance carries a whole ledger).
const MaxRequestBytes = 64 << 20

// Server serves a world definition over the world protocol, instances
// included: an http.Handler.
//
// The world itself (instance "") is opened on the store given to
// NewServer, under the prefix "real/": as durable as that store. Each
// instance create_instance makes is opened on a MemStore of its own,
// under "inst/<name>/": instances are shadows, kept in memory only, and
// lost when the process ends (a restarted server has none; a call naming
// one is refused with unknown_instance, and the harness makes it again
// from the ledger it restored it from). drop_instance forgets one.
//
// Every call is answered with JSON; calls on one instance that change its
// ledger (apply, set_version) are taken one at a time, so the seq an apply
// answers is its own entry's.
type Server struct {
	def     world.Definition
	options map[string]any
	desc    Description

	mu        sync.Mutex
	instances map[string]*instance
	routes    map[string]route
}

// instance is the world itself or one instance of it.
type instance struct {
	world world.World
	ready bool       // false while create_instance restores it
	mu    sync.Mutex // apply and set_version, with the seq they answer
}

type route struct {
	name    string
	getToo  bool // describe answers GET too
	handler func(ctx context.Context, body []byte) (any, *httpError)
}

// httpError is a refused call: its status and ErrorBody.
type httpError struct {
	status int
	CallError
}

func refuse(status int, code, format string, args ...any) *httpError {
	return &httpError{status, CallError{Code: code, Message: fmt.Sprintf(format, args...)}}
}

func badRequest(err error) *httpError {
	return refuse(http.StatusBadRequest, CodeBadRequest, "%v", err)
}

// NewServer opens def's world on store (recovering what it holds) with
// options, and returns the server of it. The options are checked by
// opening a fresh model first, which also tells the capabilities
// describe answers: goal (a world.GoalJudge), duplicates (a
// world.DuplicateFinder), versions (a world.VersionedModel); instances
// always.
func NewServer(ctx context.Context, def world.Definition, store world.Store, options map[string]any) (*Server, error) {
	if def.Name == "" || def.Open == nil {
		return nil, errors.New("serve a world: the definition needs a name and Open")
	}
	fresh, err := def.Open(ctx, world.NewMemStore(), options)
	if err != nil {
		return nil, fmt.Errorf("serve world %s: open it with options %v: %w", def.Name, options, err)
	}
	itself, err := def.Instance(ctx, store, []byte("real/"), options)
	if err != nil {
		return nil, fmt.Errorf("serve world %s: open its state: %w", def.Name, err)
	}
	s := &Server{def: def, options: options, instances: map[string]*instance{"": {world: itself, ready: true}}}
	s.desc = describe(def, fresh, options)
	s.routes = map[string]route{
		PathDescribe:       {"describe", true, s.describe},
		PathApply:          {"apply", false, s.apply},
		PathLookup:         {"lookup", false, s.lookup},
		PathLedger:         {"ledger", false, s.ledger},
		PathState:          {"state", false, s.state},
		PathGoal:           {"goal", false, s.goal},
		PathDuplicates:     {"duplicates", false, s.duplicates},
		PathSetVersion:     {"set_version", false, s.setVersion},
		PathEvent:          {"event", false, s.event},
		PathCreateInstance: {"create_instance", false, s.createInstance},
		PathDropInstance:   {"drop_instance", false, s.dropInstance},
	}
	return s, nil
}

// describe builds the description of def from a freshly opened model.
func describe(def world.Definition, m world.Model, options map[string]any) Description {
	d := Description{Protocol: Protocol, Name: def.Name, Summary: def.Summary, Options: options, Examples: def.Examples}
	for _, v := range def.Versions {
		d.Versions = append(d.Versions, Version{Name: v.Name, Kinds: v.Kinds})
	}
	if len(d.Versions) == 0 {
		name := "v1"
		if vm, ok := m.(world.VersionedModel); ok {
			name = vm.APIVersion()
		}
		d.Versions = []Version{{Name: name, Kinds: m.Kinds()}}
	}
	_, d.Capabilities.Goal = m.(world.GoalJudge)
	_, d.Capabilities.Duplicates = m.(world.DuplicateFinder)
	_, d.Capabilities.Versions = m.(world.VersionedModel)
	if em, ok := m.(world.EventModel); ok && len(em.Events()) > 0 {
		d.Capabilities.Events, d.Events = true, em.Events()
	}
	d.Capabilities.Instances = true
	return d
}

// Description is what describe answers (without the world's current
// api_version, which describe adds at each call).
func (s *Server) Description() Description { return s.desc }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, ok := s.routes[r.URL.Path]
	if !ok {
		writeAnswer(w, http.StatusNotFound, ErrorBody{CallError{Code: CodeNotFound,
			Message: fmt.Sprintf("no call %s %s; the calls are POST %s (describe also GET)", r.Method, r.URL.Path, strings.Join(s.paths(), ", "))}})
		return
	}
	if r.Method != http.MethodPost && !(rt.getToo && r.Method == http.MethodGet) {
		allow := "POST"
		if rt.getToo {
			allow = "GET, POST"
		}
		w.Header().Set("Allow", allow)
		writeAnswer(w, http.StatusMethodNotAllowed, ErrorBody{CallError{Code: CodeMethodNotAllowed,
			Message: fmt.Sprintf("%s %s: want %s", r.Method, r.URL.Path, allow)}})
		return
	}
	var body []byte
	if r.Method == http.MethodPost {
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			writeAnswer(w, http.StatusRequestEntityTooLarge, ErrorBody{CallError{Code: CodeBadRequest,
				Message: fmt.Sprintf("%s: body: more than %d bytes", rt.name, MaxRequestBytes)}})
			return
		case err != nil:
			writeAnswer(w, http.StatusBadRequest, ErrorBody{CallError{Code: CodeBadRequest, Message: fmt.Sprintf("%s: read the body: %v", rt.name, err)}})
			return
		}
	}
	answer, herr := rt.handler(r.Context(), body)
	if herr != nil {
		herr.Message = rt.name + ": " + herr.Message
		writeAnswer(w, herr.status, ErrorBody{herr.CallError})
		return
	}
	writeAnswer(w, http.StatusOK, answer)
}

func (s *Server) paths() []string {
	out := make([]string, 0, len(s.routes))
	for p := range s.routes {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func writeAnswer(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(ErrorBody{CallError{Code: CodeInternal, Message: "encode the answer: " + err.Error()}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// instance returns the ready instance name, or the refusal.
func (s *Server) instance(name string) (*instance, *httpError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[name]
	if !ok || !in.ready {
		return nil, refuse(http.StatusNotFound, CodeUnknownInstance, "no instance %q (create_instance makes one; instances live in memory and are gone after a restart)", name)
	}
	return in, nil
}

// apiVersion is the version w serves now.
func (s *Server) apiVersion(w world.World) string {
	if v, ok := w.(world.Versioned); ok {
		return v.APIVersion()
	}
	return s.desc.Versions[0].Name
}

func internal(format string, args ...any) *httpError {
	return refuse(http.StatusInternalServerError, CodeInternal, format, args...)
}

func (s *Server) describe(context.Context, []byte) (any, *httpError) {
	d := s.desc
	itself, _ := s.instance("")
	d.APIVersion = s.apiVersion(itself.world)
	return d, nil
}

func (s *Server) apply(ctx context.Context, body []byte) (any, *httpError) {
	req, err := decodeApply(body)
	if err != nil {
		return nil, badRequest(err)
	}
	in, herr := s.instance(req.Instance)
	if herr != nil {
		return nil, herr
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	out, err := in.world.Execute(ctx, world.Request{Key: req.Key, Kind: req.Kind, Args: req.Args, Now: req.Now})
	if err != nil {
		return nil, internal("%s key %s: %v", req.Kind, req.Key, err)
	}
	seq, err := world.LedgerSeq(ctx, in.world)
	if err != nil {
		return nil, internal("%s key %s: applied, and the ledger's seq cannot be read: %v", req.Kind, req.Key, err)
	}
	return ApplyResponse{Outcome: out, Seq: seq}, nil
}

func (s *Server) lookup(ctx context.Context, body []byte) (any, *httpError) {
	req, err := decodeLookup(body)
	if err != nil {
		return nil, badRequest(err)
	}
	in, herr := s.instance(req.Instance)
	if herr != nil {
		return nil, herr
	}
	out, found, err := in.world.Lookup(ctx, req.Key)
	if err != nil {
		return nil, internal("key %s: %v", req.Key, err)
	}
	if !found {
		return LookupResponse{}, nil
	}
	return LookupResponse{Found: true, Outcome: &out}, nil
}

func (s *Server) ledger(ctx context.Context, body []byte) (any, *httpError) {
	req, err := decodeInstance(body)
	if err != nil {
		return nil, badRequest(err)
	}
	in, herr := s.instance(req.Instance)
	if herr != nil {
		return nil, herr
	}
	entries, err := in.world.Ledger(ctx)
	if err != nil {
		return nil, internal("%v", err)
	}
	if entries == nil {
		entries = []world.LedgerEntry{}
	}
	return LedgerResponse{Entries: entries}, nil
}

func (s *Server) state(ctx context.Context, body []byte) (any, *httpError) {
	req, err := decodeInstance(body)
	if err != nil {
		return nil, badRequest(err)
	}
	in, herr := s.instance(req.Instance)
	if herr != nil {
		return nil, herr
	}
	st, err := in.world.Snapshot(ctx)
	if err != nil {
		return nil, internal("%v", err)
	}
	return StateResponse{State: st, APIVersion: s.apiVersion(in.world)}, nil
}

func (s *Server) goal(ctx context.Context, body []byte) (any, *httpError) {
	req, err := decodeGoal(body)
	if err != nil {
		return nil, badRequest(err)
	}
	if !s.desc.Capabilities.Goal {
		return nil, refuse(http.StatusNotImplemented, CodeUnsupported, "world %s judges no goal", s.def.Name)
	}
	in, herr := s.instance(req.Instance)
	if herr != nil {
		return nil, herr
	}
	check, err := in.world.CheckGoal(ctx, req.Task)
	switch {
	case errors.Is(err, world.ErrNoGoal):
		return nil, refuse(http.StatusNotImplemented, CodeUnsupported, "%v", err)
	case err != nil:
		return nil, badRequest(fmt.Errorf(`field "task": the world cannot judge it: %w`, err))
	}
	return check, nil
}

func (s *Server) duplicates(ctx context.Context, body []byte) (any, *httpError) {
	req, err := decodeInstance(body)
	if err != nil {
		return nil, badRequest(err)
	}
	if !s.desc.Capabilities.Duplicates {
		return nil, refuse(http.StatusNotImplemented, CodeUnsupported, "world %s finds no duplicates", s.def.Name)
	}
	in, herr := s.instance(req.Instance)
	if herr != nil {
		return nil, herr
	}
	dups, err := in.world.Duplicates(ctx)
	if err != nil {
		return nil, internal("%v", err)
	}
	if dups == nil {
		dups = []world.Duplicate{}
	}
	return DuplicatesResponse{Duplicates: dups}, nil
}

func (s *Server) setVersion(ctx context.Context, body []byte) (any, *httpError) {
	req, err := decodeSetVersion(body)
	if err != nil {
		return nil, badRequest(err)
	}
	in, herr := s.instance(req.Instance)
	if herr != nil {
		return nil, herr
	}
	v, ok := in.world.(world.Versioned)
	if !ok {
		return nil, refuse(http.StatusNotImplemented, CodeUnsupported, "world %s has one API version", s.def.Name)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	prev, err := v.SetAPIVersion(ctx, req.Version, req.Now)
	switch {
	case errors.Is(err, world.ErrUnknownAPIVersion):
		return nil, refuse(http.StatusBadRequest, CodeUnknownVersion, "%v", err)
	case err != nil:
		return nil, internal("%s: %v", req.Version, err)
	}
	return SetVersionResponse{Previous: prev, Version: req.Version}, nil
}

func (s *Server) event(ctx context.Context, body []byte) (any, *httpError) {
	req, err := decodeEvent(body)
	if err != nil {
		return nil, badRequest(err)
	}
	in, herr := s.instance(req.Instance)
	if herr != nil {
		return nil, herr
	}
	ew, ok := in.world.(world.Eventful)
	if !ok || len(ew.Events()) == 0 {
		return nil, refuse(http.StatusNotImplemented, CodeUnsupported, "world %s undergoes no world events", s.def.Name)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	out, err := ew.FireEvent(ctx, world.Event{Kind: req.Kind, Args: req.Args, Now: req.Now})
	switch {
	case errors.Is(err, world.ErrUnknownEvent):
		return nil, refuse(http.StatusBadRequest, CodeUnknownEvent, "%v", err)
	case err != nil:
		// The model says it cannot happen (arguments that name nothing,
		// nothing left to happen): the caller's to fix, nothing recorded.
		return nil, refuse(http.StatusBadRequest, CodeBadRequest, "%v", err)
	}
	return EventResponse{Outcome: out}, nil
}

func (s *Server) createInstance(ctx context.Context, body []byte) (any, *httpError) {
	req, err := decodeCreateInstance(body)
	if err != nil {
		return nil, badRequest(err)
	}
	s.mu.Lock()
	if _, taken := s.instances[req.Instance]; taken {
		s.mu.Unlock()
		return nil, refuse(http.StatusConflict, CodeInstanceExists, "instance %q exists (drop_instance it first)", req.Instance)
	}
	in := &instance{} // reserved, not ready: calls on it are refused until it is
	s.instances[req.Instance] = in
	s.mu.Unlock()
	w, herr := s.restore(ctx, req)
	s.mu.Lock()
	defer s.mu.Unlock()
	if herr != nil {
		delete(s.instances, req.Instance)
		return nil, herr
	}
	in.world, in.ready = w, true
	seq, err := world.LedgerSeq(ctx, w)
	if err != nil {
		return nil, internal("instance %s: read its seq: %v", req.Instance, err)
	}
	return CreateInstanceResponse{Instance: req.Instance, APIVersion: s.apiVersion(w), Seq: seq}, nil
}

// restore opens a new instance in memory and replays req's ledger into it.
func (s *Server) restore(ctx context.Context, req CreateInstanceRequest) (world.World, *httpError) {
	w, err := s.def.Instance(ctx, world.NewMemStore(), []byte("inst/"+req.Instance+"/"), s.options)
	if err != nil {
		return nil, internal("open instance %s: %v", req.Instance, err)
	}
	err = world.Restore(ctx, w, world.State{World: s.def.Name, Ledger: req.Ledger})
	switch {
	case errors.Is(err, world.ErrNotReplayable), errors.Is(err, world.ErrUnknownAPIVersion):
		return nil, refuse(http.StatusConflict, CodeReplayDiffers, "instance %s: %v; no instance is left", req.Instance, err)
	case err != nil:
		return nil, internal("instance %s: restore its ledger: %v; no instance is left", req.Instance, err)
	}
	return w, nil
}

func (s *Server) dropInstance(_ context.Context, body []byte) (any, *httpError) {
	req, err := decodeDropInstance(body)
	if err != nil {
		return nil, badRequest(err)
	}
	if _, herr := s.instance(req.Instance); herr != nil {
		return nil, herr
	}
	s.mu.Lock()
	delete(s.instances, req.Instance)
	s.mu.Unlock()
	return DropInstanceResponse(req), nil
}
