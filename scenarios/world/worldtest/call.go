package worldtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"time"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// maxAnswer bounds an answer the kit reads (a ledger can be long).
const maxAnswer = 64 << 20

// answer is what the world answered to one HTTP request.
type answer struct {
	status int
	body   []byte
}

// transportError is a call that had no answer at all: the world cannot be
// reached, or did not answer in time.
type transportError struct {
	call string
	err  error
}

func (e *transportError) Error() string { return fmt.Sprintf("%s: no answer: %v", e.call, e.err) }
func (e *transportError) Unwrap() error { return e.err }

// send makes one HTTP request to the world: method, path and raw body.
func (k *kit) send(ctx context.Context, method, path string, body []byte) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, k.opts.CallTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, k.base+path, rd)
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return answer{}, &transportError{method + " " + path, err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return answer{}, &transportError{method + " " + path, fmt.Errorf("read the answer: %w", err)}
	}
	return answer{resp.StatusCode, b}, nil
}

// call POSTs req as JSON to path and decodes a 200 answer into out; any
// other answer is an error that names the call, the status and the body.
func (k *kit) call(ctx context.Context, path string, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("POST %s: encode the request: %w", path, err)
	}
	a, err := k.send(ctx, http.MethodPost, path, body)
	if err != nil {
		return err
	}
	if a.status != http.StatusOK {
		return fmt.Errorf("POST %s %s: answered %d: %s", path, body, a.status, excerpt(a.body))
	}
	if err := json.Unmarshal(a.body, out); err != nil {
		return fmt.Errorf("POST %s %s: answered 200 with %s, not the call's answer: %v", path, body, excerpt(a.body), err)
	}
	return nil
}

// excerpt is a body cut short for a message.
func excerpt(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 300 {
		return fmt.Sprintf("%s... (%d bytes)", b[:300], len(b))
	}
	if len(b) == 0 {
		return "an empty body"
	}
	return string(b)
}

// now is the virtual time of the kit's next request: a second after the
// one before.
func (k *kit) now() time.Time {
	k.clock++
	return k.opts.Now.Add(time.Duration(k.clock-1) * time.Second)
}

// apply applies c on instance inst under key at now and checks the answer's
// shape: an outcome done (without an error) or failed (with an error
// code), and a seq above 0.
func (k *kit) apply(ctx context.Context, inst, key string, c world.Call, now time.Time) (remote.ApplyResponse, error) {
	var resp remote.ApplyResponse
	err := k.call(ctx, remote.PathApply, remote.ApplyRequest{Instance: inst, Key: key, Kind: c.Kind, Args: c.Args, Now: now}, &resp)
	if err != nil {
		return resp, err
	}
	if problem := checkOutcome(resp.Outcome); problem != "" {
		return resp, fmt.Errorf("apply %s key %s%s: answered an outcome whose %s", c.Kind, key, on(inst), problem)
	}
	if resp.Seq <= 0 {
		return resp, fmt.Errorf("apply %s key %s%s: answered seq %d; want the seq of the ledger entry it made (1, 2, ...)", c.Kind, key, on(inst), resp.Seq)
	}
	return resp, nil
}

// applyDone applies c and requires it to succeed.
func (k *kit) applyDone(ctx context.Context, inst, key string, c world.Call, now time.Time) (remote.ApplyResponse, error) {
	resp, err := k.apply(ctx, inst, key, c, now)
	if err != nil {
		return resp, err
	}
	if resp.Outcome.Status != protocol.StatusDone {
		return resp, fmt.Errorf("apply %s %s key %s%s: answered %s; an example must succeed there", c.Kind, c.Args, key, on(inst), outcomeText(resp.Outcome))
	}
	return resp, nil
}

