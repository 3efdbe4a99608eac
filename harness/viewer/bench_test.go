package viewer_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/harness/viewer"
)

// benchRuns is how many runs the run list's benchmark puts in the state
// dir.
const benchRuns = 10_000

// BenchmarkRunList measures the viewer's run list over a state dir of
// 10,000 runs (written through history's Writer, no Docker): the time to
// the first byte of GET /runs (a whole page: the handler renders before it
// writes), reported as ttfb-p50-ms and ttfb-p99-ms.
//
//   - free: nobody owns the state dir; each request opens the journal
//     read-only for its moment. warm: the run headers are indexed (as
//     overnight serve does before it listens), requests apart;
//     back-to-back: requests with no pause, which also wait out the gap a
//     View leaves between two reads; filtered: a filter that goes through
//     every run; changed: another process wrote a run since the last
//     request; cold: a fresh viewer's first request, which indexes them.
//
//   - owned: a process owns the state dir (a Harness, as a live run's);
//     the viewer asks it through its control socket.
//
//     go test -run '^$' -bench RunList -benchtime 200x ./harness/viewer
func BenchmarkRunList(b *testing.B) {
	dir := b.TempDir()
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := putRuns(context.Background(), history.NewWriter(j), 0, benchRuns); err != nil {
		b.Fatal(err)
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	newServer := func(b *testing.B) *httptest.Server {
		view, err := harness.OpenView(harness.ViewOptions{StateDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		return httptest.NewServer(viewer.New(view, viewer.Options{}))
	}
	// measure gets path b.N times, each after between (outside the timer):
	// a person's clicks are apart; requests back to back also wait out the
	// gap a View leaves between two reads (harness.DefaultViewGap).
	measure := func(b *testing.B, srv *httptest.Server, path string, between func()) {
		ttfb(b, srv, path) // the index is built, as overnight serve does before it listens
		var times []time.Duration
		for b.Loop() {
			b.StopTimer()
			between()
			b.StartTimer()
			times = append(times, ttfb(b, srv, path))
		}
		report(b, times)
	}
	apart := func() { time.Sleep(2 * harness.DefaultViewGap) }
	for _, c := range []struct {
		name, path string
		between    func()
	}{
		{"free/warm", "/runs", apart},
		{"free/back-to-back", "/runs", func() {}},
		{"free/filtered", "/runs?scenario=week&agent=naive&verdict=fail&offset=200", apart},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv := newServer(b)
			defer srv.Close()
			measure(b, srv, c.path, c.between)
		})
	}
	b.Run("free/changed", func(b *testing.B) {
		// Another process wrote a run since the last request (a run ended):
		// the index reads the versions of every run record again and
		// decodes the one that moved.
		srv := newServer(b)
		defer srv.Close()
		n := benchRuns
		measure(b, srv, "/runs", func() {
			j, err := journal.Open(dir, journal.Options{})
			if err == nil {
				err = errors.Join(putRuns(context.Background(), history.NewWriter(j), n, n+1), j.Close())
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		})
	})
	b.Run("free/cold", func(b *testing.B) {
		var times []time.Duration
		for b.Loop() {
			b.StopTimer()
			srv := newServer(b)
			b.StartTimer()
			times = append(times, ttfb(b, srv, "/runs"))
			b.StopTimer()
			srv.Close()
			b.StartTimer()
		}
		report(b, times)
	})
	b.Run("owned/warm", func(b *testing.B) {
		h, err := harness.Open(context.Background(), harness.Options{StateDir: dir, Existing: true})
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		srv := newServer(b)
		defer srv.Close()
		measure(b, srv, "/runs", func() {})
	})
}

// ttfb gets path and returns the time to the response's first byte; the
// body is read whole before it returns.
func ttfb(b *testing.B, srv *httptest.Server, path string) time.Duration {
	var first time.Time
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotFirstResponseByte: func() { first = time.Now() }})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	resp, err := srv.Client().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %s", path, resp.Status)
	}
	return first.Sub(start)
}

func report(b *testing.B, times []time.Duration) {
	if len(times) == 0 {
		return
	}
	slices.Sort(times)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(times[len(times)/2]), "ttfb-p50-ms")
	b.ReportMetric(ms(times[(len(times)*99)/100]), "ttfb-p99-ms")
}
