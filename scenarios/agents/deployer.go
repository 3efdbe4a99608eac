package agents

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/overnight-dev/overnight/sandbox/agent"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/cloud"
)

// DeployTask is the task of the deploy scenario: the five-step deployment.
// It is the very goal the cloud world judges.
type DeployTask = cloud.Goal

// deployState is what the deployer checkpoints after each step.
type deployState struct {
	NetworkID  string `json:"network_id,omitempty"`
	DatabaseID string `json:"database_id,omitempty"`
	Migrated   int    `json:"migrated,omitempty"`
	Endpoint   string `json:"endpoint,omitempty"`
	DNS        string `json:"dns,omitempty"`
	// API is what the deployer learned of the world's API from its errors.
	API apiKnowledge `json:"api,omitzero"`
	// Plan is the model's plan of the deployment.
	Plan []planStep `json:"plan,omitempty"`
}

// deploySteps is the number of steps of a deployment.
const deploySteps = 5

// Deployer is the example agent of the deploy scenario: network, database,
// migration, service, DNS — checkpointing after each step. It asks the
// run's model (through the gateway's OpenAI-compatible endpoint) for its
// plan, as a sequence of tool calls, and, when the world refuses an effect,
// sends the world's error to the model and follows the correction it
// proposes (this is how it adapts to an API version change). Without a
// model it follows a built-in plan and reads corrections from the errors.
//
// Well-behaved (the default), it resumes from its last checkpoint and sends
// every effect under a key derived from the checkpointed step, so a restart
// after step 3 continues with step 4 and repeats nothing.
//
// With --naive it is the deliberately broken variant: it checkpoints its
// step but never reads the checkpoint back and sends its effects without
// keys, so after a restart it redoes everything from step 1 and creates
// duplicate resources. The harness must catch it.
//
// With --fragile-resume every resume dies on its own checkpoint (it reads
// the state back more strictly than it writes it: a crash-recovery bug),
// unless a crash_recovery lesson says how to read it; the reflection
// loop's crash-loop tests use it.
func Deployer(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("deployer", flag.ContinueOnError)
	naive := fs.Bool("naive", false, "never read the checkpoint back and send effects without keys (deliberately broken)")
	delay := fs.Duration("step-delay", 0, "wait this long (real time) before each step, to watch or interrupt a run mid-way")
	stubborn := fs.Bool("ignore-sigterm", false, "keep working after SIGTERM until SIGKILLed, as an agent that ignores shutdown requests does")
	giveUp := fs.Bool("give-up", false, "never correct a request the world refuses: report done with outcome failure instead (unless a lesson says how to adapt)")
	ignoreLessons := fs.Bool("ignore-lessons", false, "never follow the lessons of GET /v1/run (the jagged model that does not learn)")
	blindRetry := fs.Bool("blind-retry", false, "retry a refused step once, unchanged, under a new key of its own, before giving up")
	randomNet := fs.Bool("random-network-name", false, "name its network with a random suffix (a re-run never asks for the same network twice: for divergence tests)")
	flaky := fs.Bool("flaky", false, "half the time (a coin per process) send step 4 without its image, which the world refuses: a flaky agent")
	careless := fs.Bool("careless", false, "record a step whose effect failed transiently as done, without retrying it (deliberately broken: its checkpoint's claims are poisoned)")
	fragile := fs.Bool("fragile-resume", false, "read its checkpoint back more strictly than it writes it, so every resume dies (exit 1) — a crash-recovery bug — unless a crash_recovery lesson says how to read it")
	report := fs.String("report", "", "before reporting done, write a Markdown report of the deployment to this file (a scenario's report:, such as /workspace/report.md)")
	return runMain(ctx, fs, args, stderr, func(ctx context.Context, c *agent.Client) error {
		if *stubborn {
			ctx = context.WithoutCancel(ctx)
		}
		return deploy(ctx, c, deployOptions{naive: *naive, delay: *delay, giveUp: *giveUp, ignoreLessons: *ignoreLessons, blindRetry: *blindRetry, randomNet: *randomNet, flaky: *flaky, fragile: *fragile, careless: *careless, report: *report}, stdout)
	})
}

// deployOptions are the deployer's variants.
type deployOptions struct {
	naive         bool          // never read the checkpoint back, send no keys
	delay         time.Duration // before each step
	giveUp        bool          // report done(failure) on a refusal instead of correcting it
	ignoreLessons bool          // never follow a lesson
	blindRetry    bool          // retry a refused step once, unchanged, under a new key
	randomNet     bool          // a random tag on the network (a re-run differs from its recording)
	flaky         bool          // half the time, a bad step 4
	fragile       bool          // die on every resume unless a crash_recovery lesson says how to read the checkpoint
	careless      bool          // record a step whose effect failed transiently as done
	report        string        // a Markdown report written here before done ("" : none)
}

// ClassCrashRecovery is the lesson class that tells the fragile deployer
// its resumes die on its own checkpoint: it then reads it leniently.
const ClassCrashRecovery = "crash_recovery"

