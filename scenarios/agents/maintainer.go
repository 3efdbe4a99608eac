package agents

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/overnight-dev/overnight/harness/protocol"
	"github.com/overnight-dev/overnight/sandbox/agent"
	"github.com/overnight-dev/overnight/scenarios/cloud"
)

// maintainerState is what the maintainer checkpoints: its resources, when
// its week started, and what it learned about the world's API.
type maintainerState struct {
	Start      time.Time    `json:"start"`
	NetworkID  string       `json:"network_id,omitempty"`
	DatabaseID string       `json:"database_id,omitempty"`
	Snapshots  []string     `json:"snapshots,omitempty"`
	API        apiKnowledge `json:"api"`
}

// apiKnowledge is what the maintainer learned from the world's errors.
type apiKnowledge struct {
	Renamed  map[string]string         `json:"renamed,omitempty"`  // argument -> its new name
	Extra    map[string]map[string]any `json:"extra,omitempty"`    // kind -> arguments it now requires
	Replaced map[string]string         `json:"replaced,omitempty"` // kind -> the kind that replaces it
	Key      string                    `json:"api_key,omitempty"`
	KeyField string                    `json:"key_field,omitempty"`
}

// Maintainer is the example agent of the week scenario: a maintenance agent
// with daily work for a week. It sets up a network and a database (step
// 1), then every virtual day sleeps until the day starts and takes that
// day's snapshot (step 1+d), checkpointing after each.
//
// Well-behaved (the default), it resumes from its checkpoint, derives every
// effect's key from its checkpointed step, and adapts when the world's API
// changes by reading the world's error: a renamed argument, a removed
// endpoint and its replacement, a newly required argument, a new API key.
// What it learned goes into its checkpoint.
//
// With --naive it never reads its checkpoint back and sends effects without
// keys: after a restart it sets everything up again, creating duplicates.
func Maintainer(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("maintainer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	naive := fs.Bool("naive", false, "never read the checkpoint back and send effects without keys (deliberately broken)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c, err := agent.FromEnv()
	if err != nil {
		fmt.Fprintln(stderr, "maintainer:", err)
		return 2
	}
	m := &maintainer{c: c, naive: *naive, out: stdout}
	if err := m.run(ctx); err != nil {
		fmt.Fprintln(stderr, "maintainer:", err)
		if errors.Is(err, agent.ErrFenced) {
			return 3
		}
		return 1
	}
	return 0
}

type maintainer struct {
	c     *agent.Client
	naive bool
	out   io.Writer
	st    maintainerState
}

func (m *maintainer) run(ctx context.Context) error {
	info, err := m.c.Run(ctx)
	if err != nil {
		return fmt.Errorf("read run: %w", err)
	}
	var task cloud.MaintenanceGoal
	if err := json.Unmarshal(info.Task, &task); err != nil || task.Days < 1 {
		return fmt.Errorf("task is not a maintenance goal with days >= 1: %s", info.Task)
	}
	step := 0
	if !m.naive {
		cp, err := m.c.Resume(ctx)
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		if cp.Seq > 0 {
			if err := json.Unmarshal(cp.State, &m.st); err != nil {
				return fmt.Errorf("checkpoint %d holds no maintenance state: %w", cp.Seq, err)
			}
			step = cp.Step
		}
	}
	fmt.Fprintf(m.out, "attempt %d at %s: starting after step %d of %d\n", info.Attempt, info.Now.Format(time.RFC3339), step, task.Days+1)
	if step == 0 {
		m.st.Start = info.Now
		net, err := m.act(ctx, cloud.KindCreateNetwork, map[string]any{"name": task.Network})
		if err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		m.st.NetworkID, _ = net["id"].(string)
		db, err := m.act(ctx, cloud.KindCreateDatabase, map[string]any{"name": task.Database, "network_id": m.st.NetworkID})
		if err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		m.st.DatabaseID, _ = db["id"].(string)
		if err := m.checkpoint(ctx, 1); err != nil {
			return err
		}
		step = 1
	}
	for day := step; day <= task.Days; day++ {
		now, err := m.c.SleepUntil(ctx, m.st.Start.Add(time.Duration(day)*24*time.Hour))
		if err != nil {
			return fmt.Errorf("sleep until day %d: %w", day, err)
		}
		name := task.SnapshotName(day)
		if _, err := m.act(ctx, cloud.KindCreateSnapshot, map[string]any{cloud.ArgDatabaseID: m.st.DatabaseID, "name": name}); err != nil {
			return fmt.Errorf("day %d: %w", day, err)
		}
		m.st.Snapshots = append(m.st.Snapshots, name)
		if err := m.checkpoint(ctx, day+1); err != nil {
			return err
		}
		fmt.Fprintf(m.out, "day %d done at %s\n", day, now.Format(time.RFC3339))
	}
	claims := map[string]any{"database_id": m.st.DatabaseID, "snapshots": m.st.Snapshots}
	if err := m.c.Done(ctx, protocol.OutcomeSuccess, fmt.Sprintf("%d days of snapshots of %s", task.Days, task.Database), claims); err != nil {
		return fmt.Errorf("done: %w", err)
	}
	fmt.Fprintln(m.out, "week complete")
	return nil
}

func (m *maintainer) checkpoint(ctx context.Context, step int) error {
	if _, err := m.c.Checkpoint(ctx, step, m.st); err != nil && !(m.naive && errors.Is(err, agent.ErrConflict)) {
		return fmt.Errorf("checkpoint step %d: %w", step, err)
	}
	return nil
}

// act sends an effect, correcting it by what the world's errors say until
// it is done (a bounded number of times). Each correction is a new effect
// with a new key.
func (m *maintainer) act(ctx context.Context, kind string, args map[string]any) (map[string]any, error) {
	for try := 0; try < 8; try++ {
		k, a := m.st.API.apply(kind, args)
		var res protocol.EffectResult
		var err error
		if m.naive {
			res, err = m.c.EffectUnkeyed(ctx, k, a)
		} else {
			res, err = m.c.Effect(ctx, k, a)
		}
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
		if res.Error == nil {
			return nil, fmt.Errorf("%s: %s", k, res.Status)
		}
		_ = m.c.Event(ctx, "error", fmt.Sprintf("%s: %s (%s)", k, res.Error.Message, res.Error.Code), res.Error)
		if res.Error.Transient {
			continue // the world never acted: send it again
		}
		learned, err := m.learn(ctx, kind, res.Error)
		if err != nil {
			return nil, err
		}
		if !learned {
			return nil, fmt.Errorf("%s: %s (%s)", k, res.Error.Message, res.Error.Code)
		}
		_ = m.c.Event(ctx, "adapt", fmt.Sprintf("%s: adapted to %s", k, res.Error.Code), m.st.API)
	}
	return nil, fmt.Errorf("%s: still refused after 8 corrections", kind)
}

// learn updates what the maintainer knows of the API from a refusal, and
// reports whether a corrected request is worth sending.
func (m *maintainer) learn(ctx context.Context, kind string, e *protocol.EffectError) (bool, error) {
	var d struct {
		Renamed     map[string]string `json:"renamed"`
		Required    []string          `json:"required"`
		Example     map[string]any    `json:"example"`
		Replacement string            `json:"replacement"`
		Obtain      string            `json:"obtain"`
		Field       string            `json:"field"`
	}
	if len(e.Details) == 0 || json.Unmarshal(e.Details, &d) != nil {
		return false, nil
	}
	api := &m.st.API
	switch e.Code {
	case cloud.CodeFieldRenamed:
		if len(d.Renamed) == 0 {
			return false, nil
		}
		if api.Renamed == nil {
			api.Renamed = map[string]string{}
		}
		for from, to := range d.Renamed {
			api.Renamed[from] = to
		}
	case cloud.CodeMissingField:
		if len(d.Example) == 0 {
			return false, nil
		}
		if api.Extra == nil {
			api.Extra = map[string]map[string]any{}
		}
		if api.Extra[kind] == nil {
			api.Extra[kind] = map[string]any{}
		}
		for k, v := range d.Example {
			api.Extra[kind][k] = v
		}
	case cloud.CodeGone:
		if d.Replacement == "" {
			return false, nil
		}
		if api.Replaced == nil {
			api.Replaced = map[string]string{}
		}
		api.Replaced[kind] = d.Replacement
	case cloud.CodeUnauthorized:
		if d.Obtain == "" || d.Field == "" {
			return false, nil
		}
		var res protocol.EffectResult
		var err error
		if m.naive {
			res, err = m.c.EffectUnkeyed(ctx, d.Obtain, map[string]any{})
		} else {
			res, err = m.c.Effect(ctx, d.Obtain, map[string]any{})
		}
		if err != nil || res.Status != protocol.StatusDone {
			return false, fmt.Errorf("obtain credentials with %s: %v %v", d.Obtain, err, res.Error)
		}
		var out map[string]string
		if err := json.Unmarshal(res.Result, &out); err != nil || out[d.Field] == "" {
			return false, fmt.Errorf("obtain credentials with %s: no %s in %s", d.Obtain, d.Field, res.Result)
		}
		api.Key, api.KeyField = out[d.Field], d.Field
	default:
		return false, nil
	}
	return true, nil
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
