package httpworld

import (
	"context"
	"fmt"
	"net/http"

	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// InlineBodyBytes is the largest answer body kept inline in the journal of
// answers (and in an effect's result); a larger one is stored as a blob,
// content-addressed, and the Result refers to it by its hash (BodyBlob).
const InlineBodyBytes = 64 << 10

// CodeTooLarge is the failure of a request whose answer is over the API's
// max_body: it reached the upstream, and its answer was not kept.
const CodeTooLarge = "too_large"

// Blobs stores and reads large bodies by their SHA-256 (the harness's
// journal blobs).
type Blobs interface {
	PutBlob(ctx context.Context, data []byte) (hash string, err error)
	Blob(hash string) ([]byte, error)
}

// MaxBody is the largest request or answer body of api: its max_body, or
// scenarios.DefaultHTTPMaxBody.
func MaxBody(api scenarios.HTTPAPI) int64 {
	if api.MaxBody > 0 {
		return api.MaxBody
	}
	return scenarios.DefaultHTTPMaxBody
}

// keepBody sets res's body: inline up to InlineBodyBytes, else as a blob
// (without Blobs, inline whatever its size).
func (w *World) keepBody(ctx context.Context, res *Result, body []byte) error {
	if len(body) <= InlineBodyBytes || w.cfg.Blobs == nil {
		res.setBody(body)
		return nil
	}
	hash, err := w.cfg.Blobs.PutBlob(ctx, body)
	if err != nil {
		return fmt.Errorf("HTTP API %s: store an answer of %d bytes as a blob: %w", w.cfg.API.Name, len(body), err)
	}
	res.BodyBlob, res.BodySize = hash, int64(len(body))
	return nil
}

// Resolve is r with a body kept as a blob read back from blobs (r itself
// when its body is inline).
func (r Result) Resolve(blobs Blobs) (Result, error) {
	if r.BodyBlob == "" {
		return r, nil
	}
	if blobs == nil {
		return Result{}, fmt.Errorf("the answer's body is blob %s (%d bytes), and no blob store was given to read it", r.BodyBlob, r.BodySize)
	}
	data, err := blobs.Blob(r.BodyBlob)
	if err != nil {
		return Result{}, fmt.Errorf("the answer's body, blob %s (%d bytes): %w", r.BodyBlob, r.BodySize, err)
	}
	out := r
	out.BodyBlob, out.BodySize = "", 0
	out.setBody(data)
	return out, nil
}

// tooLarge is the failure of a request answered with a body over max_body.
func (w *World) tooLarge(route string, status int, size int64) world.Outcome {
	o := world.Failed(http.StatusBadGateway, CodeTooLarge,
		"HTTP API %s answered %s with %d %s and a body of more than %d bytes, over its max_body (%d): the request reached the upstream and its answer was not kept (raise http[].max_body, at most %d)",
		w.cfg.API.Name, route, status, http.StatusText(status), size-1, MaxBody(w.cfg.API), scenarios.HTTPMaxBodyLimit)
	o.Error.Transient = false // sent again, it could happen twice: final, as the upstream answered
	return o
}
