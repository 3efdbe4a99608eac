package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/overnight-dev/overnight/sandbox/agent"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/cloud"
)

// adapter sends an agent's effects and adapts them when the world's API
// changes, learning only from the world's own errors (their details). The
// example agents keep what it learned in their checkpoints.
type adapter struct {
	c      *agent.Client
	naive  bool // send effects without keys
	giveUp bool // never correct a refusal: report it (errRefused)
	// careless takes a transient failure for success, without retrying:
	// the step is recorded as done though the world never did it.
	careless bool
	api      *apiKnowledge
	// advise proposes how to correct a refused request; default: read the
	// world's error details directly.
	advise func(ctx context.Context, kind string, args map[string]any, e *protocol.EffectError) (correction, error)
}

// apiKnowledge is what an agent learned of the world's API from its errors.
type apiKnowledge struct {
	Renamed  map[string]string         `json:"renamed,omitempty"`  // argument -> its new name
	Extra    map[string]map[string]any `json:"extra,omitempty"`    // kind -> arguments it now requires
	Replaced map[string]string         `json:"replaced,omitempty"` // kind -> the kind that replaces it
	Key      string                    `json:"api_key,omitempty"`
	KeyField string                    `json:"key_field,omitempty"`
}

// act sends an effect, retrying transient failures and correcting it by
// what the world's refusals say until it is done (a bounded number of
// times). Each correction is a new effect with a new key.
func (m *adapter) act(ctx context.Context, kind string, args map[string]any) (map[string]any, error) {
	corrections, retries := 0, 0
	wait := 30 * time.Second
	forgot := false
	key := "" // the key of a request to send again as it was (after a transient failure)
	for {
		k, a := m.api.apply(kind, args)
		var res protocol.EffectResult
		var err error
		switch {
		case m.naive:
			res, err = m.c.EffectUnkeyed(ctx, k, a)
		case key != "":
			// The same request again under its own key: the harness
			// reconciles it first, so it runs at most once.
			res, err = m.c.EffectWithKey(ctx, key, k, a)
		default:
			res, err = m.c.Effect(ctx, k, a)
		}
		key = ""
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		if res.Status == protocol.StatusDone {
			var out map[string]any
			if err := json.Unmarshal(res.Result, &out); err != nil {
				return nil, fmt.Errorf("%s: decode result: %w", k, err)
			}
			return out, nil
		}
		if res.Status == protocol.StatusDenied {
			// The gate, not the world: the effect did not run, and its
			// reason says why. Nothing here can correct it.
			return nil, &errDenied{kind: k, err: res.Error}
		}
		if res.Error == nil {
			return nil, fmt.Errorf("%s: %s", k, res.Status)
		}
		_ = m.c.Event(ctx, "error", fmt.Sprintf("%s: %s (%s)", k, res.Error.Message, res.Error.Code), res.Error)
		if res.Error.Transient && m.careless {
			_ = m.c.Event(ctx, "progress", fmt.Sprintf("%s failed (%s); carrying on as if it was done", k, res.Error.Code), nil)
			return map[string]any{}, nil
		}
		if res.Error.Transient {
			// The world never acted, or its answer was lost: wait (in the
			// run's virtual time, so an outage of hours costs nothing real)
			// and send it again under the same key.
			key = res.Key
			if retries++; retries > 12 {
				return nil, fmt.Errorf("%s: still failing after %d retries: %s", k, retries-1, res.Error.Message)
			}
			if _, err := m.c.Sleep(ctx, wait); err != nil {
				return nil, fmt.Errorf("%s: wait before retrying: %w", k, err)
			}
			wait = min(2*wait, time.Hour)
			continue
		}
		if m.giveUp {
			return nil, &errRefused{kind: k, err: res.Error}
		}
		if corrections++; corrections > 8 {
			return nil, fmt.Errorf("%s: still refused after 8 corrections", kind)
		}
		learned, err := m.learn(ctx, kind, args, res.Error)
		if err != nil {
			return nil, err
		}
		if !learned {
			if !forgot && !m.api.empty() {
				// What it learned no longer holds (the API moved back):
				// forget it, and try the request as first written.
				*m.api, forgot = apiKnowledge{}, true
				_ = m.c.Event(ctx, "adapt", fmt.Sprintf("%s: refused (%s) with what was learned of the API: forgetting it", k, res.Error.Code), nil)
				continue
			}
			return nil, fmt.Errorf("%s: %s (%s)", k, res.Error.Message, res.Error.Code)
		}
		_ = m.c.Event(ctx, "adapt", fmt.Sprintf("%s: adapted to %s", k, res.Error.Code), m.api)
	}
}

// errRefused is a permanent refusal an agent that does not adapt gives up on.
type errRefused struct {
	kind string
	err  *protocol.EffectError
}

func (e *errRefused) Error() string {
	return fmt.Sprintf("the world refused %s: %s (%s)", e.kind, e.err.Message, e.err.Code)
}

