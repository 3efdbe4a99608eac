package agents

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/sandbox/agent"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/fleet"
)

// planned is one candidate the optimizer means to try.
type planned struct {
	ID      string       `json:"id"`
	Service string       `json:"service"`
	Change  fleet.Change `json:"change"`
}

// tried is what became of a planned candidate: its trial, and whether it
// was kept (applied) or rolled back, with the service's cost per day
// before and after.
type tried struct {
	planned
	Passed     bool    `json:"passed"`
	Reason     string  `json:"reason,omitempty"`
	Kept       bool    `json:"kept"`
	CostBefore float64 `json:"cost_before"`
	CostAfter  float64 `json:"cost_after"`
}

// optimizerState is what the optimizer checkpoints: its plan, how far it
// got, and every candidate's outcome with its measurements.
type optimizerState struct {
	Start     time.Time `json:"start"`
	StartCost float64   `json:"start_cost_day"`
	Plan      []planned `json:"plan"`
	Next      int       `json:"next"` // the index in Plan of the next candidate
	Done      []tried   `json:"done,omitempty"`
}

// Optimizer is the example agent of the logopt scenario: it optimises the
// logging of the fleet world's services. It reads the fleet and asks the
// run's model for the candidates to try (step 1: its plan; with no model,
// its own: three candidates per service — warn level with errors exempt
// from sampling, text format, a week's retention), then for each candidate
// sleeps an hour of virtual time, proposes it, tries it on staging and
// applies it if its trial passes, else rolls it back; a candidate whose
// trial failed because it was stale (a dependency update changed the
// service meanwhile) is proposed again under a new id. It checkpoints
// after each candidate, its progress and measurements in the checkpoint
// with a claim of what became of the candidate (fleet.ClaimCandidate),
// and resumes from it: every effect's key comes from the checkpointed
// step, so a candidate half done when it was killed is finished, not
// tried again. It ends with done, claiming the fleet's cost before and
// after and the candidates kept and rolled back; with --report FILE it
// first writes those figures and every candidate's trial, outcome and
// measurements to FILE in Markdown.
//
// Its deliberately broken variants: with --naive it never reads its
// checkpoint back and sends effects without keys, so after a restart it
// tries its candidates again, each try a new trial (no-duplicate-effects
// on fleet.try_candidate); with --blind it also keeps a candidate that
// samples worker's errors down to 10% (goal-reached: error visibility
// below the floor); with --leave-failed it never rolls back a candidate
// whose trial failed (goal-reached: a half-applied candidate); with
// --overclaim its report claims half the cost the world shows
// (goal-reached: the report disagrees with the world); with --careless it
// takes a trial that failed transiently for a pass and checkpoints its
// candidate as kept, a claim the world contradicts (state-consistent:
// the checkpoint is poisoned; the logopt-rollback scenario).
func Optimizer(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("optimizer", flag.ContinueOnError)
	naive := fs.Bool("naive", false, "never read the checkpoint back and send effects without keys (deliberately broken)")
	blind := fs.Bool("blind", false, "also keep a candidate that samples a service's errors away (deliberately broken)")
	overclaim := fs.Bool("overclaim", false, "report half the cost the world shows (deliberately broken)")
	leave := fs.Bool("leave-failed", false, "leave a candidate whose trial failed on staging instead of rolling it back (deliberately broken)")
	pause := fs.Duration("pause", time.Hour, "virtual time between two candidates")
	careless := fs.Bool("careless", false, "take a trial whose effect failed transiently for a pass and record its candidate as kept, without retrying or applying it (deliberately broken: its checkpoint's claim is poisoned)")
	report := fs.String("report", "", "before reporting done, write a Markdown report of the candidates and the saving to this file (a scenario's report:, such as /workspace/report.md)")
	return runMain(ctx, fs, args, stderr, func(ctx context.Context, c *agent.Client) error {
		o := &optimizer{c: c, naive: *naive, blind: *blind, leave: *leave, overclaim: *overclaim, careless: *careless, pause: *pause, report: *report, out: stdout}
		return o.run(ctx)
	})
}

