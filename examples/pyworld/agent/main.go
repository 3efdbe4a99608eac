// Command agent is the example agent of the inventory scenario
// (examples/pyworld/scenario.yaml): it stocks the warehouse's items and
// places the orders' reservations the task asks for, against the inventory
// world (examples/pyworld/inventory.py), one step per item and per
// reservation, checkpointing after each.
//
// Well-behaved (the default), it resumes from its last checkpoint and sends
// every effect under a key derived from the checkpointed step (the SDK's
// "step-3/0"), so after a restart it goes on where it stopped and a request
// it sent just before dying is answered from the harness's record instead
// of running twice. When the world's API moves to v2 and refuses a request
// with field_renamed, it renames the argument as the error's details say
// and sends the corrected request under a new key.
//
// With --naive (or INVENTORY_AGENT_NAIVE=1) it is the deliberately broken
// variant: it sends no idempotency keys and never reads its checkpoint back,
// so after a restart it starts over and stocks and reserves everything
// again — duplicates the harness's no-duplicate-effects invariant catches.
//
// Build it as a static binary next to the scenario:
//
//	CGO_ENABLED=0 go build -o examples/pyworld/bin/inventory-agent ./examples/pyworld/agent
//
// Exit codes: 0 finished (whatever outcome it reported), 1 failed, 2 bad
// usage or no harness to talk to, 3 fenced by a newer attempt.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/overnight-dev/overnight/sandbox/agent"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// Effect kinds of the inventory world.
const (
	kindAddItem = "inventory.add_item"
	kindReserve = "inventory.reserve"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
	exitFenced = 3
)

// envNaive turns the naive variant on, as --naive does.
const envNaive = "INVENTORY_AGENT_NAIVE"

// Task is the scenario's task: what to stock and what to reserve. The
// inventory world's goal judges the same object.
type Task struct {
	Items        []Item        `json:"items"`
	Reservations []Reservation `json:"reservations"`
}

// Item is an item to stock.
type Item struct {
	SKU      string `json:"sku"`
	Name     string `json:"name"`
	Quantity int    `json:"quantity"`
}

