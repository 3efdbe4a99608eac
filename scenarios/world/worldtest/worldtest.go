// Package worldtest is the conformance kit of the world protocol
// (docs/world-protocol.md): one call a world's author runs against their
// world, in any language, and a line per rule of the protocol it keeps or
// breaks, as database/sql's driver tests and testing/fstest do for
// theirs. `overnight world check` is its command line.
//
//	report := worldtest.Check(ctx, "http://127.0.0.1:8088", worldtest.Options{})
//	for _, r := range report.Results { fmt.Println(r) }
//
// or worldtest.CheckCommand(ctx, []string{"python3", "inventory.py"}, opts)
// to have the kit start the world itself, as the harness starts a command
// world (OVERNIGHT_WORLD_ADDR, OVERNIGHT_WORLD_DATA): then it can also
// SIGKILL it and check what survives (crash-reconciled). In a Go test,
// worldtest.Test(t, url, opts).
//
// What the kit writes, and where. It applies the requests the world's
// describe gives as examples (requests that succeed in order on a fresh
// instance), under keys beginning worldtest/<nonce>/. On a world that
// offers instances it writes only to instances it makes (named
// worldtest-<nonce>-...) and drops them; the world itself (instance "") is
// only read. On a world without instances it would have to write to the
// world itself: it refuses to, and says so, unless Options.AllowWrites
// (--allow-writes). A world the kit starts itself is its own, on a data
// directory of its own: it writes to it freely.
//
// The kit reads the world itself (its state and ledger) to check that
// instances leave it alone, so the world must not be in use by a run
// while it is checked.
package worldtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// Verdict is a rule's outcome.
type Verdict string

// The verdicts of a rule.
const (
	// Pass: the world keeps the rule; the evidence says what was seen.
	Pass Verdict = "pass"
	// Fail: the world breaks the rule; the evidence says how.
	Fail Verdict = "fail"
	// Skip: the rule could not be checked (the world does not declare
	// the capability it is about, gives no examples, ...); the evidence
	// says why.
	Skip Verdict = "skip"
)

// Result is one rule's outcome and its evidence.
type Result struct {
	Rule     string  `json:"rule"`
	Verdict  Verdict `json:"verdict"`
	Evidence string  `json:"evidence"`
}

// String is the result's line: "PASS same-key-twice: ...".
func (r Result) String() string {
	return fmt.Sprintf("%s %s: %s", strings.ToUpper(string(r.Verdict)), r.Rule, r.Evidence)
}

// Errors a Report carries in Err.
var (
	// ErrNoAnswer: nothing answered at the world's URL (or the command
	// started exited, or never answered describe): no rule could run.
	ErrNoAnswer = errors.New("the world does not answer")
	// ErrWritesRefused: the world has no instances, so the rules that
	// apply requests would have written to the world itself; they were
	// not run (Options.AllowWrites lets them).
	ErrWritesRefused = errors.New("the world has no instances and writes to it were not allowed")
)

// Report is what Check found: a result per rule, in the order of Rules.
type Report struct {
	// URL is the world's base URL (for a command world, where it first
	// listened).
	URL string `json:"url"`
	// Command is the command the kit started the world with, if it did.
	Command []string `json:"command,omitempty"`
	// World is the name describe answered.
	World   string   `json:"world,omitempty"`
	Results []Result `json:"results"`
	// Err says why the check is incomplete: it wraps ErrNoAnswer,
	// ErrWritesRefused, or the context's error when the check was cut
	// short (Options.Timeout, a cancelled context). Nil when every rule
	// could run (or was skipped for a reason of the world's own, such as
	// a capability it lacks).
	Err error `json:"-"`
	// Error is Err's message, for JSON.
	Error string `json:"error,omitempty"`
}

// Failed is the results that failed.
func (r Report) Failed() []Result {
	var out []Result
	for _, x := range r.Results {
		if x.Verdict == Fail {
			out = append(out, x)
		}
	}
	return out
}

// Count is how many results have verdict v.
func (r Report) Count(v Verdict) int {
	n := 0
	for _, x := range r.Results {
		if x.Verdict == v {
			n++
		}
	}
	return n
}

// OK reports whether the check was complete and no rule failed (skipped
// rules are not failures: a world need not offer every capability).
func (r Report) OK() bool { return r.Err == nil && len(r.Failed()) == 0 }

// Options say how the kit checks a world. The zero value is usable.
type Options struct {
	// AllowWrites lets the kit write to the world itself (instance "")
	// when the world has no instances, under keys beginning
	// worldtest/<nonce>/. Default false: the rules that write are not
	// run, and Report.Err wraps ErrWritesRefused. Never needed for a
	// world with instances, nor for one the kit starts itself on a fresh
	// data directory.
	AllowWrites bool
	// Data is the data directory of a command world (its
	// OVERNIGHT_WORLD_DATA). Default: a temporary directory, removed
	// when the check ends. A directory that already holds files is
	// refused unless AllowWrites: the kit would write to that world.
	Data string
	// Dir is a command world's working directory. Default: the caller's.
	Dir string
	// Env are extra environment variables (K=V) for a command world, on
	// top of the caller's own (without its OVERNIGHT_ variables, as the
	// harness does).
	Env []string
	// Output receives a command world's stdout and stderr. Default:
	// nowhere (their end is quoted in errors).
	Output io.Writer
	// Timeout bounds the whole check. Default 3 minutes.
	Timeout time.Duration
	// CallTimeout bounds each call. Default 30 s, what the harness gives.
	CallTimeout time.Duration
	// StartTimeout bounds how long a command world may take to answer
	// describe after it starts. Default 30 s, what the harness gives.
	StartTimeout time.Duration
	// Now is the virtual time of the kit's first request; each next
	// request is a second later. Default 2025-01-01T00:00:00Z.
	Now time.Time
}

// Defaults of Options.
const (
	DefaultTimeout      = 3 * time.Minute
	DefaultCallTimeout  = 30 * time.Second
	DefaultStartTimeout = 30 * time.Second
)

// defaultNow is Options.Now's default.
var defaultNow = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.Now.IsZero() {
		o.Now = defaultNow
	}
	return o
}

// Test runs the kit against the world at baseURL as subtests of t, one per
// rule: a failed rule fails its subtest, a skipped one is skipped.
func Test(t *testing.T, baseURL string, opts Options) {
	t.Helper()
	report := Check(context.Background(), baseURL, opts)
	if report.Err != nil {
		t.Errorf("world check at %s: %v", baseURL, report.Err)
	}
	for _, r := range report.Results {
		t.Run(r.Rule, func(t *testing.T) {
			switch r.Verdict {
			case Skip:
				t.Skip(r.Evidence)
			case Fail:
				t.Error(r.Evidence)
			default:
				t.Log(r.Evidence)
			}
		})
	}
}
