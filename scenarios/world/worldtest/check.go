package worldtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// need is what a rule needs of the world before it can run.
type need uint8

const (
	needExamples  need = 1 << iota // examples in describe, which succeed (the examples rule)
	needWrites                     // a place to apply requests: an instance, or the world itself if allowed
	needInstances                  // the instances capability
	needCommand                    // a world the kit started itself
)

// rule is one promise of the protocol; it returns what it saw, or why it
// failed (an error), or why it could not be checked (a *skipped).
type rule struct {
	name  string
	needs need
	run   func(k *kit, ctx context.Context) (string, error)
}

// skipped is a rule that found, once under way, that it cannot be checked.
type skipped struct{ why string }

func (s *skipped) Error() string { return s.why }

var rules = []rule{
	{"describe", 0, (*kit).describeRule},
	{"examples", needExamples | needWrites, (*kit).examplesRule},
	{"same-key-twice", needExamples | needWrites, (*kit).sameKeyTwiceRule},
	{"lookup-after-apply", needExamples | needWrites, (*kit).lookupAfterApplyRule},
	{"lookup-unknown", 0, (*kit).lookupUnknownRule},
	{"instance-restore", needExamples | needInstances, (*kit).instanceRestoreRule},
	{"instance-isolation", needExamples | needInstances, (*kit).instanceIsolationRule},
	{"error-shape", 0, (*kit).errorShapeRule},
	{"crash-reconciled", needExamples | needCommand, (*kit).crashRule},
}

// Rules lists the rules' names, in the order Check runs them.
func Rules() []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.name
	}
	return out
}

// kit is one check under way.
type kit struct {
	opts   Options
	base   string
	client *http.Client
	nonce  string
	clock  int // requests made, for now()

	desc    remote.Description
	descErr error // describe did not answer a description
	own     bool  // the kit started the world: it may write to it
	proc    *worldProc
	command []string
	data    string

	examplesOK bool   // the examples rule passed
	current    string // the rule under way, for keys and names
	instances  []string
	names      int
}

// Check runs every rule against the world served at baseURL (e.g.
// "http://127.0.0.1:8088") and reports a result per rule.
// crash-reconciled needs a world the kit starts itself: CheckCommand.
func Check(ctx context.Context, baseURL string, opts Options) Report {
	opts = opts.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	k := newKit(strings.TrimRight(baseURL, "/"), opts)
	return k.check(ctx)
}

func newKit(base string, opts Options) *kit {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &kit{
		opts:   opts,
		base:   base,
		client: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}},
		nonce:  hex.EncodeToString(b[:]),
	}
}

// check describes the world, then runs the rules.
func (k *kit) check(ctx context.Context) Report {
	defer k.client.CloseIdleConnections()
	report := Report{URL: k.base, Command: k.command}
	k.describe(ctx)
	report.World = k.desc.Name
	var te *transportError
	if errors.As(k.descErr, &te) {
		report.Err = fmt.Errorf("%w at %s: %v", ErrNoAnswer, k.base, k.descErr)
		report.Error = report.Err.Error()
		for _, r := range rules {
			report.Results = append(report.Results, Result{Rule: r.name, Verdict: Skip, Evidence: "not run: nothing answers at " + k.base})
		}
		return report
	}
	for _, r := range rules {
		if why, refused := k.cannot(r); why != "" {
			report.Results = append(report.Results, Result{Rule: r.name, Verdict: Skip, Evidence: why})
			if refused {
				report.Err = fmt.Errorf("%w, so the rules that apply requests would write to the world itself (keys under worldtest/%s/); give --allow-writes (Options.AllowWrites) to let them",
					ErrWritesRefused, k.nonce)
			}
			continue
		}
		report.Results = append(report.Results, k.run(ctx, r))
	}
	if ctx.Err() != nil && report.Err == nil {
		report.Err = fmt.Errorf("the check was cut short: %w", context.Cause(ctx))
	}
	if report.Err != nil {
		report.Error = report.Err.Error()
	}
	return report
}

