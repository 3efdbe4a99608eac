package worldtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// applyExamples applies every example in order on inst, each of which
// must succeed.
func (k *kit) applyExamples(ctx context.Context, inst string) error {
	for i, ex := range k.desc.Examples {
		if _, err := k.applyDone(ctx, inst, k.key(fmt.Sprint(i+1)), ex, k.now()); err != nil {
			return fmt.Errorf("example %d: %w", i+1, err)
		}
	}
	return nil
}

// rawLedger is the instance's ledger entries as the world answered them.
func (k *kit) rawLedger(ctx context.Context, inst string) ([]json.RawMessage, error) {
	var resp struct {
		Entries []json.RawMessage `json:"entries"`
	}
	err := k.call(ctx, remote.PathLedger, remote.InstanceRequest{Instance: inst}, &resp)
	return resp.Entries, err
}

// instanceRestoreRule: an instance created from another's ledger has its
// state (and ledger); a doctored ledger is refused 409 replay_differs,
// and leaves no instance.
func (k *kit) instanceRestoreRule(ctx context.Context) (string, error) {
	src, err := k.newInstance(ctx, nil)
	if err != nil {
		return "", err
	}
	if err := k.applyExamples(ctx, src); err != nil {
		return "", err
	}
	event := ""
	if k.desc.Capabilities.Versions && len(k.desc.Versions) > 1 {
		to := k.desc.Versions[1].Name
		var resp remote.SetVersionResponse
		if err := k.call(ctx, remote.PathSetVersion, remote.SetVersionRequest{Instance: src, Version: to, Now: k.now()}, &resp); err != nil {
			return "", fmt.Errorf("set_version %s on instance %s: %w", to, src, err)
		}
		event = fmt.Sprintf(" and a switch to API %s", to)
	}
	entries, err := k.rawLedger(ctx, src)
	if err != nil {
		return "", err
	}
	want, err := k.state(ctx, src)
	if err != nil {
		return "", err
	}
	ledger, err := json.Marshal(entries)
	if err != nil {
		return "", err
	}
	restored, err := k.newInstance(ctx, ledger)
	if err != nil {
		return "", fmt.Errorf("restore an instance from the ledger of instance %s (%d entries, the examples%s): %w", src, len(entries), event, err)
	}
	got, err := k.state(ctx, restored)
	if err != nil {
		return "", err
	}
	if !sameJSON(got, want) {
		return "", fmt.Errorf("instance %s, restored from the ledger of instance %s, has the state %s; the source has %s", restored, src, jsonText(got), jsonText(want))
	}
	gotLedger, err := k.rawLedger(ctx, restored)
	if err != nil {
		return "", err
	}
	if !sameJSON(gotLedger, entries) {
		return "", fmt.Errorf("instance %s, restored from the ledger of instance %s, has the ledger %s; the source has %s (restoring applies each entry under its key at its time, answered as recorded)",
			restored, src, jsonText(gotLedger), jsonText(entries))
	}

	doctored, which, err := doctor(entries)
	if err != nil {
		return "", err
	}
	k.names++
	name := fmt.Sprintf("worldtest-%s-%s-%d", k.nonce, k.current, k.names)
	body, err := json.Marshal(map[string]any{"instance": name, "ledger": doctored})
	if err != nil {
		return "", err
	}
	a, err := k.send(ctx, http.MethodPost, remote.PathCreateInstance, body)
	if err != nil {
		return "", err
	}
	if a.status == http.StatusOK {
		k.instances = append(k.instances, name)
	}
	if problem := refusal(a, http.StatusConflict, remote.CodeReplayDiffers); problem != "" {
		return "", fmt.Errorf("create_instance %s from a doctored ledger (entry %d's outcome replaced by a failure the world never answered): %s", name, which, problem)
	}
	a, err = k.send(ctx, http.MethodPost, remote.PathState, mustJSON(remote.InstanceRequest{Instance: name}))
	if err != nil {
		return "", err
	}
	if problem := refusal(a, http.StatusNotFound, remote.CodeUnknownInstance); problem != "" {
		if a.status == http.StatusOK {
			k.instances = append(k.instances, name)
		}
		return "", fmt.Errorf("create_instance %s from a doctored ledger was refused, and then state of %s %s: a refused restore leaves no instance", name, name, problem)
	}
	return fmt.Sprintf("an instance restored from a ledger of %d entries (the examples%s) has the source's state and ledger; a doctored ledger (entry %d's outcome changed) was refused 409 replay_differs, leaving no instance",
		len(entries), event, which), nil
}

// doctor returns entries with the outcome of the first effect's entry
// replaced by a failure no world answered, and that entry's seq.
func doctor(entries []json.RawMessage) ([]json.RawMessage, int64, error) {
	out := make([]json.RawMessage, len(entries))
	copy(out, entries)
	for i, raw := range entries {
		var e map[string]any
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, 0, fmt.Errorf("ledger entry %d: %s is not an object: %v", i, excerpt(raw), err)
		}
		if key, _ := e["key"].(string); key == "" {
			continue // a world event
		}
		e["outcome"] = map[string]any{"status": "failed", "error": map[string]any{
			"code": "worldtest_doctored", "message": "the conformance kit changed this outcome", "status": 400}}
		b, err := json.Marshal(e)
		if err != nil {
			return nil, 0, err
		}
		out[i] = b
		seq, _ := e["seq"].(float64)
		return out, int64(seq), nil
	}
	return nil, 0, fmt.Errorf("the ledger of the examples has no effect's entry to doctor: %s", excerpt(mustJSON(entries)))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("worldtest: encode %T: %v", v, err))
	}
	return b
}

