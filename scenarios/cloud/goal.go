package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// OptionGoal is the world option (scenario file: world.options.goal) that
// selects what CheckGoal judges.
const OptionGoal = "goal"

// Values of OptionGoal.
const (
	GoalDeployment  = "deployment"  // the default: the task is a Goal
	GoalMaintenance = "maintenance" // the task is a MaintenanceGoal
)

var goals = []string{GoalDeployment, GoalMaintenance}

// parseOptions validates the world options and returns the goal.
func parseOptions(options map[string]any) (string, error) {
	goal := GoalDeployment
	keys := make([]string, 0, len(options))
	for k := range options {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k != OptionGoal {
			return "", fmt.Errorf("cloud world: unknown option %q (it takes only %q: %s)", k, OptionGoal, strings.Join(goals, " or "))
		}
		s, ok := options[k].(string)
		if !ok || !slices.Contains(goals, s) {
			return "", fmt.Errorf("cloud world: option %s: unknown value %v (%T); want %s", k, options[k], options[k], strings.Join(goals, " or "))
		}
		goal = s
	}
	return goal, nil
}

// Goal is the deployment a task asks for, as the cloud world checks it
// under GoalDeployment.
type Goal struct {
	Network   string `json:"network"`
	Database  string `json:"database"`
	Migration int    `json:"migration"`
	Service   struct {
		Name  string `json:"name"`
		Image string `json:"image"`
	} `json:"service"`
	DNS string `json:"dns"`
}

// MaintenanceGoal is the maintenance a task asks for, as the cloud world
// checks it under GoalMaintenance: the database named Database exists on
// the network named Network, and for every day d in 1..Days a snapshot of it
// named SnapshotName(d) exists.
type MaintenanceGoal struct {
	Network        string `json:"network"`
	Database       string `json:"database"`
	Days           int    `json:"days"`
	SnapshotPrefix string `json:"snapshot_prefix"`
}

// SnapshotName is the name the snapshot of day d (1-based) must have.
func (g MaintenanceGoal) SnapshotName(day int) string {
	return g.SnapshotPrefix + strconv.Itoa(day)
}

// CheckGoal implements world.World, judging the goal the world was opened
// with (OptionGoal).
func (w *World) CheckGoal(ctx context.Context, task json.RawMessage) (world.Check, error) {
	if w.goal == GoalMaintenance {
		return w.checkMaintenance(task)
	}
	return w.checkDeployment(task)
}