// run runs one rule and drops the instances it made.
func (k *kit) run(ctx context.Context, r rule) Result {
	res := Result{Rule: r.name}
	k.current, k.names = r.name, 0
	evidence, err := r.run(k, ctx)
	dropErr := k.dropInstances(ctx)
	var skip *skipped
	switch {
	case errors.As(err, &skip):
		res.Verdict, res.Evidence = Skip, skip.why
	case err != nil:
		res.Verdict, res.Evidence = Fail, err.Error()
	case dropErr != nil:
		res.Verdict, res.Evidence = Fail, dropErr.Error()
	default:
		res.Verdict, res.Evidence = Pass, evidence
	}
	if res.Verdict == Fail && ctx.Err() != nil {
		res.Evidence += fmt.Sprintf(" (the check ran out of time: Options.Timeout, --timeout, is %s)", k.opts.Timeout)
	}
	if r.name == "examples" {
		k.examplesOK = res.Verdict == Pass
	}
	return res
}

// cannot says why rule r cannot run on this world ("": it can), and
// whether that is for want of Options.AllowWrites.
func (k *kit) cannot(r rule) (why string, writesRefused bool) {
	switch {
	case r.name != "describe" && k.descErr != nil:
		return "not run: describe answered no description, so the kit knows nothing of the world (see describe)", false
	case r.needs&needCommand != 0 && k.proc == nil:
		return "not run: only when the kit starts the world itself (overnight world check -- COMMAND ARGS...) can it kill and restart it", false
	case r.needs&needExamples != 0 && len(k.desc.Examples) == 0:
		return "not run: describe gives no examples (requests that succeed in order on a fresh instance), so the kit has nothing to apply; add \"examples\" to describe (docs/world-protocol.md)", false
	case r.needs&needInstances != 0 && !k.desc.Capabilities.Instances:
		return "not run: the world does not declare the instances capability", false
	case r.needs&needWrites != 0 && !k.desc.Capabilities.Instances && !k.own && !k.opts.AllowWrites:
		return "not run: the world has no instances, so this rule would write to the world itself (keys under worldtest/" + k.nonce + "/): give --allow-writes (Options.AllowWrites) to let it", true
	case r.needs&needExamples != 0 && r.name != "examples" && !k.examplesOK:
		return "not run: the world's examples do not succeed in order on a fresh instance (see examples), so there is nothing to build on", false
	}
	return "", false
}

// key is a key of the kit's own: worldtest/<nonce>/<rule>/<what>.
func (k *kit) key(what string) string {
	return fmt.Sprintf("worldtest/%s/%s/%s", k.nonce, k.current, what)
}

// fresh returns a fresh place to apply requests to: a new empty instance
// (dropped when the rule ends), or, on a world without instances, the
// world itself ("").
func (k *kit) fresh(ctx context.Context) (string, error) {
	if !k.desc.Capabilities.Instances {
		return "", nil
	}
	return k.newInstance(ctx, nil)
}

// newInstance makes an instance of the kit's own, restored from ledger
// (none: empty), dropped when the rule ends.
func (k *kit) newInstance(ctx context.Context, ledger json.RawMessage) (string, error) {
	k.names++
	name := fmt.Sprintf("worldtest-%s-%s-%d", k.nonce, k.current, k.names)
	req := map[string]any{"instance": name}
	if ledger != nil {
		req["ledger"] = ledger
	}
	var resp remote.CreateInstanceResponse
	if err := k.call(ctx, remote.PathCreateInstance, req, &resp); err != nil {
		return "", fmt.Errorf("create_instance %s: %w", name, err)
	}
	k.instances = append(k.instances, name)
	if resp.Instance != "" && resp.Instance != name {
		return name, fmt.Errorf("create_instance %s: answered instance %q, not the name asked for", name, resp.Instance)
	}
	return name, nil
}

// dropInstances drops the instances the rule made.
func (k *kit) dropInstances(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.opts.CallTimeout)
	defer cancel()
	var errs []error
	for _, name := range k.instances {
		var resp json.RawMessage
		if err := k.call(ctx, remote.PathDropInstance, remote.InstanceRequest{Instance: name}, &resp); err != nil {
			errs = append(errs, fmt.Errorf("drop_instance %s: %w", name, err))
		}
	}
	k.instances = nil
	return errors.Join(errs...)
}
