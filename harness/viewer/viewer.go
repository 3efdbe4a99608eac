// Package viewer is overnight's local web viewer (overnight serve): a
// read-only, server-rendered site over one state dir — the runs with
// filters and paging, a run's timeline, invariants, faults, effects, LLM
// exchanges and each attempt's logs, the reflections, and the suites'
// results. Pages are html/template in overnight's one page shell
// (harness/writeup), its stylesheet inlined: no script, no external asset.
//
// It reads through a Source (a harness.View in overnight serve), which
// never holds the state dir while idle; it writes nothing, and it answers
// GET and HEAD only. Binding it to an address, and refusing one that is
// not loopback, is the caller's.
package viewer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/harness/suite"
	"github.com/overnight-dev/overnight/harness/writeup"
)

// Source is what the viewer reads: a harness.View in overnight serve.
type Source interface {
	harness.Reads
	// StateDir names the state dir, for the pages' heading.
	StateDir() string
	// Owned reports whether another process owns the state dir now.
	Owned(ctx context.Context) bool
}

// Options configure a viewer.
type Options struct {
	// Logger receives a line per request that failed. Default: discard.
	Logger *slog.Logger
	// Refresh is how often a page showing a live run reloads itself (a
	// meta refresh: no script). Default 2s; negative: never.
	Refresh time.Duration
}

// Viewer serves the pages. It is an http.Handler.
type Viewer struct {
	src     Source
	log     *slog.Logger
	refresh time.Duration
	mux     *http.ServeMux
}

// New returns a viewer of src.
func New(src Source, opts Options) *Viewer {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Refresh == 0 {
		opts.Refresh = 2 * time.Second
	}
	v := &Viewer{src: src, log: opts.Logger, refresh: opts.Refresh, mux: http.NewServeMux()}
	v.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/runs", http.StatusFound) })
	v.mux.HandleFunc("GET /runs", v.runs)
	v.mux.HandleFunc("GET /runs/{id}", v.run)
	v.mux.HandleFunc("GET /runs/{id}/report.html", v.runReport)
	v.mux.HandleFunc("GET /runs/{id}/report.md", v.runReport)
	v.mux.HandleFunc("GET /runs/{id}/result.json", v.runReport)
	v.mux.HandleFunc("GET /runs/{id}/agent-report", v.agentReport)
	v.mux.HandleFunc("GET /reflections", v.reflections)
	v.mux.HandleFunc("GET /suites", v.suites)
	v.mux.HandleFunc("GET /suites/{id}", v.suite)
	return v
}

// ServeHTTP answers GET and HEAD; anything else is refused: the viewer is
// read-only.
func (v *Viewer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Nothing leaves the page: no script, no request to anywhere else.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "the viewer is read-only", http.StatusMethodNotAllowed)
		return
	}
	v.mux.ServeHTTP(w, r)
}

// page is a viewer page before write puts it into overnight's page shell
// (harness/writeup) with the viewer's navigation on top.
type page struct {
	Title   string
	Body    template.HTML
	Refresh int // seconds; 0: none
}

// frame is a page's body with the navigation and what the viewer reads
// on top.
var frame = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("frame").Parse(`<nav><b>overnight</b> &nbsp; <a href="/runs">Runs</a><a href="/reflections">Reflections</a><a href="/suites">Suites</a>
<span class="muted">read-only view of {{.StateDir}}{{with .Via}} · {{.}}{{end}}</span></nav>
{{.Body}}`))
})

// writePage writes p as a whole page, its header saying via (if not
// empty) how the state dir is read. Nothing is written when it fails.
func (v *Viewer) writePage(w io.Writer, p page, via string) error {
	body, err := writeup.Render(frame(), struct {
		Body          template.HTML
		StateDir, Via string
	}{p.Body, v.src.StateDir(), via})
	if err != nil {
		return err
	}
	return writeup.WritePage(w, writeup.Page{Title: p.Title + " — overnight", Refresh: p.Refresh, Body: body})
}

// What the header says of the state dir: whether a run is live in it, and
// so whether what a page shows may still change.
const (
	viaFree  = "no run is live: each page shows the state dir as it is when you load it"
	viaOwned = "a run is live (an overnight process holds the state dir): pages read from that process, and a live run's page refreshes itself"
)

// write renders a page with status 200.
func (v *Viewer) write(w http.ResponseWriter, r *http.Request, p page) {
	via := viaFree
	if v.src.Owned(r.Context()) {
		via = viaOwned
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := v.writePage(w, p, via); err != nil {
		v.fail(w, r, err)
	}
}

// fail answers an error: 404 for what does not exist, 400 for a bad query,
// 503 while the state dir cannot be read (owned, without a control
// socket), 500 otherwise.
func (v *Viewer) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	var bad *badQuery
	switch {
	case errors.Is(err, history.ErrRunNotFound), errors.Is(err, history.ErrSuiteNotFound):
		status = http.StatusNotFound
	case errors.As(err, &bad):
		status = http.StatusBadRequest
	case errors.Is(err, journal.ErrLocked):
		status = http.StatusServiceUnavailable
	case errors.Is(err, context.Canceled):
		return
	}
	if status == http.StatusInternalServerError {
		v.log.Warn("viewer", "path", r.URL.Path, "err", err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = v.writePage(w, page{Title: http.StatusText(status),
		Body: template.HTML("<h1>" + template.HTMLEscapeString(http.StatusText(status)) + "</h1><p>" + template.HTMLEscapeString(err.Error()) + "</p>")}, "")
}

// badQuery is a request whose parameters make no sense.
type badQuery struct{ err error }

func (e *badQuery) Error() string { return e.err.Error() }

// refreshFor is the meta refresh of a page that shows live runs.
func (v *Viewer) refreshFor(live bool) int {
	if !live || v.refresh < 0 {
		return 0
	}
	return max(int(v.refresh/time.Second), 1)
}

var funcs = template.FuncMap{
	"short": func(s string, n int) string {
		if r := []rune(s); len(r) > n {
			return string(r[:n]) + "…"
		}
		return s
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"virtual": history.VirtualSince,
	"agent":   history.AgentLabel,
	"runLink": runPath,
	"pretty":  pretty,
	"dur": func(from, to time.Time) string {
		if from.IsZero() || to.IsZero() {
			return "–"
		}
		return to.Sub(from).Round(time.Millisecond).String()
	},
	"plus": func(a, b int) int { return a + b },
}

// pretty indents JSON for a person, with <, > and & as themselves (the
// journal keeps them escaped; the page escapes what it shows).
func pretty(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if len(raw) == 0 || dec.Decode(&v) != nil {
		return string(raw)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if enc.Encode(v) != nil {
		return string(raw)
	}
	return b.String()
}

// decodeSuite reads a suite record's result (nil while it runs).
func decodeSuite(rec history.SuiteRecord) (*suite.Result, error) {
	if len(rec.Result) == 0 {
		return nil, nil
	}
	var res suite.Result
	if err := json.Unmarshal(rec.Result, &res); err != nil {
		return nil, fmt.Errorf("suite %s: its result does not decode: %w", rec.ID, err)
	}
	return &res, nil
}

// title is a page's title from its parts.
func title(parts ...string) string { return strings.Join(parts, " · ") }