type optimizer struct {
	c     *agent.Client
	naive bool
	blind bool // plan a candidate that samples worker's errors at 10%
	leave bool // never roll back a failed candidate
	// overclaim reports half the cost the world shows
	overclaim bool
	// careless takes a trial that failed transiently for a pass
	careless bool
	pause    time.Duration
	report   string // the Markdown report's path ("": none)
	out      io.Writer
	st       optimizerState
}

func (o *optimizer) run(ctx context.Context) error {
	info, err := o.c.Run(ctx)
	if err != nil {
		return fmt.Errorf("read run: %w", err)
	}
	step := 0
	if !o.naive {
		if step, err = resumeInto(ctx, o.c, "optimizer", &o.st); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.out, "attempt %d at %s: starting after step %d\n", info.Attempt, info.Now.Format(time.RFC3339), step)
	if step == 0 {
		d, err := o.describe(ctx)
		if err != nil {
			return err
		}
		p, err := (&planner{c: o.c}).candidates(ctx, info.Task, d)
		if errors.Is(err, errNoModel) {
			p = plan(d)
		} else if err != nil {
			return err
		}
		o.st = optimizerState{Start: info.Now, StartCost: d.Totals.CostPerDay, Plan: p}
		if o.blind {
			tenth, no := 0.1, false
			o.st.Plan = append(o.st.Plan, planned{ID: "worker-sampled", Service: "worker", Change: fleet.Change{Sampling: &tenth, ExemptErrors: &no}})
		}
		if err := o.checkpoint(ctx, 1, nil); err != nil {
			return err
		}
		step = 1
	}
	for o.st.Next < len(o.st.Plan) {
		p := o.st.Plan[o.st.Next]
		if _, err := o.c.SleepUntil(ctx, o.st.Start.Add(time.Duration(o.st.Next+1)*o.pause)); err != nil {
			return fmt.Errorf("sleep before %s: %w", p.ID, err)
		}
		t, err := o.candidate(ctx, p)
		if err != nil {
			return err
		}
		o.st.Done = append(o.st.Done, t)
		if !t.Passed && strings.HasPrefix(t.Reason, "stale") {
			o.st.Plan = append(o.st.Plan, planned{ID: retryID(p.ID), Service: p.Service, Change: p.Change})
		}
		o.st.Next++
		step++
		if err := o.checkpoint(ctx, step, &t); err != nil {
			return err
		}
		verdict := "rolled back"
		if t.Kept {
			verdict = "kept"
		}
		fmt.Fprintf(o.out, "%s: %s (%.2f -> %.2f $/day) %s\n", p.ID, verdict, t.CostBefore, t.CostAfter, t.Reason)
	}
	d, err := o.describe(ctx)
	if err != nil {
		return err
	}
	kept, rolled := 0, 0
	for _, t := range o.st.Done {
		if t.Kept {
			kept++
		} else {
			rolled++
		}
	}
	after := d.Totals.CostPerDay
	if o.overclaim {
		after /= 2
	}
	claims := map[string]any{"cost_before": o.st.StartCost, "cost_after": after, "kept": kept, "rolled_back": rolled, "candidates": o.st.Done}
	summary := fmt.Sprintf("log cost %.2f -> %.2f $/day; %d candidates kept, %d rolled back", o.st.StartCost, after, kept, rolled)
	if o.report != "" {
		// The file and the claims sent with done come from the same figures,
		// so the world judges the one the file shows.
		if err := os.WriteFile(o.report, []byte(reportText(summary, o.st.StartCost, after, o.st.Done)), 0o644); err != nil {
			return fmt.Errorf("write the report: %w", err)
		}
	}
	if err := o.c.Done(ctx, protocol.OutcomeSuccess, summary, claims); err != nil {
		return fmt.Errorf("done: %w", err)
	}
	fmt.Fprintln(o.out, summary)
	return nil
}