// instanceIsolationRule: what is applied to one instance changes neither
// another instance nor the world itself.
func (k *kit) instanceIsolationRule(ctx context.Context) (string, error) {
	realState, err := k.state(ctx, "")
	if err != nil {
		return "", err
	}
	realLedger, err := k.rawLedger(ctx, "")
	if err != nil {
		return "", err
	}
	x, err := k.newInstance(ctx, nil)
	if err != nil {
		return "", err
	}
	y, err := k.newInstance(ctx, nil)
	if err != nil {
		return "", err
	}
	y0, err := k.state(ctx, y)
	if err != nil {
		return "", err
	}
	if err := k.applyExamples(ctx, x); err != nil {
		return "", err
	}
	x1, err := k.state(ctx, x)
	if err != nil {
		return "", err
	}
	if sameJSON(x1, y0) {
		return "", &skipped{"the examples change no state, so the isolation of instances cannot be shown"}
	}
	y1, err := k.state(ctx, y)
	if err != nil {
		return "", err
	}
	if !sameJSON(y1, y0) {
		return "", fmt.Errorf("the examples applied to instance %s changed instance %s: its state was %s, and is %s", x, y, jsonText(y0), jsonText(y1))
	}
	yLedger, err := k.rawLedger(ctx, y)
	if err != nil {
		return "", err
	}
	if len(yLedger) != 0 {
		return "", fmt.Errorf("the examples applied to instance %s reached the ledger of instance %s, made empty: %s", x, y, jsonText(yLedger))
	}
	if _, err := k.applyDone(ctx, y, k.key("y-1"), k.desc.Examples[0], k.now()); err != nil {
		return "", err
	}
	x2, err := k.state(ctx, x)
	if err != nil {
		return "", err
	}
	if !sameJSON(x2, x1) {
		return "", fmt.Errorf("example 1 applied to instance %s changed instance %s: its state was %s, and is %s", y, x, jsonText(x1), jsonText(x2))
	}
	realNow, err := k.state(ctx, "")
	if err != nil {
		return "", err
	}
	realLedgerNow, err := k.rawLedger(ctx, "")
	if err != nil {
		return "", err
	}
	if !sameJSON(realNow, realState) || len(realLedgerNow) != len(realLedger) {
		return "", fmt.Errorf("applying to instances %s and %s changed the world itself: its state was %s with %d ledger entries, and is %s with %d (or something else is using the world)",
			x, y, jsonText(realState), len(realLedger), jsonText(realNow), len(realLedgerNow))
	}
	return fmt.Sprintf("the examples applied to one instance changed neither another instance nor the world itself (%d ledger entries before and after), and the other's writes left the first alone", len(realLedger)), nil
}

// errorShapeRule: refused calls answer the documented status and
// ErrorBody. It writes nothing.
func (k *kit) errorShapeRule(ctx context.Context) (string, error) {
	absent := fmt.Sprintf("worldtest-%s-absent", k.nonce)
	type probe struct {
		what         string
		method, path string
		body         []byte
		status       int
		code         string
	}
	probes := []probe{
		{"state of an instance that does not exist", http.MethodPost, remote.PathState, mustJSON(remote.InstanceRequest{Instance: absent}), http.StatusNotFound, remote.CodeUnknownInstance},
		{"lookup on an instance that does not exist", http.MethodPost, remote.PathLookup, mustJSON(remote.LookupRequest{Instance: absent, Key: k.key("x")}), http.StatusNotFound, remote.CodeUnknownInstance},
		{"apply with a body cut short", http.MethodPost, remote.PathApply, []byte(`{"instance": "", "key": "` + k.key("bad-body") + `", "kind": `), http.StatusBadRequest, remote.CodeBadRequest},
		{"a call that does not exist", http.MethodPost, "/v1/worldtest-no-such-call", []byte(`{}`), http.StatusNotFound, remote.CodeNotFound},
		{"a GET of apply", http.MethodGet, remote.PathApply, nil, http.StatusMethodNotAllowed, remote.CodeMethodNotAllowed},
	}
	c := k.desc.Capabilities
	if !c.Goal {
		probes = append(probes, probe{"goal, which the world does not declare", http.MethodPost, remote.PathGoal, []byte(`{"instance": "", "task": {}}`), http.StatusNotImplemented, remote.CodeUnsupported})
	}
	if !c.Duplicates {
		probes = append(probes, probe{"duplicates, which the world does not declare", http.MethodPost, remote.PathDuplicates, []byte(`{"instance": ""}`), http.StatusNotImplemented, remote.CodeUnsupported})
	}
	if !c.Versions {
		probes = append(probes, probe{"set_version, which the world does not declare", http.MethodPost, remote.PathSetVersion,
			mustJSON(remote.SetVersionRequest{Instance: "", Version: "worldtest-no-such-version", Now: k.opts.Now}), http.StatusNotImplemented, remote.CodeUnsupported})
	}
	if !c.Instances {
		probes = append(probes, probe{"drop_instance, which the world does not declare", http.MethodPost, remote.PathDropInstance, mustJSON(remote.InstanceRequest{Instance: absent}), http.StatusNotImplemented, remote.CodeUnsupported})
	}
	var problems, seen []string
	for _, p := range probes {
		a, err := k.send(ctx, p.method, p.path, p.body)
		if err != nil {
			return "", err
		}
		if problem := refusal(a, p.status, p.code); problem != "" {
			problems = append(problems, fmt.Sprintf("%s (%s %s): %s", p.what, p.method, p.path, problem))
			continue
		}
		seen = append(seen, fmt.Sprintf("%d %s", p.status, p.code))
	}
	if len(problems) > 0 {
		return "", errors.New(strings.Join(problems, "; "))
	}
	return fmt.Sprintf("%d refused calls answered the documented status and {\"error\": {code, message}}: %s", len(seen), strings.Join(seen, ", ")), nil
}
