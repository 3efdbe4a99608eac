package scenarios

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/scenarios/expr"
)

// HTTP API modes (http[].mode).
const (
	// HTTPLive sends every request upstream (the default). Every exchange
	// is journaled whatever the mode.
	HTTPLive = "live"
	// HTTPRecord is live, for a run meant as a recording of its exchanges.
	HTTPRecord = "record"
	// HTTPReplay answers every request from a recorded run's exchanges and
	// sends nothing upstream; a request the recording cannot answer is
	// refused (the first divergence).
	HTTPReplay = "replay"
)

// DefaultHTTPTimeout is how long a request upstream may take when the
// scenario says nothing (http[].timeout).
const DefaultHTTPTimeout = 30 * time.Second

// DefaultHTTPMaxBody is the largest request or answer body of an HTTP API
// whose scenario says nothing (http[].max_body); HTTPMaxBodyLimit the
// largest it may say.
const (
	DefaultHTTPMaxBody = 1 << 20
	HTTPMaxBodyLimit   = 64 << 20
)

// HTTPKindPrefix starts the effect kind of every request to an HTTP API:
// http.<api>.<kind>.
const HTTPKindPrefix = "http."

// The variable a goal's probe body and expectation read besides response:
// the scenario's task.
const varTask expr.Var = "task"

// HTTPMethods are the methods a route may have; the first three carry a
// JSON body, the others their query parameters.
var HTTPMethods = []string{"POST", "PUT", "PATCH", "GET", "DELETE"}

// HTTPAPI is one HTTP API an agent calls with its own client through the
// gateway (an entry of http:).
type HTTPAPI struct {
	Name        string
	BaseURL     string
	Routes      []HTTPRoute
	Lookup      *HTTPLookup      // nil: an in-doubt request stays unknown
	Credentials *HTTPCredentials // nil: none added
	Timeout     time.Duration    // a request upstream in doubt after it; DefaultHTTPTimeout
	MaxBody     int64            // the largest request or answer body, in bytes; DefaultHTTPMaxBody
	Mode        string           // HTTPLive, HTTPRecord or HTTPReplay
	Recording   string           // the run a replay answers from ("" : given on the command line)
	Shadow      *HTTPShadow      // nil: reflection can build no shadow of this API
}

// HTTPRoute is one route of an HTTP API.
type HTTPRoute struct {
	Method string // one of HTTPMethods
	Path   string // exact, starting with /
	Kind   string // the route's kind; the effect kind is Kind of the API
	// Identity names the resource a request acts on (a string over args);
	// nil: the canonical args.
	Identity                          *expr.Program
	ReadOnly, Idempotent, Destructive bool
}

// HTTPLookup is how an in-doubt request is looked for upstream.
type HTTPLookup struct {
	Method, Path string
	Body         *expr.Program // JSON over args; nil: no body
	Found        *expr.Program // bool over args and response
}

// HTTPCredentials is a header the gateway adds upstream, from the
// harness's environment.
type HTTPCredentials struct {
	Header string
	Env    string
	Prefix string
}

// HTTPShadow is a scratch upstream the harness starts for reflection.
type HTTPShadow struct {
	Command []string
	Dir     string // the scenario file's directory ("" for a built-in scenario)
}

// Goal judges goal-reached from an HTTP API's answer to a probe.
type Goal struct {
	API          string
	Method, Path string
	Body         *expr.Program // JSON over task; nil: no body
	Expect       *expr.Program // bool over response and task
}

// GoalVars are the values a goal's expressions read.
func GoalVars(task, response any) map[string]any {
	return map[string]any{string(expr.Response): response, string(varTask): task}
}

// EffectKind is the effect kind of route kind k of the API: http.<name>.<k>.
func (a HTTPAPI) EffectKind(k string) string { return HTTPKindPrefix + a.Name + "." + k }

// Route returns the route of an effect kind of the API.
func (a HTTPAPI) Route(effectKind string) (HTTPRoute, bool) {
	for _, r := range a.Routes {
		if a.EffectKind(r.Kind) == effectKind {
			return r, true
		}
	}
	return HTTPRoute{}, false
}

// Match returns the route a request of method to path matches.
func (a HTTPAPI) Match(method, path string) (HTTPRoute, bool) {
	for _, r := range a.Routes {
		if r.Method == method && r.Path == path {
			return r, true
		}
	}
	return HTTPRoute{}, false
}