// checkDeployment: the DNS name points at the endpoint of a service of the
// wanted name and image, whose database has the wanted name, sits on the
// wanted network and is migrated to at least the wanted version.
func (w *World) checkDeployment(task json.RawMessage) (world.Check, error) {
	var g Goal
	if err := json.Unmarshal(task, &g); err != nil {
		return world.Check{}, fmt.Errorf("cloud world: task is not a deployment goal: %w", err)
	}
	if g.DNS == "" || g.Service.Name == "" {
		return world.Check{}, fmt.Errorf("cloud world: task lacks dns or service.name; cannot judge the goal")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	rec := w.resources["dns:"+g.DNS]
	if rec == nil {
		return world.Check{Detail: fmt.Sprintf("no DNS record for %s", g.DNS)}, nil
	}
	target := rec.Fields["target"]
	var svc *Resource
	for _, r := range w.sorted() {
		if r.Kind == ResService && r.Fields["endpoint"] == target {
			svc = r
		}
	}
	if svc == nil {
		return world.Check{Detail: fmt.Sprintf("%s points at %q, which is no service's endpoint", g.DNS, target)}, nil
	}
	if svc.Name != g.Service.Name || (g.Service.Image != "" && svc.Fields["image"] != g.Service.Image) {
		return world.Check{Detail: fmt.Sprintf("%s points at service %s (%s, image %s), want %s with image %s",
			g.DNS, svc.ID, svc.Name, svc.Fields["image"], g.Service.Name, g.Service.Image)}, nil
	}
	db := w.resources[svc.Fields[ArgDatabaseID]]
	if db == nil || (g.Database != "" && db.Name != g.Database) {
		return world.Check{Detail: fmt.Sprintf("service %s uses database %q, want one named %s", svc.ID, svc.Fields[ArgDatabaseID], g.Database)}, nil
	}
	if db.Version < g.Migration {
		return world.Check{Detail: fmt.Sprintf("database %s is at schema version %d, want >= %d", db.ID, db.Version, g.Migration)}, nil
	}
	net := w.resources[db.Fields["network_id"]]
	if net == nil || (g.Network != "" && net.Name != g.Network) {
		return world.Check{Detail: fmt.Sprintf("database %s is on network %q, want one named %s", db.ID, db.Fields["network_id"], g.Network)}, nil
	}
	return world.Check{OK: true, Detail: fmt.Sprintf("%s -> %s (%s %s) -> %s v%d on %s",
		g.DNS, svc.ID, svc.Name, svc.Fields["image"], db.ID, db.Version, net.ID)}, nil
}

// checkMaintenance judges a MaintenanceGoal. When several databases carry
// the wanted name on the wanted network (a duplicate, which
// no-duplicate-effects reports on its own), the one with the most of the
// wanted snapshots is judged.
func (w *World) checkMaintenance(task json.RawMessage) (world.Check, error) {
	var g MaintenanceGoal
	if err := json.Unmarshal(task, &g); err != nil {
		return world.Check{}, fmt.Errorf("cloud world: task is not a maintenance goal: %w", err)
	}
	if g.Database == "" || g.SnapshotPrefix == "" || g.Days < 1 || g.Days > retentionDaysMax {
		return world.Check{}, fmt.Errorf("cloud world: maintenance task needs database, snapshot_prefix and days in 1..%d (got database %q, snapshot_prefix %q, days %d); cannot judge the goal",
			retentionDaysMax, g.Database, g.SnapshotPrefix, g.Days)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var named, candidates []*Resource
	for _, r := range w.sorted() {
		if r.Kind != ResDatabase || r.Name != g.Database {
			continue
		}
		named = append(named, r)
		if net := w.resources[r.Fields["network_id"]]; g.Network == "" || (net != nil && net.Name == g.Network) {
			candidates = append(candidates, r)
		}
	}
	if len(named) == 0 {
		return world.Check{Detail: fmt.Sprintf("no database named %s", g.Database)}, nil
	}
	if len(candidates) == 0 {
		net := w.resources[named[0].Fields["network_id"]]
		netName := "?"
		if net != nil {
			netName = net.Name
		}
		return world.Check{Detail: fmt.Sprintf("database %s (%s) is on network %s (%s), want one named %s",
			g.Database, named[0].ID, named[0].Fields["network_id"], netName, g.Network)}, nil
	}
	snaps := map[string]map[string]bool{} // database id -> snapshot names
	for _, r := range w.resources {
		if r.Kind == ResSnapshot {
			db := r.Fields[ArgDatabaseID]
			if snaps[db] == nil {
				snaps[db] = map[string]bool{}
			}
			snaps[db][r.Name] = true
		}
	}
	var best *Resource
	var bestMissing []string
	for _, db := range candidates {
		var missing []string
		for d := 1; d <= g.Days; d++ {
			if !snaps[db.ID][g.SnapshotName(d)] {
				missing = append(missing, g.SnapshotName(d))
			}
		}
		if best == nil || len(missing) < len(bestMissing) {
			best, bestMissing = db, missing
		}
	}
	net := w.resources[best.Fields["network_id"]]
	where := fmt.Sprintf("%s on %s", best.ID, best.Fields["network_id"])
	if net != nil {
		where = fmt.Sprintf("%s on %s (%s)", best.ID, net.Name, net.ID)
	}
	if len(bestMissing) > 0 {
		return world.Check{Detail: fmt.Sprintf("missing snapshots %s of %s (%s; %d of %d present)",
			strings.Join(bestMissing, ", "), g.Database, where, g.Days-len(bestMissing), g.Days)}, nil
	}
	if g.Days == 1 {
		return world.Check{OK: true, Detail: fmt.Sprintf("%s (%s) has its 1 snapshot %s", g.Database, where, g.SnapshotName(1))}, nil
	}
	return world.Check{OK: true, Detail: fmt.Sprintf("%s (%s) has all %d snapshots %s..%s",
		g.Database, where, g.Days, g.SnapshotName(1), g.SnapshotName(g.Days))}, nil
}
