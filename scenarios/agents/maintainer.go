package agents

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/overnight-dev/overnight/sandbox/agent"
	"github.com/overnight-dev/overnight/sandbox/protocol"
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
	naive := fs.Bool("naive", false, "never read the checkpoint back and send effects without keys (deliberately broken)")
	return runMain(ctx, fs, args, stderr, func(ctx context.Context, c *agent.Client) error {
		m := &maintainer{c: c, naive: *naive, out: stdout}
		m.ad = &adapter{c: c, naive: *naive, api: &m.st.API}
		return m.run(ctx)
	})
}

type maintainer struct {
	c     *agent.Client
	naive bool
	out   io.Writer
	st    maintainerState
	ad    *adapter
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
		if step, err = resumeInto(ctx, m.c, "maintenance", &m.st); err != nil {
			return err
		}
	}
	fmt.Fprintf(m.out, "attempt %d at %s: starting after step %d of %d\n", info.Attempt, info.Now.Format(time.RFC3339), step, task.Days+1)
	if step == 0 {
		m.st.Start = info.Now
		net, err := m.ad.act(ctx, cloud.KindCreateNetwork, map[string]any{"name": task.Network})
		if err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		m.st.NetworkID, _ = net["id"].(string)
		db, err := m.ad.act(ctx, cloud.KindCreateDatabase, map[string]any{"name": task.Database, "network_id": m.st.NetworkID})
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
		if _, err := m.ad.act(ctx, cloud.KindCreateSnapshot, map[string]any{cloud.ArgDatabaseID: m.st.DatabaseID, "name": name}); err != nil {
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
	return checkpointAt(ctx, m.c, m.naive, step, m.st)
}
