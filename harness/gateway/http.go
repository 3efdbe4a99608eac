package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// HTTPPathPrefix starts the path of the HTTP pass-through: every request to
// /v1/http/<api>/<token>/<path> is a request of the agent to the
// scenario's HTTP API <api>, for <path>. The attempt's token travels in the
// path, so that an ordinary HTTP client, given the base URL
// /v1/http/<api>/<token> ($OVERNIGHT_HTTP_<API>), needs no header of its
// own.
const HTTPPathPrefix = "/v1/http/"

// HeaderIdempotencyKey is the request header whose value is the effect's
// idempotency key, with Stripe's semantics: the same key and body are
// answered with the recorded response, the same key with another body is
// refused (409 key_reused).
const HeaderIdempotencyKey = "Idempotency-Key"

// HeaderIdempotentReplayed is set to "true" on a response answered from the
// journal rather than from the upstream (Stripe's header).
const HeaderIdempotentReplayed = "Idempotent-Replayed"

// HTTPRequest is one request of the agent to an HTTP API, as the gateway
// read it. Nothing else of the agent's request (its other headers, its
// credentials) goes further.
type HTTPRequest struct {
	API    string // the API's name, from the path
	Method string
	Path   string     // after the token, starting with /
	Query  url.Values // nil: none
	Key    string     // the Idempotency-Key header ("" : unkeyed)
	// ContentType is the request's Content-Type ("" : none given).
	ContentType string
	Body        []byte
}

// HTTPResponse is what the agent is answered with.
type HTTPResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// HTTPBackend is implemented by a Backend that serves the HTTP
// pass-through. A Backend without it answers 501.
type HTTPBackend interface {
	HTTPCall(ctx context.Context, c Caller, req HTTPRequest) (HTTPResponse, error)
}

// HTTPLimiter is implemented by an HTTPBackend whose APIs bound their
// request bodies below MaxEffectArgsBytes: HTTPMaxBody is API api's bound
// (0: the gateway's own). A larger body is refused 413 before it is read
// further.
type HTTPLimiter interface {
	HTTPMaxBody(api string) int64
}

// maxHTTPKeyBytes bounds an Idempotency-Key, as an effect's key.
const maxHTTPKeyBytes = 512

// httpPassThrough serves HTTPPathPrefix+"{api}/{token}/{path...}" for any
// method: the token authenticates, the backend answers.
func (s *Server) httpPassThrough(w http.ResponseWriter, r *http.Request) {
	c, w, ok := s.pathCaller(w, r, writeHTTPError, "use $OVERNIGHT_HTTP_<API> as the base URL as it is given")
	if !ok {
		return
	}
	b, ok := s.backend.(HTTPBackend)
	if !ok {
		writeHTTPError(w, Errorf(http.StatusNotImplemented, protocol.CodeNotImplemented, "this gateway serves no HTTP APIs"))
		return
	}
	key := r.Header.Get(HeaderIdempotencyKey)
	if len(key) > maxHTTPKeyBytes {
		writeHTTPError(w, Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "%s is %d bytes; at most %d", HeaderIdempotencyKey, len(key), maxHTTPKeyBytes))
		return
	}
	limit, why := int64(MaxEffectArgsBytes), "an effect's args are at most that"
	if l, ok := b.(HTTPLimiter); ok {
		if n := l.HTTPMaxBody(r.PathValue("api")); n > 0 && n < limit {
			limit, why = n, "the max_body of HTTP API "+r.PathValue("api")
		}
	}
	body, e := readBody(w, r, limit, " ("+why+"); it was not sent")
	if e != nil {
		writeHTTPError(w, e)
		return
	}
	req := HTTPRequest{
		API: r.PathValue("api"), Method: r.Method, Path: "/" + r.PathValue("path"), Key: key,
		ContentType: r.Header.Get("Content-Type"), Body: body,
	}
	if r.URL.RawQuery != "" {
		req.Query = r.URL.Query()
	}
	resp, err := b.HTTPCall(r.Context(), c, req)
	if err != nil {
		var pe *Error
		if !errors.As(err, &pe) {
			s.log.Error("HTTP pass-through failed", "api", req.API, "method", req.Method, "path", req.Path, "err", err)
			pe = Errorf(http.StatusInternalServerError, protocol.CodeInternal, "%v", err)
		}
		writeHTTPError(w, pe)
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.Status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(resp.Body)
	}
}

// writeHTTPError writes a refusal of the gateway's own on the HTTP
// pass-through: the protocol's error body, and Retry-After (whole seconds,
// rounded up) when the refusal says when to try again.
func writeHTTPError(w http.ResponseWriter, e *Error) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	writeError(w, e)
}
