package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// Goal is what a task asks of the fleet (the task's "goal" field), as
// CheckGoal judges it.
type Goal struct {
	// CostCut is the share the fleet's log cost per day must come down by
	// from its cost when the world was made, in (0, 1).
	CostCut float64 `json:"cost_cut"`
	// VisibilityFloor is the least error visibility every service must
	// keep, in [0, 1].
	VisibilityFloor float64 `json:"visibility_floor"`
}

// Task is a scenario's task on the fleet world: {goal: {...}}, and
// whatever else the agent reads.
type Task struct {
	Goal *Goal `json:"goal"`
}

var _ world.GoalJudge = (*World)(nil)

// parseGoal reads a task's goal and checks its ranges.
func parseGoal(task json.RawMessage) (Goal, []world.Problem) {
	var t Task
	if err := json.Unmarshal(task, &t); err != nil || t.Goal == nil {
		return Goal{}, []world.Problem{{Pointer: "/goal", Message: "missing: the fleet world's goal needs goal: {cost_cut, visibility_floor}, e.g. " + goalExample}}
	}
	var problems []world.Problem
	if g := t.Goal; g.CostCut <= 0 || g.CostCut >= 1 {
		problems = append(problems, world.Problem{Pointer: "/goal/cost_cut", Message: fmt.Sprintf("want the share the log cost must come down by, in (0, 1), got %v", g.CostCut)})
	}
	if g := t.Goal; g.VisibilityFloor < 0 || g.VisibilityFloor > 1 {
		problems = append(problems, world.Problem{Pointer: "/goal/visibility_floor", Message: fmt.Sprintf("want the least error visibility of every service, in [0, 1], got %v", g.VisibilityFloor)})
	}
	return *t.Goal, problems
}

const goalExample = `{"goal":{"cost_cut":0.3,"visibility_floor":0.9}}`

// checkTask checks a scenario's task before anything runs.
func checkTask(_ map[string]any, task json.RawMessage) []world.Problem {
	var v map[string]any
	if err := json.Unmarshal(task, &v); err != nil || v == nil {
		return []world.Problem{{Message: "the fleet world's goal needs a task object like " + goalExample}}
	}
	g, ok := v["goal"].(map[string]any)
	if !ok {
		return []world.Problem{{Pointer: "/goal", Message: "missing: the fleet world's goal needs goal: {cost_cut, visibility_floor}, e.g. " + goalExample}}
	}
	var problems []world.Problem
	for _, f := range goalFields {
		name := strings.TrimPrefix(f.Name, "goal.")
		val, found := g[name]
		switch {
		case !found:
			problems = append(problems, world.Problem{Pointer: "/goal/" + name, Message: fmt.Sprintf("missing: %s (%s)", f.Name, f.Doc)})
		case !f.Holds(val):
			problems = append(problems, world.Problem{Pointer: "/goal/" + name, Message: fmt.Sprintf("want a number (%s), got %v", f.Doc, val)})
		}
	}
	if len(problems) > 0 {
		return problems
	}
	_, problems = parseGoal(task)
	return problems
}

var goalFields = []world.Field{
	{Name: "goal.cost_cut", Type: "number", Required: true, Doc: "the share the fleet's log cost per day must come down by from its start, in (0, 1)"},
	{Name: "goal.visibility_floor", Type: "number", Required: true, Doc: "the least error visibility every service must keep, in [0, 1]"},
}

// CheckGoal implements world.GoalJudge: the fleet's log cost per day is
// down by goal.cost_cut from its start, every service's error visibility
// is at least goal.visibility_floor, and every tried candidate was applied
// or rolled back (none is left half-applied, on staging only).
func (w *World) CheckGoal(ctx context.Context, task json.RawMessage) (world.Check, error) {
	g, problems := parseGoal(task)
	if len(problems) > 0 {
		return world.Check{}, fmt.Errorf("fleet world: task%s: %s; cannot judge the goal", strings.ReplaceAll(problems[0].Pointer, "/", "."), problems[0].Message)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var fails []string
	cost, start := w.totalCost(), w.meta.StartCost
	target := round(start*(1-g.CostCut), 4)
	cut := 0.0
	if start > 0 {
		cut = 1 - cost/start
	}
	if cost > target {
		fails = append(fails, fmt.Sprintf("log cost %.4f $/day is down %.1f%% from %.4f, want at least %.1f%% (at most %.4f)", cost, 100*cut, start, 100*g.CostCut, target))
	}
	least, leastName := 2.0, ""
	for _, n := range w.names() {
		s := w.services[n]
		v := Measure(s.Rates, s.Config).ErrorVisibility
		if v < least {
			least, leastName = v, n
		}
		if v < g.VisibilityFloor {
			fails = append(fails, fmt.Sprintf("%s sees %.4g of its errors, below the floor %.4g (%s)", n, v, g.VisibilityFloor, configText(s.Config)))
		}
	}
	counts := map[string]int{}
	for _, c := range w.sortedCandidates() {
		counts[c.Status]++
		if c.Status == StatusTried {
			fails = append(fails, fmt.Sprintf("candidate %s (%s) was tried and neither applied nor rolled back: half-applied", c.ID, c.Service))
		}
	}
	if len(fails) > 0 {
		return world.Check{Detail: strings.Join(fails, "; ")}, nil
	}
	return world.Check{OK: true, Detail: fmt.Sprintf("log cost %.4f -> %.4f $/day (down %.1f%%, want %.1f%%); error visibility >= %.4g on all %d services (least: %s %.4g); candidates: %d applied, %d rolled back, %d only proposed",
		start, cost, 100*cut, 100*g.CostCut, g.VisibilityFloor, len(w.services), leastName, least,
		counts[StatusApplied], counts[StatusRolledBack], counts[StatusProposed])}, nil
}

func configText(c Config) string {
	return fmt.Sprintf("level %s, sampling %v, exempt_errors %v", c.Level, c.Sampling, c.ExemptErrors)
}
