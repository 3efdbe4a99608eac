package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world/httpworld"
)

// Error codes of the HTTP pass-through's own refusals (the gateway's JSON
// error body; the upstream's answers pass through as they are).
const (
	// CodeNoRoute: no route of the API matches the request (404).
	CodeNoRoute = "no_route"
	// CodeUnknownAPI: the scenario declares no HTTP API of that name (404).
	CodeUnknownAPI = "unknown_api"
	// CodeUnsupportedBody: a body the pass-through does not carry (415).
	CodeUnsupportedBody = "unsupported_body"
)

// retryInDoubt is the Retry-After the pass-through announces for an
// effect in doubt or failed transiently by a fault: short, since the retry
// is reconciled first.
const retryInDoubt = time.Second

var (
	_ gateway.HTTPBackend = (*run)(nil)
	_ gateway.HTTPLimiter = (*run)(nil)
)

// HTTPCall implements gateway.HTTPBackend: one request of the agent to one
// of the scenario's HTTP APIs is matched to its route, run down the effect
// path as an effect of kind http.<api>.<kind> — keyed by its
// Idempotency-Key, journaled, gated, faulted — and its result answered as
// HTTP: the upstream's status, content type and body for what the upstream
// answered (done, or refused with a 4xx), the gateway's JSON error for what
// the harness refused (key_reused and fenced 409, denied 403), and 503 with
// Retry-After for an effect in doubt or failed transiently.
func (r *run) HTTPCall(ctx context.Context, c gateway.Caller, req gateway.HTTPRequest) (gateway.HTTPResponse, error) {
	api, ok := r.scen.HTTPAPI(req.API)
	if !ok {
		var names []string
		for _, a := range r.scen.HTTP {
			names = append(names, a.Name)
		}
		return gateway.HTTPResponse{}, gateway.Errorf(http.StatusNotFound, CodeUnknownAPI, "scenario %s declares no HTTP API %q (its APIs: %s)", r.scen.Name, req.API, orNone(names))
	}
	route, ok := api.Match(req.Method, req.Path)
	if !ok {
		var routes []string
		for _, rt := range api.Routes {
			routes = append(routes, rt.String())
		}
		return gateway.HTTPResponse{}, gateway.Errorf(http.StatusNotFound, CodeNoRoute,
			"no route of HTTP API %s is %s %s; its routes: %s (a request no route declares is not sent)", api.Name, req.Method, req.Path, strings.Join(routes, ", "))
	}
	args, err := httpArgs(route, req)
	if err != nil {
		return gateway.HTTPResponse{}, err
	}
	res, err := r.Effect(ctx, c, protocol.EffectRequest{Key: req.Key, Kind: api.EffectKind(route.Kind), Args: args})
	if err != nil {
		var ge *gateway.Error
		if errors.As(err, &ge) && ge.Status == http.StatusServiceUnavailable && ge.RetryAfter == 0 {
			ge.RetryAfter = retryInDoubt
		}
		return gateway.HTTPResponse{}, err
	}
	return httpAnswer(api, route, res, r.h.blobs())
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// httpArgs are a request's effect args: its JSON body for a method with
// one (nothing: null), its query parameters as an object for one without
// (a parameter given once a string, more often a list of them).
func httpArgs(route scenarios.HTTPRoute, req gateway.HTTPRequest) (json.RawMessage, error) {
	if scenarios.HasBody(route.Method) {
		if len(req.Query) > 0 {
			return nil, gateway.Errorf(http.StatusBadRequest, protocol.CodeBadRequest,
				"%s carries its arguments in a JSON body; the query parameters %s would not be sent upstream", route, encodeQuery(req))
		}
		if len(bytes.TrimSpace(req.Body)) == 0 {
			return json.RawMessage("null"), nil
		}
		if ct := req.ContentType; ct != "" {
			if mt, _, err := mime.ParseMediaType(ct); err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
				return nil, gateway.Errorf(http.StatusUnsupportedMediaType, CodeUnsupportedBody, "%s: the pass-through carries JSON bodies, and this one is %s", route, ct)
			}
		}
		if !json.Valid(req.Body) {
			return nil, gateway.Errorf(http.StatusBadRequest, CodeUnsupportedBody, "%s: the body is not JSON (the pass-through carries JSON bodies)", route)
		}
		return req.Body, nil
	}
	if len(bytes.TrimSpace(req.Body)) > 0 {
		return nil, gateway.Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "%s carries its arguments as query parameters; a body would not be sent upstream", route)
	}
	q := map[string]any{}
	for k, vs := range req.Query {
		if len(vs) == 1 {
			q[k] = vs[0]
			continue
		}
		list := make([]any, len(vs))
		for i, v := range vs {
			list[i] = v
		}
		q[k] = list
	}
	b, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func encodeQuery(req gateway.HTTPRequest) string {
	return "?" + req.Query.Encode()
}