// Reservation is stock to reserve for an order.
type Reservation struct {
	Order    string `json:"order"`
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// progress is what the agent checkpoints after each step.
type progress struct {
	// IDs are the world's ids of what each step made, in step order.
	IDs []string `json:"ids"`
	// Renamed is what the agent learned of the world's API from its
	// field_renamed errors: argument -> its new name.
	Renamed map[string]string `json:"renamed,omitempty"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is the agent's whole process: flags, the gateway, the work, the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("inventory-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	naive := fs.Bool("naive", os.Getenv(envNaive) == "1", "send no idempotency keys and start over on every restart (deliberately broken; also $"+envNaive+"=1)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	c, err := agent.FromEnv()
	if err != nil {
		fmt.Fprintf(stderr, "inventory-agent: %v\n", err)
		return exitUsage
	}
	w := &worker{c: c, naive: *naive, out: stdout}
	if err := w.run(ctx); err != nil {
		fmt.Fprintf(stderr, "inventory-agent: %v\n", err)
		if errors.Is(err, agent.ErrFenced) {
			return exitFenced
		}
		return exitFailed
	}
	return exitOK
}

type worker struct {
	c     *agent.Client
	naive bool
	out   io.Writer
	st    progress
}

// step is one unit of work: one effect, then a checkpoint.
type step struct {
	kind string
	args map[string]any
	what string
}

func plan(t Task) []step {
	var steps []step
	for _, it := range t.Items {
		steps = append(steps, step{kindAddItem, map[string]any{"sku": it.SKU, "name": it.Name, "quantity": it.Quantity},
			fmt.Sprintf("stock %d of %s", it.Quantity, it.SKU)})
	}
	for _, r := range t.Reservations {
		steps = append(steps, step{kindReserve, map[string]any{"sku": r.SKU, "quantity": r.Quantity, "order": r.Order},
			fmt.Sprintf("reserve %d of %s for %s", r.Quantity, r.SKU, r.Order)})
	}
	return steps
}

func (w *worker) run(ctx context.Context) error {
	info, err := w.c.Run(ctx)
	if err != nil {
		return fmt.Errorf("read run: %w", err)
	}
	var task Task
	if err := json.Unmarshal(info.Task, &task); err != nil {
		return fmt.Errorf("task is not {items, reservations}: %w", err)
	}
	steps := plan(task)
	if len(steps) == 0 {
		return fmt.Errorf("task names no items and no reservations: %s", info.Task)
	}
	done := 0
	if !w.naive {
		// The well-behaved agent picks up where its last checkpoint says.
		cp, err := w.c.Resume(ctx)
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		if cp.Seq > 0 {
			if err := json.Unmarshal(cp.State, &w.st); err != nil {
				return fmt.Errorf("checkpoint %d holds no inventory progress: %w", cp.Seq, err)
			}
			done = cp.Step
		}
	}
	fmt.Fprintf(w.out, "attempt %d: %d of %d steps done\n", info.Attempt, done, len(steps))
	for done < len(steps) {
		s := steps[done]
		res, err := w.act(ctx, s.kind, s.args)
		var refused *refusedError
		if errors.As(err, &refused) {
			// A permanent refusal this agent cannot correct (no stock, a bad
			// sku): it says so and stops, rather than claim success.
			claims := map[string]any{"step": done + 1, "kind": s.kind, "error": refused.err}
			if err := w.c.Done(ctx, protocol.OutcomeFailure, fmt.Sprintf("step %d (%s): %v", done+1, s.what, refused), claims); err != nil {
				return fmt.Errorf("done: %w", err)
			}
			fmt.Fprintf(w.out, "step %d refused: %v\n", done+1, refused)
			return nil
		}
		if err != nil {
			return fmt.Errorf("step %d (%s): %w", done+1, s.what, err)
		}
		id, _ := res["id"].(string)
		w.st.IDs = append(w.st.IDs, id)
		if _, err := w.c.Checkpoint(ctx, done+1, w.st); err != nil && !(w.naive && errors.Is(err, agent.ErrConflict)) {
			return fmt.Errorf("checkpoint step %d: %w", done+1, err)
		}
		done++
		fmt.Fprintf(w.out, "step %d done: %s (%s)\n", done, s.what, id)
	}
	claims := map[string]any{"ids": w.st.IDs}
	summary := fmt.Sprintf("stocked %d item(s) and placed %d reservation(s)", len(task.Items), len(task.Reservations))
	if err := w.c.Done(ctx, protocol.OutcomeSuccess, summary, claims); err != nil {
		return fmt.Errorf("done: %w", err)
	}
	fmt.Fprintln(w.out, summary)
	return nil
}

// refusedError is a permanent refusal by the world that the agent cannot correct.
type refusedError struct {
	kind string
	err  *protocol.EffectError
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("%s refused: %s (%s)", e.kind, e.err.Message, e.err.Code)
}

// maxTries bounds the requests one step sends: corrections and retries.
const maxTries = 8

// act sends one effect until the world does it: it renames arguments the
// world says were renamed (a corrected request is a new effect, under a
// new key) and retries transient failures under the same key (the harness
// reconciles it first, so it runs at most once).
func (w *worker) act(ctx context.Context, kind string, args map[string]any) (map[string]any, error) {
	retryKey := "" // the key of a request to send again as it was
	for try := 1; try <= maxTries; try++ {
		a := w.renamed(args)
		var res protocol.EffectResult
		var err error
		switch {
		case w.naive:
			res, err = w.c.EffectUnkeyed(ctx, kind, a)
		case retryKey != "":
			res, err = w.c.EffectWithKey(ctx, retryKey, kind, a)
		default:
			retryKey = w.c.NextKey()
			res, err = w.c.Effect(ctx, kind, a)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
		switch {
		case res.Status == protocol.StatusDone:
			var out map[string]any
			if err := json.Unmarshal(res.Result, &out); err != nil {
				return nil, fmt.Errorf("%s: decode result %s: %w", kind, res.Result, err)
			}
			return out, nil
		case res.Error == nil:
			return nil, fmt.Errorf("%s: status %s without an error", kind, res.Status)
		case res.Error.Transient:
			_ = w.c.Event(ctx, "retry", fmt.Sprintf("%s: %s (%s); retrying", kind, res.Error.Message, res.Error.Code), nil)
			if _, err := w.c.Sleep(ctx, time.Duration(try)*time.Second); err != nil {
				return nil, fmt.Errorf("%s: wait to retry: %w", kind, err)
			}
			continue // under the same key
		case res.Error.Code == "field_renamed" && w.learn(res.Error.Details):
			_ = w.c.Event(ctx, "adapt", fmt.Sprintf("%s: %s; correcting the request", kind, res.Error.Message), res.Error)
			retryKey = "" // a corrected request is a new effect
			continue
		default:
			return nil, &refusedError{kind: kind, err: res.Error}
		}
	}
	return nil, fmt.Errorf("%s: not done after %d requests", kind, maxTries)
}

// learn records the renames of a field_renamed error's details
// ({"renamed": {"quantity": "count"}}); false when they teach nothing new.
func (w *worker) learn(details json.RawMessage) bool {
	var d struct {
		Renamed map[string]string `json:"renamed"`
	}
	if json.Unmarshal(details, &d) != nil {
		return false
	}
	learned := false
	for from, to := range d.Renamed {
		if to != "" && w.st.Renamed[from] != to {
			if w.st.Renamed == nil {
				w.st.Renamed = map[string]string{}
			}
			w.st.Renamed[from], learned = to, true
		}
	}
	return learned
}

// renamed returns args with the learned renames applied.
func (w *worker) renamed(args map[string]any) map[string]any {
	out := make(map[string]any, len(args))
	for k, v := range args {
		if to, ok := w.st.Renamed[k]; ok {
			k = to
		}
		out[k] = v
	}
	return out
}