// String writes the route as the file does: "POST /v3/kv/put".
func (r HTTPRoute) String() string { return r.Method + " " + r.Path }

// HasBody reports whether requests of method carry a JSON body (rather than
// query parameters).
func HasBody(method string) bool { return method == "POST" || method == "PUT" || method == "PATCH" }

// EnvName is the agent's variable holding the API's base URL:
// OVERNIGHT_HTTP_<NAME>, the name upper-cased with - as _.
func (a HTTPAPI) EnvName() string {
	return "OVERNIGHT_HTTP_" + strings.ToUpper(strings.ReplaceAll(a.Name, "-", "_"))
}

// HTTPAPI returns the scenario's HTTP API called name.
func (s *Scenario) HTTPAPI(name string) (HTTPAPI, bool) {
	for _, a := range s.HTTP {
		if a.Name == name {
			return a, true
		}
	}
	return HTTPAPI{}, false
}

// HasWorld reports whether the scenario names a world (world:), rather
// than acting only on HTTP APIs.
func (s *Scenario) HasWorld() bool { return s.World.Name != "" || s.World.Remote() }

// parseRoute reads "METHOD /path".
func parseRoute(text string) (method, path string, err error) {
	method, path, ok := strings.Cut(strings.TrimSpace(text), " ")
	path = strings.TrimSpace(path)
	switch {
	case !ok || path == "":
		return "", "", fmt.Errorf("%q is not METHOD /path (such as \"POST /v3/kv/put\")", text)
	case !slices.Contains(HTTPMethods, method):
		return "", "", fmt.Errorf("method %q: want one of %s", method, strings.Join(HTTPMethods, ", "))
	case !strings.HasPrefix(path, "/"):
		return "", "", fmt.Errorf("path %q: want one starting with /", path)
	case strings.ContainsAny(path, "?# \t{}"):
		return "", "", fmt.Errorf("path %q: want an exact path, without a query, fragment, spaces or wildcards", path)
	}
	return method, path, nil
}

// program compiles the CEL expression at ptr, reporting a problem at its
// place in the file (inside the expression, where it is written on one
// line).
func (b *builder) program(ptr, path, source string, want expr.Type, vars ...expr.Var) *expr.Program {
	p, err := expr.Compile(source, want, vars...)
	if err == nil {
		return p
	}
	var ee *expr.Error
	if errors.As(err, &ee) {
		n := b.node(ptr)
		line, col := n.Line, n.Column
		if ee.Line == 1 {
			line, col = b.inside(n, ee.Offset)
		}
		b.sink.addAt(ptr, line, col, "%s: %s", path, ee.Msg)
		return nil
	}
	b.errAt(ptr, "%s: %v", path, err)
	return nil
}

// routeAt reads the route text at ptr.
func (b *builder) routeAt(ptr, path, text string) (string, string, bool) {
	m, p, err := parseRoute(text)
	if err != nil {
		b.errAt(ptr, "%s: %v", path, err)
		return "", "", false
	}
	return m, p, true
}

