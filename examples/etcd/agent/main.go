// Command agent is the example agent of the etcd scenario
// (examples/etcd/scenario.yaml): it writes the task's keys into etcd, one
// put per step, with Go's ordinary net/http client and nothing else — no
// SDK. etcd is reached at $OVERNIGHT_HTTP_ETCD, the gateway's pass-through
// to the scenario's HTTP API "etcd" (the attempt's token is in that URL's
// path; etcd's own credential is added by the gateway, outside the
// sandbox); the run's task and checkpoints at $OVERNIGHT_URL, with
// $OVERNIGHT_TOKEN.
//
// Well-behaved (the default), it resumes from its last checkpoint and sends
// each put with an Idempotency-Key header naming its step ("put-2"), so a
// put it sent just before it was killed is answered from the harness's
// record when it sends it again, instead of reaching etcd a second time.
// It waits out a 503 or 429 (Retry-After) and retries under the same key;
// any other refusal ends the attempt with a failure it reports. A lesson
// the harness hands it (GET /v1/run) that says to put "without the lease"
// is followed: the task's lease is left out, under new keys.
//
// With --no-idempotency it is the deliberately broken variant: no
// Idempotency-Key, and it never reads its checkpoint back, so after a
// restart it starts over and writes every key again — etcd's own per-key
// version counts the second write, and the harness's no-duplicate-effects
// invariant catches it.
//
// Build it as a static binary next to the scenario:
//
//	CGO_ENABLED=0 go build -o examples/etcd/bin/etcd-agent ./examples/etcd/agent
//
// Exit codes: 0 finished (whatever outcome it reported), 1 failed, 2 bad
// usage or no harness to talk to.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// Task is the scenario's task: count keys prefix0 .. prefix<count-1>;
// from key LeaseFrom on, attached to lease Lease when it is set (a lease
// etcd may not have: the reflection example's mistake).
type Task struct {
	Prefix    string `json:"prefix"`
	Count     int    `json:"count"`
	Lease     string `json:"lease,omitempty"`
	LeaseFrom int    `json:"lease_from,omitempty"`
	// Network, when set, is a network the agent creates in the scenario's
	// world: (cloud) before its puts, keyed: an agent acting on a world
	// and an HTTP API at once.
	Network string `json:"network,omitempty"`
}

// Lesson is one of the lessons the harness hands the attempt.
type Lesson struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// maxTries bounds the tries of one put (503 and 429 answers), so the agent
// never loops for ever.
const maxTries = 30

func main() {
	noKeys := flag.Bool("no-idempotency", false, "send no Idempotency-Key and start over on every attempt (the broken variant)")
	flag.Parse()
	a, err := newAgent()
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd-agent:", err)
		os.Exit(exitUsage)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := a.run(ctx, !*noKeys); err != nil {
		fmt.Fprintln(os.Stderr, "etcd-agent:", err)
		_ = a.done(ctx, "failure", err.Error())
		os.Exit(exitFailed)
	}
	os.Exit(exitOK)
}

// agent talks to the gateway (its protocol, for the task and checkpoints)
// and to etcd (through the pass-through), over plain HTTP.
type agent struct {
	gateway, token, etcd string
	client               *http.Client
}

func newAgent() (*agent, error) {
	a := &agent{gateway: os.Getenv("OVERNIGHT_URL"), token: os.Getenv("OVERNIGHT_TOKEN"), etcd: os.Getenv("OVERNIGHT_HTTP_ETCD"),
		client: &http.Client{Timeout: 60 * time.Second}}
	switch {
	case a.gateway == "" || a.token == "":
		return nil, fmt.Errorf("no harness: OVERNIGHT_URL and OVERNIGHT_TOKEN are not set (run me with overnight run examples/etcd/scenario.yaml)")
	case a.etcd == "":
		return nil, fmt.Errorf("OVERNIGHT_HTTP_ETCD is not set: the scenario declares no HTTP API named etcd")
	}
	return a, nil
}