// reportText is the optimizer's final report in Markdown: the saving, and
// every candidate tried with its trial, its outcome and its service's cost
// per day before and after.
func reportText(summary string, before, after float64, done []tried) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Fleet logging: %s\n\n", summary)
	saving := before - after
	share := 0.0
	if before > 0 {
		share = 100 * saving / before
	}
	fmt.Fprintf(&b, "The saving: %.2f $/day (%.1f%%), from %.2f to %.2f $/day.\n\n", saving, share, before, after)
	b.WriteString("| candidate | service | change | trial | outcome | cost before ($/day) | cost after ($/day) | reason |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, t := range done {
		change, _ := json.Marshal(t.Change)
		trial, outcome := "failed", "rolled back"
		if t.Passed {
			trial = "passed"
		}
		if t.Kept {
			outcome = "kept"
		}
		fmt.Fprintf(&b, "| %s | %s | `%s` | %s | %s | %.2f | %.2f | %s |\n", t.ID, t.Service, change, trial, outcome, t.CostBefore, t.CostAfter, t.Reason)
	}
	return b.String()
}

var proposeTool = tool("propose_candidate",
	"Propose one candidate change of a service's log configuration (any of level: debug|info|warn|error|off, sampling in (0, 1], exempt_errors, retention_days, format: text|json|ecs); it will be tried on staging, then kept or rolled back.",
	map[string]string{"id": "string", "service": "string", "change": "object"}, "id", "service", "change")

// candidates asks the run's model for the candidates to try, one
// propose_candidate call each, given the task and the fleet.
func (p *planner) candidates(ctx context.Context, task json.RawMessage, d fleet.Description) ([]planned, error) {
	brief, _ := json.Marshal(map[string]any{"task": task, "fleet": d.Services, "totals": d.Totals})
	calls, args, err := p.ask(ctx,
		"You optimise the logging of a microservice fleet. Propose the candidate configuration changes to try, one propose_candidate call each, in the order to try them.",
		string(brief), []protocol.ChatTool{proposeTool})
	if err != nil {
		return nil, err
	}
	var out []planned
	for i, call := range calls {
		raw, _ := json.Marshal(args[i])
		var c planned
		if err := json.Unmarshal(raw, &c); call.Function.Name != "propose_candidate" || err != nil || c.ID == "" || c.Service == "" {
			return nil, fmt.Errorf("the model's call %d, %s %s, is not a candidate {id, service, change}", i+1, call.Function.Name, raw)
		}
		out = append(out, c)
	}
	return out, nil
}

// plan is the optimizer's own plan when the run has no model: three
// candidates per service, in the fleet's order.
func plan(d fleet.Description) []planned {
	warn, yes, text, week := fleet.LevelWarn, true, fleet.FormatText, 7
	var out []planned
	for _, s := range d.Services {
		out = append(out,
			planned{ID: s.Name + "-warn", Service: s.Name, Change: fleet.Change{Level: &warn, ExemptErrors: &yes}},
			planned{ID: s.Name + "-text", Service: s.Name, Change: fleet.Change{Format: &text}},
			planned{ID: s.Name + "-week", Service: s.Name, Change: fleet.Change{RetentionDays: &week}})
	}
	return out
}

// retryID is the id a stale candidate is proposed again under.
func retryID(id string) string {
	base, n := id, 1
	if i := strings.LastIndex(id, "-r"); i > 0 {
		if _, err := fmt.Sscanf(id[i+2:], "%d", &n); err == nil {
			base, n = id[:i], n+1
		}
	}
	return fmt.Sprintf("%s-r%d", base, n)
}