// httpAPIs checks and builds http:.
func (b *builder) httpAPIs(list []any) []HTTPAPI {
	var out []HTTPAPI
	names := map[string]int{}
	for i, v := range list {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		ptr, path := "/http/"+strconv.Itoa(i), fmt.Sprintf("http[%d]", i)
		a := HTTPAPI{Mode: HTTPLive, Timeout: DefaultHTTPTimeout, MaxBody: DefaultHTTPMaxBody}
		a.Name, _ = m["name"].(string)
		if j, dup := names[a.Name]; dup && a.Name != "" {
			first := b.node("/http/" + strconv.Itoa(j) + "/name")
			b.errAt(ptr+"/name", "%s.name: %q is already declared at line %d column %d", path, a.Name, first.Line, first.Column)
		}
		names[a.Name] = i
		a.BaseURL, _ = m["base_url"].(string)
		if a.BaseURL != "" {
			if u, err := url.Parse(a.BaseURL); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.RawQuery != "" {
				b.errAt(ptr+"/base_url", "%s.base_url: %q is not an http(s) base URL without a query", path, a.BaseURL)
			}
			a.BaseURL = strings.TrimSuffix(a.BaseURL, "/")
		}
		if routes, ok := m["routes"].([]any); ok {
			a.Routes = b.httpRoutes(ptr+"/routes", path+".routes", routes)
		}
		if l, ok := m["lookup"].(map[string]any); ok {
			a.Lookup = b.httpLookup(ptr+"/lookup", path+".lookup", l)
		}
		if c, ok := m["credentials"].(map[string]any); ok {
			a.Credentials = &HTTPCredentials{}
			a.Credentials.Header, _ = c["header"].(string)
			a.Credentials.Env, _ = c["env"].(string)
			a.Credentials.Prefix, _ = c["prefix"].(string)
			if strings.HasPrefix(a.Credentials.Env, "OVERNIGHT_") {
				b.errAt(ptr+"/credentials/env", "%s.credentials.env: %q uses the reserved prefix OVERNIGHT_", path, a.Credentials.Env)
			}
		}
		if d, ok := b.duration(m, ptr+"/timeout", path+".timeout"); ok {
			a.Timeout = d
		}
		if n, ok := b.size(m, ptr+"/max_body", path+".max_body", HTTPMaxBodyLimit); ok {
			a.MaxBody = n
		}
		if mode, ok := m["mode"].(string); ok {
			a.Mode = mode
		}
		a.Recording, _ = m["recording"].(string)
		if a.Recording != "" && a.Mode != HTTPReplay {
			b.errAt(ptr+"/recording", "%s.recording: only mode: replay answers from a recording (this API's mode is %s)", path, a.Mode)
		}
		if s, ok := m["shadow"].(map[string]any); ok {
			a.Shadow = &HTTPShadow{}
			if cmd, ok := s["command"].([]any); ok {
				for _, c := range cmd {
					if s, ok := c.(string); ok {
						a.Shadow.Command = append(a.Shadow.Command, s)
					}
				}
			}
			if strings.HasPrefix(b.file, BuiltinPrefix) {
				b.errAt(ptr+"/shadow", "%s.shadow: a built-in scenario cannot start a shadow", path)
			} else if abs, err := filepath.Abs(filepath.Dir(b.file)); err == nil {
				a.Shadow.Dir = abs
			}
		}
		out = append(out, a)
	}
	return out
}

// sizeUnits are the units a size may carry, longest first.
var sizeUnits = []struct {
	suffix string
	n      int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"KB", 1000}, {"MB", 1000 * 1000}, {"B", 1}}

// size parses an optional size field of m: an integer (bytes) or a
// string such as 64KiB or 1MiB, from 1 byte to most.
func (b *builder) size(m map[string]any, ptr, path string, most int64) (int64, bool) {
	key := ptr[strings.LastIndexByte(ptr, '/')+1:]
	var n int64
	given := fmt.Sprint(m[key])
	switch v := m[key].(type) {
	case nil:
		return 0, false
	case int64:
		n = v
	case float64:
		if v != math.Trunc(v) || v > math.MaxInt64/2 || v < -math.MaxInt64/2 {
			b.errAt(ptr, "%s: %v is not a whole number of bytes", path, v)
			return 0, false
		}
		n = int64(v)
	case string:
		text := strings.TrimSpace(v)
		unit := int64(1)
		for _, u := range sizeUnits {
			if strings.HasSuffix(text, u.suffix) {
				text, unit = strings.TrimSpace(strings.TrimSuffix(text, u.suffix)), u.n
				break
			}
		}
		x, err := strconv.ParseInt(text, 10, 64)
		if err != nil || x < 0 || x > most {
			b.errAt(ptr, "%s: %q is not a size: want bytes, or a number with B, KB, KiB, MB or MiB, such as 64KiB or 1MiB", path, v)
			return 0, false
		}
		n, given = x*unit, fmt.Sprintf("%q (%d bytes)", v, x*unit)
	default:
		return 0, false // the schema says what is wrong
	}
	switch {
	case n <= 0:
		b.errAt(ptr, "%s: must be greater than 0", path)
		return 0, false
	case n > most:
		b.errAt(ptr, "%s: %s is over the most, %dMiB (%d bytes)", path, given, most>>20, most)
		return 0, false
	}
	return n, true
}