func (a *agent) run(ctx context.Context, keyed bool) error {
	var info struct {
		Attempt int      `json:"attempt"`
		Task    Task     `json:"task"`
		Lessons []Lesson `json:"lessons"`
	}
	if err := a.call(ctx, http.MethodGet, "/v1/run", nil, &info); err != nil {
		return err
	}
	if info.Task.Prefix == "" || info.Task.Count < 1 {
		return fmt.Errorf("the task wants {prefix, count >= 1}, got %+v", info.Task)
	}
	step := 0
	if keyed {
		var cp struct {
			Step int `json:"step"`
		}
		if err := a.call(ctx, http.MethodGet, "/v1/checkpoint", nil, &cp); err != nil {
			return err
		}
		step = cp.Step
	}
	// A lesson that says to leave the lease out is followed: the corrected
	// puts go under new keys (the refused one's key is final for its body).
	noLease := ""
	for _, l := range info.Lessons {
		if strings.Contains(strings.ToLower(l.Text), "without the lease") {
			noLease = l.ID
		}
	}
	if noLease != "" {
		_ = a.call(ctx, http.MethodPost, "/v1/events", map[string]any{"type": "lesson.used", "message": "puts without the lease", "data": map[string]string{"lesson": noLease}}, nil)
	}
	if info.Task.Network != "" {
		var res struct {
			Status string          `json:"status"`
			Error  json.RawMessage `json:"error"`
		}
		eff := map[string]any{"key": "network", "kind": "cloud.create_network", "args": map[string]string{"name": info.Task.Network}}
		if err := a.call(ctx, http.MethodPost, "/v1/effects", eff, &res); err != nil {
			return err
		}
		if res.Status != "done" {
			return fmt.Errorf("create network %s: %s %s", info.Task.Network, res.Status, res.Error)
		}
	}
	fmt.Printf("attempt %d: writing keys %d..%d of %s\n", info.Attempt, step, info.Task.Count-1, info.Task.Prefix)
	for i := step; i < info.Task.Count; i++ {
		key := info.Task.Prefix + strconv.Itoa(i)
		idem := ""
		if keyed {
			idem = fmt.Sprintf("put-%d", i)
		}
		lease := ""
		if info.Task.Lease != "" && i >= info.Task.LeaseFrom {
			if noLease == "" {
				lease = info.Task.Lease
			} else if idem != "" {
				idem += "/no-lease"
			}
		}
		if err := a.put(ctx, key, "value-"+strconv.Itoa(i), lease, idem); err != nil {
			return err
		}
		if err := a.call(ctx, http.MethodPut, "/v1/checkpoint", map[string]any{"step": i + 1, "state": map[string]any{"written": i + 1}}, nil); err != nil {
			return err
		}
	}
	return a.done(ctx, "success", fmt.Sprintf("wrote %d keys under %s", info.Task.Count, info.Task.Prefix))
}

// put writes key=value through etcd's JSON gateway (keys and values are
// base64), waiting out a 503 or 429 and retrying under the same
// Idempotency-Key.
func (a *agent) put(ctx context.Context, key, value, lease, idem string) error {
	req := map[string]string{
		"key": base64.StdEncoding.EncodeToString([]byte(key)), "value": base64.StdEncoding.EncodeToString([]byte(value)),
	}
	if lease != "" {
		req["lease"] = lease
	}
	body, _ := json.Marshal(req)
	for try := 1; ; try++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.etcd+"/v3/kv/put", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		if idem != "" {
			req.Header.Set("Idempotency-Key", idem)
		}
		resp, err := a.client.Do(req)
		if err != nil {
			if try >= maxTries {
				return fmt.Errorf("put %s: %w", key, err)
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			fmt.Printf("put %s (%s): %s\n", key, orNone(idem), bytes.TrimSpace(answer))
			return nil
		case (resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests) && try < maxTries:
			wait := time.Second
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
				wait = time.Duration(s) * time.Second
			}
			fmt.Printf("put %s: %d, retrying in %s: %s\n", key, resp.StatusCode, wait, bytes.TrimSpace(answer))
			time.Sleep(wait)
		default:
			return fmt.Errorf("put %s: %s: %s", key, resp.Status, bytes.TrimSpace(answer))
		}
	}
}

func orNone(k string) string {
	if k == "" {
		return "no key"
	}
	return "key " + k
}

// done reports the outcome to the harness.
func (a *agent) done(ctx context.Context, outcome, summary string) error {
	return a.call(ctx, http.MethodPost, "/v1/done", map[string]string{"outcome": outcome, "summary": summary}, nil)
}

// call is one request of the gateway protocol: JSON in and out, the
// attempt's token as the bearer.
func (a *agent) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.gateway+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}