// HTTPMaxBody implements gateway.HTTPLimiter: API api's max_body (0: no
// such API).
func (r *run) HTTPMaxBody(api string) int64 {
	if a, ok := r.scen.HTTPAPI(api); ok {
		return httpworld.MaxBody(a)
	}
	return 0
}

// httpAnswer is the HTTP answer to an effect's result, a body kept as a
// blob read from blobs.
func httpAnswer(api scenarios.HTTPAPI, route scenarios.HTTPRoute, res protocol.EffectResult, blobs httpworld.Blobs) (gateway.HTTPResponse, error) {
	header := http.Header{}
	if res.Replayed {
		header.Set(gateway.HeaderIdempotentReplayed, "true")
	}
	switch res.Status {
	case protocol.StatusDone:
		out, ok := httpworld.ResultOf(res.Result)
		if !ok {
			return gateway.HTTPResponse{}, fmt.Errorf("effect %s of %s is done with a result the pass-through cannot read: %s", res.Key, route, res.Result)
		}
		if out.TooLarge > 0 {
			return gateway.HTTPResponse{}, gateway.Errorf(http.StatusBadGateway, httpworld.CodeTooLarge,
				"%s of HTTP API %s was done, and its answer (%d bytes) was over the limit; it was not kept", route, api.Name, out.TooLarge)
		}
		out, err := out.Resolve(blobs)
		if err != nil {
			return gateway.HTTPResponse{}, fmt.Errorf("effect %s of %s: %w", res.Key, route, err)
		}
		if out.Reconciled {
			header.Set("Overnight-Reconciled", "true")
		}
		return upstreamAnswer(header, out), nil
	case protocol.StatusDenied:
		msg := "the gate denied it"
		if res.Error != nil && res.Error.Message != "" {
			msg = res.Error.Message
		}
		return gateway.HTTPResponse{}, gateway.Errorf(http.StatusForbidden, "denied", "%s of HTTP API %s: %s", route, api.Name, msg)
	case protocol.StatusFailed:
		e := res.Error
		if e == nil {
			return gateway.HTTPResponse{}, gateway.Errorf(http.StatusBadGateway, "failed", "%s of HTTP API %s failed", route, api.Name)
		}
		if out, ok := httpworld.ResultOf(e.Details); ok && strings.HasPrefix(e.Code, "http_") {
			out, err := out.Resolve(blobs)
			if err != nil {
				return gateway.HTTPResponse{}, fmt.Errorf("effect %s of %s: %w", res.Key, route, err)
			}
			return upstreamAnswer(header, out), nil // the upstream's own refusal
		}
		ge := gateway.Errorf(e.Status, e.Code, "%s of HTTP API %s: %s", route, api.Name, e.Message)
		if ge.Status < 400 || ge.Status > 599 {
			ge.Status = http.StatusBadGateway
		}
		if e.Transient {
			ge.Status, ge.RetryAfter = http.StatusServiceUnavailable, retryInDoubt
		}
		return gateway.HTTPResponse{}, ge
	}
	msg := "its outcome is unknown"
	if res.Error != nil {
		msg = res.Error.Message
	}
	ge := gateway.Errorf(http.StatusServiceUnavailable, protocol.StatusUnknown,
		"%s of HTTP API %s is in doubt (%s); retry with the same Idempotency-Key: the harness finds out whether it happened before sending it again", route, api.Name, msg)
	ge.RetryAfter = retryInDoubt
	return gateway.HTTPResponse{}, ge
}

// upstreamAnswer is the upstream's answer as the agent gets it.
func upstreamAnswer(header http.Header, out httpworld.Result) gateway.HTTPResponse {
	if out.ContentType != "" {
		header.Set("Content-Type", out.ContentType)
	}
	if out.RetryAfter != "" {
		header.Set("Retry-After", out.RetryAfter)
	}
	return gateway.HTTPResponse{Status: out.Status, Header: header, Body: out.Bytes()}
}