// errDenied is an effect the harness's gate denied: it never reached the
// world. An agent stops on it, saying so, and never claims success.
type errDenied struct {
	kind string
	err  *protocol.EffectError
}

func (e *errDenied) Error() string {
	why := "no reason given"
	if e.err != nil {
		why = e.err.Message
	}
	return fmt.Sprintf("the gate denied %s: %s", e.kind, why)
}

// correction is what to change so a refused request goes through: from
// the world's error details directly, or as a model proposes it.
type correction struct {
	Rename  map[string]string `json:"rename,omitempty"`   // argument -> its new name
	Add     map[string]any    `json:"add,omitempty"`      // arguments to add
	UseKind string            `json:"use_kind,omitempty"` // the kind that replaces this one
	Obtain  string            `json:"obtain,omitempty"`   // the kind that issues credentials
	Field   string            `json:"field,omitempty"`    // the argument that carries them
}

func (c correction) empty() bool {
	return len(c.Rename) == 0 && len(c.Add) == 0 && c.UseKind == "" && (c.Obtain == "" || c.Field == "")
}

// fromDetails reads a correction straight from the world's error details.
func fromDetails(_ context.Context, _ string, _ map[string]any, e *protocol.EffectError) (correction, error) {
	var d struct {
		Renamed     map[string]string `json:"renamed"`
		Example     map[string]any    `json:"example"`
		Replacement string            `json:"replacement"`
		Obtain      string            `json:"obtain"`
		Field       string            `json:"field"`
	}
	if len(e.Details) == 0 || json.Unmarshal(e.Details, &d) != nil {
		return correction{}, nil
	}
	switch e.Code {
	case cloud.CodeFieldRenamed:
		return correction{Rename: d.Renamed}, nil
	case cloud.CodeMissingField:
		return correction{Add: d.Example}, nil
	case cloud.CodeGone:
		return correction{UseKind: d.Replacement}, nil
	case cloud.CodeUnauthorized:
		return correction{Obtain: d.Obtain, Field: d.Field}, nil
	}
	return correction{}, nil
}

// learn asks the adapter's advisor how to correct a refused request and
// records the answer in what it knows of the API; it reports whether a
// corrected request is worth sending.
func (m *adapter) learn(ctx context.Context, kind string, args map[string]any, e *protocol.EffectError) (bool, error) {
	advise := m.advise
	if advise == nil {
		advise = fromDetails
	}
	c, err := advise(ctx, kind, args, e)
	if err != nil {
		return false, err
	}
	if c.empty() {
		return false, nil
	}
	api := m.api
	if len(c.Rename) > 0 {
		if api.Renamed == nil {
			api.Renamed = map[string]string{}
		}
		for from, to := range c.Rename {
			api.Renamed[from] = to
		}
	}
	if len(c.Add) > 0 {
		if api.Extra == nil {
			api.Extra = map[string]map[string]any{}
		}
		if api.Extra[kind] == nil {
			api.Extra[kind] = map[string]any{}
		}
		for k, v := range c.Add {
			api.Extra[kind][k] = v
		}
	}
	if c.UseKind != "" {
		if api.Replaced == nil {
			api.Replaced = map[string]string{}
		}
		api.Replaced[kind] = c.UseKind
	}
	if c.Obtain != "" && c.Field != "" {
		var res protocol.EffectResult
		var err error
		if m.naive {
			res, err = m.c.EffectUnkeyed(ctx, c.Obtain, map[string]any{})
		} else {
			res, err = m.c.Effect(ctx, c.Obtain, map[string]any{})
		}
		if err != nil || res.Status != protocol.StatusDone {
			return false, fmt.Errorf("obtain credentials with %s: %v %v", c.Obtain, err, res.Error)
		}
		var out map[string]any
		if err := json.Unmarshal(res.Result, &out); err != nil {
			return false, fmt.Errorf("obtain credentials with %s: %w", c.Obtain, err)
		}
		key, _ := out[c.Field].(string)
		if key == "" {
			return false, fmt.Errorf("obtain credentials with %s: no %s in %s", c.Obtain, c.Field, res.Result)
		}
		api.Key, api.KeyField = key, c.Field
	}
	return true, nil
}

func (k apiKnowledge) empty() bool {
	return len(k.Renamed) == 0 && len(k.Extra) == 0 && len(k.Replaced) == 0 && k.Key == ""
}

// apply rewrites a request by what is known of the API.
func (k apiKnowledge) apply(kind string, args map[string]any) (string, map[string]any) {
	if r, ok := k.Replaced[kind]; ok {
		kind = r
	}
	out := make(map[string]any, len(args)+2)
	keys := make([]string, 0, len(args))
	for key := range args {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		name := key
		if to, ok := k.Renamed[key]; ok {
			name = to
		}
		out[name] = args[key]
	}
	for key, v := range k.Extra[kind] {
		out[key] = v
	}
	if k.Key != "" {
		out[k.KeyField] = k.Key
	}
	return kind, out
}