// legacyState is what the fragile deployer expects to read back: the
// state before it kept the plan and what it learned of the API.
type legacyState struct {
	NetworkID  string `json:"network_id,omitempty"`
	DatabaseID string `json:"database_id,omitempty"`
	Migrated   int    `json:"migrated,omitempty"`
	Endpoint   string `json:"endpoint,omitempty"`
	DNS        string `json:"dns,omitempty"`
}

// readState decodes a checkpoint's state. The fragile variant reads it
// strictly into the legacy shape, which its own writes never fit, unless
// a crash_recovery lesson says how to read it (and it is not told to
// ignore lessons).
func readState(ctx context.Context, c *agent.Client, o deployOptions, info protocol.RunInfo, cp protocol.Checkpoint, st *deployState) error {
	if o.fragile {
		var used []string
		if !o.ignoreLessons {
			for _, l := range info.Lessons {
				if l.Class == ClassCrashRecovery {
					used = append(used, l.ID)
				}
			}
		}
		if len(used) == 0 {
			dec := json.NewDecoder(bytes.NewReader(cp.State))
			dec.DisallowUnknownFields()
			var legacy legacyState
			if err := dec.Decode(&legacy); err != nil {
				return fmt.Errorf("checkpoint %d (step %d): %w", cp.Seq, cp.Step, err)
			}
		} else {
			_ = c.Event(ctx, "lesson.used", fmt.Sprintf("following %d lesson(s): reading the checkpoint back as it was written", len(used)), map[string]any{"lessons": used})
		}
	}
	if err := json.Unmarshal(cp.State, st); err != nil {
		return fmt.Errorf("checkpoint %d holds no deploy state: %w", cp.Seq, err)
	}
	return nil
}

// ClassAPIContract is the lesson class (the reflection's diagnosis) that
// tells the deployer the world's API changed under it: it then corrects
// refused requests from the world's errors, as it does without --give-up.
const ClassAPIContract = "api_contract_change"