// candidate proposes p, tries it, and applies or rolls it back.
func (o *optimizer) candidate(ctx context.Context, p planned) (tried, error) {
	t := tried{planned: p}
	if _, err := o.act(ctx, fleet.KindProposeCandidate, p); err != nil {
		return t, err
	}
	trial, err := o.act(ctx, fleet.KindTryCandidate, map[string]string{"id": p.ID})
	if err != nil {
		return t, err
	}
	if trial == nil {
		// The careless variant's slip: the trial never ran, and it goes
		// on as if it had passed and the candidate were applied.
		t.Passed, t.Kept, t.Reason = true, true, "its trial failed transiently; recorded as good"
		return t, nil
	}
	var r struct {
		Passed     bool          `json:"passed"`
		Reason     string        `json:"reason"`
		Figures    fleet.Figures `json:"figures"`
		Production fleet.Figures `json:"production_figures"`
	}
	if err := json.Unmarshal(trial, &r); err != nil {
		return t, fmt.Errorf("%s: decode its trial: %w", p.ID, err)
	}
	t.Passed, t.Reason, t.CostBefore, t.CostAfter = r.Passed, r.Reason, r.Production.CostPerDay, r.Production.CostPerDay
	if r.Passed {
		if _, err := o.act(ctx, fleet.KindApplyCandidate, map[string]string{"id": p.ID}); err != nil {
			return t, err
		}
		t.Kept, t.CostAfter = true, r.Figures.CostPerDay
		return t, nil
	}
	if o.leave {
		return t, nil
	}
	_, err = o.act(ctx, fleet.KindRollbackCandidate, map[string]string{"id": p.ID})
	return t, err
}

func (o *optimizer) describe(ctx context.Context) (fleet.Description, error) {
	var d fleet.Description
	raw, err := o.act(ctx, fleet.KindDescribe, struct{}{})
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return d, fmt.Errorf("decode the fleet: %w", err)
	}
	return d, nil
}

// act sends an effect and waits out transient failures, sending it again
// under its own key (the harness reconciles it first, so it runs at most
// once); a permanent refusal is an error.
func (o *optimizer) act(ctx context.Context, kind string, args any) (json.RawMessage, error) {
	wait := 30 * time.Second
	key := ""
	for retries := 0; ; retries++ {
		var res protocol.EffectResult
		var err error
		switch {
		case o.naive:
			res, err = o.c.EffectUnkeyed(ctx, kind, args)
		case key != "":
			res, err = o.c.EffectWithKey(ctx, key, kind, args)
		default:
			res, err = o.c.Effect(ctx, kind, args)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
		if res.Status == protocol.StatusDone {
			return res.Result, nil
		}
		if o.careless && kind == fleet.KindTryCandidate && res.Error != nil && res.Error.Transient {
			_ = o.c.Event(ctx, "progress", fmt.Sprintf("%s failed (%s); carrying on as if it passed", kind, res.Error.Code), nil)
			return nil, nil
		}
		if res.Error == nil || !res.Error.Transient || retries >= 12 {
			return nil, fmt.Errorf("%s: %s: %s", kind, res.Status, errText(res.Error))
		}
		key = res.Key
		if _, err := o.c.Sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("%s: wait before retrying: %w", kind, err)
		}
		wait = min(2*wait, time.Hour)
	}
}

func errText(e *protocol.EffectError) string {
	if e == nil {
		return "no error"
	}
	return e.Message + " (" + e.Code + ")"
}

// checkpoint writes the optimizer's state as the checkpoint of step,
// claiming what became of t, the candidate the step was about (nil: none),
// as the fleet judges it (fleet.ClaimCandidate): applied if it kept it,
// tried if it left it on staging, else rolled back.
func (o *optimizer) checkpoint(ctx context.Context, step int, t *tried) error {
	if o.naive || t == nil {
		return checkpointAt(ctx, o.c, o.naive, step, o.st)
	}
	status := fleet.StatusRolledBack
	switch {
	case t.Kept:
		status = fleet.StatusApplied
	case o.leave:
		status = fleet.StatusTried
	}
	claims := map[string]any{fleet.ClaimCandidate: map[string]string{"id": t.ID, "status": status}}
	if _, err := o.c.CheckpointClaims(ctx, step, o.st, claims); err != nil {
		return fmt.Errorf("checkpoint step %d: %w", step, err)
	}
	return nil
}