// checkOutcome says what is wrong with an outcome ("": nothing).
func checkOutcome(o world.Outcome) string {
	switch o.Status {
	case protocol.StatusDone:
		if o.Error != nil {
			return "status is done with an error"
		}
	case protocol.StatusFailed:
		if o.Error == nil || o.Error.Code == "" {
			return "status is failed without an error code"
		}
	default:
		return fmt.Sprintf("status is %q; want %q or %q", o.Status, protocol.StatusDone, protocol.StatusFailed)
	}
	return ""
}

// outcomeText is an outcome for a message.
func outcomeText(o world.Outcome) string {
	b, _ := json.Marshal(o)
	return string(b)
}

// on names an instance for a message: "" for the world itself.
func on(inst string) string {
	if inst == "" {
		return " on the world itself"
	}
	return " on instance " + inst
}

// lookupText is a lookup's answer for a message.
func lookupText(r remote.LookupResponse) string {
	if !r.Found && r.Outcome == nil {
		return "found=false"
	}
	return fmt.Sprintf("found=%v with %s", r.Found, jsonText(r.Outcome))
}

func (k *kit) lookup(ctx context.Context, inst, key string) (remote.LookupResponse, error) {
	var resp remote.LookupResponse
	err := k.call(ctx, remote.PathLookup, remote.LookupRequest{Instance: inst, Key: key}, &resp)
	return resp, err
}

func (k *kit) ledger(ctx context.Context, inst string) ([]world.LedgerEntry, error) {
	var resp remote.LedgerResponse
	err := k.call(ctx, remote.PathLedger, remote.InstanceRequest{Instance: inst}, &resp)
	return resp.Entries, err
}

// state is the instance's state, as the JSON it answered.
func (k *kit) state(ctx context.Context, inst string) (json.RawMessage, error) {
	var resp remote.StateResponse
	err := k.call(ctx, remote.PathState, remote.InstanceRequest{Instance: inst}, &resp)
	return resp.State, err
}

func (k *kit) duplicates(ctx context.Context, inst string) ([]world.Duplicate, error) {
	var resp remote.DuplicatesResponse
	err := k.call(ctx, remote.PathDuplicates, remote.InstanceRequest{Instance: inst}, &resp)
	return resp.Duplicates, err
}

// refusal is a refused call's answer, checked against the documented
// ErrorBody: the status and code wanted, a message. It returns what is
// wrong ("": nothing).
func refusal(a answer, status int, code string) string {
	var eb struct {
		Error *remote.CallError `json:"error"`
	}
	switch {
	case a.status != status:
		return fmt.Sprintf("answered %d %s; want %d with {\"error\": {\"code\": %q, ...}}", a.status, excerpt(a.body), status, code)
	case json.Unmarshal(a.body, &eb) != nil || eb.Error == nil:
		return fmt.Sprintf("answered %d with %s; want the body {\"error\": {\"code\": %q, \"message\": ...}}", a.status, excerpt(a.body), code)
	case eb.Error.Code != code:
		return fmt.Sprintf("answered %d with code %q (%s); want code %q", a.status, eb.Error.Code, eb.Error.Message, code)
	case eb.Error.Message == "":
		return fmt.Sprintf("answered %d %s without a message; the message says what was wrong", a.status, code)
	}
	return ""
}

// sameJSON reports whether a and b, as JSON, say the same: objects equal
// whatever their order, and a field that is null the same as one left out.
func sameJSON(a, b any) bool {
	return reflect.DeepEqual(normalize(a), normalize(b))
}

// normalize decodes v's JSON into plain values, without null fields.
func normalize(v any) any {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	default:
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return err.Error()
		}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return "not JSON: " + string(raw)
	}
	return dropNulls(out)
}

func dropNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				delete(x, k)
				continue
			}
			x[k] = dropNulls(e)
		}
	case []any:
		for i, e := range x {
			x[i] = dropNulls(e)
		}
	}
	return v
}

// jsonText is v as compact JSON, cut short, for a message.
func jsonText(v any) string {
	b, err := json.Marshal(normalize(v))
	if err != nil {
		return fmt.Sprint(v)
	}
	return excerpt(b)
}