func deploy(ctx context.Context, c *agent.Client, o deployOptions, out io.Writer) error {
	naive, delay := o.naive, o.delay
	info, err := c.Run(ctx)
	if err != nil {
		return fmt.Errorf("read run: %w", err)
	}
	var task DeployTask
	if err := json.Unmarshal(info.Task, &task); err != nil {
		return fmt.Errorf("task is not a deployment: %w", err)
	}
	var st deployState
	step := 0
	if !naive {
		cp, err := c.Resume(ctx)
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		step = cp.Step
		if cp.Seq > 0 {
			if err := readState(ctx, c, o, info, cp, &st); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(out, "attempt %d: starting after step %d of %d\n", info.Attempt, step, deploySteps)
	if step > 0 {
		_ = c.Event(ctx, "progress", fmt.Sprintf("resumed after step %d", step), nil)
	}
	giveUp := o.giveUp
	badStep4 := o.flaky && coin()
	if giveUp && !o.ignoreLessons {
		// A lesson that says the API changed makes it adapt; it says which
		// lessons it used.
		var used []string
		for _, l := range info.Lessons {
			if l.Class == ClassAPIContract {
				giveUp, used = false, append(used, l.ID)
			}
		}
		if len(used) > 0 {
			_ = c.Event(ctx, "lesson.used", fmt.Sprintf("following %d lesson(s): correcting refused requests from the world's errors", len(used)), map[string]any{"lessons": used})
		}
	}
	p := &planner{c: c}
	ad := &adapter{c: c, naive: naive, giveUp: giveUp, careless: o.careless, api: &st.API, advise: p.advise}
	retried := false
	if len(st.Plan) != deploySteps {
		// The model plans the deployment; the plan is kept in the
		// checkpoint, so it is asked for once per run (again only when an
		// attempt died before its first checkpoint).
		plan, err := p.plan(ctx, task)
		switch {
		case errors.Is(err, errNoModel):
			_ = c.Event(ctx, "progress", err.Error()+": following the built-in plan", nil)
			plan = builtinPlan(task)
		case err != nil:
			return fmt.Errorf("plan: %w", err)
		}
		st.Plan = plan
	}
	arg := func(i int, name string) any { return st.Plan[i].Args[name] }
	effect := func(kind string, args map[string]any) (json.RawMessage, error) {
		out, err := ad.act(ctx, kind, args)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
	for step < deploySteps {
		next := step + 1
		if delay > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(delay):
			}
		}
		var result json.RawMessage
		switch next {
		case 1:
			netArgs := map[string]any{"name": arg(0, "name")}
			if o.randomNet {
				netArgs["name"] = fmt.Sprintf("%v-%s", netArgs["name"], randomTag())
			}
			result, err = effect(cloud.KindCreateNetwork, netArgs)
			if err == nil {
				st.NetworkID, err = field(result, "id")
			}
		case 2:
			result, err = effect(cloud.KindCreateDatabase, map[string]any{"name": arg(1, "name"), "network_id": st.NetworkID})
			if err == nil {
				st.DatabaseID, err = field(result, "id")
			}
		case 3:
			_, err = effect(cloud.KindRunMigration, map[string]any{"database_id": st.DatabaseID, "version": arg(2, "version")})
			st.Migrated = task.Migration
		case 4:
			image := arg(3, "image")
			if badStep4 {
				image = "" // the flaky agent's slip
			}
			result, err = effect(cloud.KindDeployService, map[string]any{"name": arg(3, "name"), "image": image, "database_id": st.DatabaseID})
			if err == nil {
				st.Endpoint, err = field(result, "endpoint")
			}
		case 5:
			_, err = effect(cloud.KindSetDNS, map[string]any{"host": arg(4, "host"), "target": st.Endpoint})
			st.DNS = task.DNS
		}
		var refused *errRefused
		if errors.As(err, &refused) && o.blindRetry && !retried {
			// The jagged model's move: the same request again, under a new
			// key of its own, as if nothing had been said.
			retried = true
			_ = c.Event(ctx, "retry", fmt.Sprintf("step %d refused (%v): retrying it unchanged", next, refused), nil)
			continue
		}
		var denied *errDenied
		if errors.As(err, &denied) {
			// The gate denied the step: it did not run. The agent says so
			// and stops; the harness decides whether another attempt — one
			// handed a lesson — goes on.
			claims := map[string]any{"step": next, "kind": denied.kind, "denied": denied.Error()}
			if err := c.Done(ctx, protocol.OutcomeFailure, fmt.Sprintf("step %d: %v", next, denied), claims); err != nil {
				return fmt.Errorf("done: %w", err)
			}
			fmt.Fprintf(out, "step %d denied by the gate; reporting failure: %v\n", next, denied)
			return nil
		}
		if errors.As(err, &refused) {
			// It does not adapt: it says so, and stops.
			claims := map[string]any{"step": next, "kind": refused.kind, "error": refused.err}
			if err := c.Done(ctx, protocol.OutcomeFailure, fmt.Sprintf("step %d: %v", next, refused), claims); err != nil {
				return fmt.Errorf("done: %w", err)
			}
			fmt.Fprintf(out, "step %d refused; giving up: %v\n", next, refused)
			return nil
		}
		if err != nil {
			return fmt.Errorf("step %d: %w", next, err)
		}
		if naive {
			// The naive variant writes its progress but never reads it
			// back, and does not guard against concurrent writers.
			if _, err := c.Checkpoint(ctx, next, st); err != nil && !errors.Is(err, agent.ErrConflict) {
				return fmt.Errorf("checkpoint step %d: %w", next, err)
			}
		} else if _, err := c.CheckpointClaims(ctx, next, st, stepClaims(next, task, arg)); err != nil {
			return fmt.Errorf("checkpoint step %d: %w", next, err)
		}
		fmt.Fprintf(out, "step %d done\n", next)
		step = next
	}
	claims := map[string]any{"dns": task.DNS, "endpoint": st.Endpoint, "database_id": st.DatabaseID}
	if o.report != "" {
		text := fmt.Sprintf("# Deployed %s\n\n- network: %s\n- database: %s\n- service endpoint: %s\n- DNS: %s\n",
			task.Service.Name, task.Network, st.DatabaseID, st.Endpoint, task.DNS)
		if err := os.WriteFile(o.report, []byte(text), 0o644); err != nil {
			return fmt.Errorf("write the report: %w", err)
		}
	}
	if err := c.Done(ctx, protocol.OutcomeSuccess, fmt.Sprintf("deployed %s behind %s", task.Service.Name, task.DNS), claims); err != nil {
		return fmt.Errorf("done: %w", err)
	}
	fmt.Fprintln(out, "deployment complete")
	return nil
}

// stepClaims is what the deployer claims of the world once step n is
// done (the cloud world's claims: cloud.ClaimExists, cloud.ClaimMigrated).
func stepClaims(n int, task DeployTask, arg func(i int, name string) any) map[string]any {
	exists := func(kind string, name any) map[string]any {
		return map[string]any{cloud.ClaimExists: map[string]any{"kind": kind, "name": name}}
	}
	switch n {
	case 1:
		return exists(cloud.ResNetwork, arg(0, "name"))
	case 2:
		return exists(cloud.ResDatabase, arg(1, "name"))
	case 3:
		return map[string]any{cloud.ClaimMigrated: map[string]any{"database": arg(1, "name"), "version": task.Migration}}
	case 4:
		return exists(cloud.ResService, arg(3, "name"))
	case 5:
		return exists(cloud.ResDNS, arg(4, "host"))
	}
	return nil
}

func field(raw json.RawMessage, name string) (string, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", fmt.Errorf("decode result: %w", err)
	}
	s, ok := m[name].(string)
	if !ok || s == "" {
		return "", fmt.Errorf("result has no %q: %s", name, raw)
	}
	return s, nil
}

// coin is a fair coin, fresh in every process.
func coin() bool {
	var b [1]byte
	_, _ = rand.Read(b[:])
	return b[0]&1 == 1
}

// randomTag is a label no two processes share.
func randomTag() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