// httpRoutes checks and builds an API's routes.
func (b *builder) httpRoutes(ptr, path string, list []any) []HTTPRoute {
	var out []HTTPRoute
	routes, kinds := map[string]int{}, map[string]int{}
	for i, v := range list {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		rptr, rpath := ptr+"/"+strconv.Itoa(i), fmt.Sprintf("%s[%d]", path, i)
		r := HTTPRoute{}
		text, _ := m["route"].(string)
		method, p, ok := b.routeAt(rptr+"/route", rpath+".route", text)
		if ok {
			r.Method, r.Path = method, p
			if j, dup := routes[r.String()]; dup {
				first := b.node(fmt.Sprintf("%s/%d/route", ptr, j))
				b.errAt(rptr+"/route", "%s.route: %s is already declared at line %d column %d", rpath, r.String(), first.Line, first.Column)
			}
			routes[r.String()] = i
		}
		r.Kind, _ = m["kind"].(string)
		if j, dup := kinds[r.Kind]; dup && r.Kind != "" {
			first := b.node(fmt.Sprintf("%s/%d/kind", ptr, j))
			b.errAt(rptr+"/kind", "%s.kind: %q is already the kind of the route at line %d column %d", rpath, r.Kind, first.Line, first.Column)
		}
		kinds[r.Kind] = i
		if id, ok := m["identity"].(string); ok && id != "" {
			r.Identity = b.program(rptr+"/identity", rpath+".identity", id, expr.String, expr.Args)
		}
		r.ReadOnly, _ = m["read_only"].(bool)
		r.Idempotent, _ = m["idempotent"].(bool)
		r.Destructive, _ = m["destructive"].(bool)
		if r.ReadOnly && r.Destructive {
			b.errAt(rptr, "%s: a read_only route cannot be destructive", rpath)
		}
		out = append(out, r)
	}
	return out
}

// httpLookup checks and builds an API's lookup.
func (b *builder) httpLookup(ptr, path string, m map[string]any) *HTTPLookup {
	l := &HTTPLookup{}
	text, _ := m["route"].(string)
	l.Method, l.Path, _ = b.routeAt(ptr+"/route", path+".route", text)
	if body, ok := m["body"].(string); ok && body != "" {
		l.Body = b.program(ptr+"/body", path+".body", body, expr.JSON, expr.Args)
	}
	if found, ok := m["found"].(string); ok && found != "" {
		l.Found = b.program(ptr+"/found", path+".found", found, expr.Bool, expr.Args, expr.Response)
	}
	return l
}

// goal checks and builds goal:, whose probe must name one of apis.
func (b *builder) goal(m map[string]any, apis []HTTPAPI) *Goal {
	g := &Goal{}
	if probe, ok := m["probe"].(map[string]any); ok {
		g.API, _ = probe["api"].(string)
		if g.API != "" && !slices.ContainsFunc(apis, func(a HTTPAPI) bool { return a.Name == g.API }) {
			var names []string
			for _, a := range apis {
				names = append(names, a.Name)
			}
			known := "none: declare it under http:"
			if len(names) > 0 {
				known = strings.Join(names, ", ")
			}
			b.errAt("/goal/probe/api", "goal.probe.api: no HTTP API %q (http: declares %s)", g.API, known)
		}
		text, _ := probe["route"].(string)
		g.Method, g.Path, _ = b.routeAt("/goal/probe/route", "goal.probe.route", text)
		if body, ok := probe["body"].(string); ok && body != "" {
			g.Body = b.program("/goal/probe/body", "goal.probe.body", body, expr.JSON, varTask)
		}
	}
	if e, ok := m["expect"].(string); ok && e != "" {
		g.Expect = b.program("/goal/expect", "goal.expect", e, expr.Bool, expr.Response, varTask)
	}
	return g
}

// ReplayingHTTP is the scenario with every HTTP API replaying run
// recording (--http-replay), or s itself when recording is "" or it
// declares none.
func (s *Scenario) ReplayingHTTP(recording string) *Scenario {
	if recording == "" || len(s.HTTP) == 0 {
		return s
	}
	out := *s
	out.HTTP = make([]HTTPAPI, len(s.HTTP))
	for i, a := range s.HTTP {
		a.Mode, a.Recording = HTTPReplay, recording
		out.HTTP[i] = a
	}
	return &out
}
