package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// FuzzDecodeRequest sends arbitrary bodies to every call of a served
// cloud world: whatever the body, the answer is JSON, a refusal carries a
// code, and nothing a client sends makes the server fail (5xx), hang or panic.
func FuzzDecodeRequest(f *testing.F) {
	paths := []string{remote.PathDescribe, remote.PathApply, remote.PathLookup, remote.PathLedger, remote.PathState, remote.PathGoal,
		remote.PathDuplicates, remote.PathSetVersion, remote.PathCreateInstance, remote.PathDropInstance}
	seeds := []string{
		`{"key":"k/1","kind":"cloud.create_network","args":{"name":"n"},"now":"2026-01-01T00:00:00Z"}`,
		`{"instance":"","key":"k/1"}`,
		`{"instance":""}`,
		`{"task":{"dns":"a","service":{"name":"b"}}}`,
		`{"version":"v2","now":"2026-01-01T00:00:00Z"}`,
		`{"instance":"s","ledger":[{"seq":1,"key":"k/1","kind":"cloud.create_network","args":{"name":"n"},"outcome":{"status":"done","result":{"id":"net-1","name":"n"}},"at":"2026-01-01T00:00:00Z","resource":"net-1"}]}`,
		`{"instance":"s","ledger":[{"seq":1,"key":"","kind":"world.api_version","args":{"version":"v2"},"outcome":{"status":"done"}}]}`,
		`{"instance":"s"}`,
		`{"key":7}`, `[]`, `{}{}`, ``, `{"instance":`, "\x00",
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		// A fresh world each time: an input fails alone, or not at all.
		srv, err := remote.NewServer(context.Background(), cloud.Definition(), world.NewMemStore(), nil)
		if err != nil {
			t.Fatal(err)
		}
		path := paths[int(which)%len(paths)]
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			srv.ServeHTTP(rec, httptest.NewRequest("POST", path, bytes.NewReader(body)))
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s %q: no answer within 5s", path, body)
		}
		answer := rec.Body.Bytes()
		if !json.Valid(answer) {
			t.Fatalf("%s %q: answered %d non-JSON %q", path, body, rec.Code, answer)
		}
		if rec.Code >= 500 && rec.Code != 501 {
			t.Fatalf("%s %q: answered %d %s; a client's body must never fail the server", path, body, rec.Code, answer)
		}
		if rec.Code != 200 {
			var eb remote.ErrorBody
			if err := json.Unmarshal(answer, &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
				t.Fatalf("%s %q: answered %d without an error code and message: %s", path, body, rec.Code, answer)
			}
		}
	})
}
