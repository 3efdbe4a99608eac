package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// FuzzGateway sends arbitrary methods, paths and bodies through the
// protocol handler: it must never panic, every reply must be JSON, and
// every non-2xx reply must carry a protocol error body with a code.
func FuzzGateway(f *testing.F) {
	seeds := []struct{ method, path, body string }{
		{"GET", "/v1/run", ""},
		{"PUT", "/v1/checkpoint", `{"step":3,"state":{"a":1},"expect_seq":2}`},
		{"PUT", "/v1/checkpoint", `{"step":-3}`},
		{"POST", "/v1/effects", `{"key":"step-1/0","kind":"cloud.create_network","args":{"name":"n"}}`},
		{"POST", "/v1/effects", `{"kind":""}`},
		{"POST", "/v1/sleep", `{"seconds":1e309}`},
		{"POST", "/v1/sleep", `{"until":"not a time"}`},
		{"POST", "/v1/events", `{"type":"x","data":[1,2,3]}`},
		{"POST", "/v1/done", `{"outcome":"success","claims":null}`},
		{"GET", "/v1/llm/models", ""},
		{"PATCH", "/v1/run", "{}"},
		{"GET", "/../etc/passwd", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.body)
	}
	h := gateway.New(&fuzzBackend{}, nil).Handler()
	f.Fuzz(func(t *testing.T, method, path, body string) {
		if !validMethod(method) || !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\t#?%") {
			return
		}
		if _, err := url.ParseRequestURI(path); err != nil {
			return // not a request line an HTTP client could send
		}
		req := httptest.NewRequest(method, "http://gateway"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer good")
		rec := httptest.NewRecorder()
		serveBounded(h, rec, req, body)
		if rec.Code == http.StatusMovedPermanently || rec.Code == http.StatusTemporaryRedirect || rec.Code == http.StatusPermanentRedirect {
			return // the mux cleaning a path like /v1//run
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %s: reply is not JSON: %q", method, path, rec.Body.String())
		}
		if rec.Code/100 != 2 {
			var eb protocol.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code == "" {
				t.Fatalf("%s %s: %d without an error code: %q", method, path, rec.Code, rec.Body.String())
			}
		}
	})
}

func validMethod(m string) bool {
	switch m {
	case "GET", "PUT", "POST", "DELETE", "PATCH", "HEAD", "OPTIONS":
		return true
	}
	return false
}

// fuzzBackend is a unit-test double that accepts everything.
type fuzzBackend struct{ recordingBackend }
