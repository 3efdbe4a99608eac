package scenarios

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/scenarios/expr"
	"github.com/overnight-dev/overnight/scenarios/invariant"
)

// Key patterns: the propertyNames the spec declares (and so the schema), which the builder
// checks itself, with the keys' positions (see schemaSet.reportOne).
var (
	envKeyPattern  = keyPattern(reflect.TypeFor[AgentFile](), "Env")
	variantPattern = keyPattern(reflect.TypeFor[ScenarioFile](), "Agents")
)

// builder checks what the schema cannot say well and builds the Scenario. It reads the tree
// defensively: a value of the wrong type was already reported by the schema, so it is skipped
// here, and every check still runs on the rest — one pass reports every problem.
type builder struct {
	file string
	data []byte
	t    *tree
	sink *errorSink
}

// node returns the YAML value node at a JSON pointer (the root if unknown).
func (b *builder) node(ptr string) *yaml.Node {
	if loc := b.t.at[ptr]; loc != nil {
		return loc.value
	}
	return b.t.rootNode
}

// keyNode returns the mapping key of the member at a JSON pointer (its value, or the root, if
// there is no key).
func (b *builder) keyNode(ptr string) *yaml.Node {
	if loc := b.t.at[ptr]; loc != nil && loc.key != nil {
		return loc.key
	}
	return b.node(ptr)
}

func (b *builder) errAt(ptr, format string, args ...any) {
	n := b.node(ptr)
	b.sink.addAt(ptr, n.Line, n.Column, format, args...)
}

func (b *builder) build(root map[string]any) *Scenario {
	sc := &Scenario{APIVersion: APIVersion, Kind: KindScenario}
	sc.Name, _ = root["name"].(string)
	sc.Description, _ = root["description"].(string)

	switch w := root["world"].(type) {
	case string:
		sc.World.Name = w
	case map[string]any:
		b.world(&sc.World, w)
	}
	if sc.World.Options == nil {
		sc.World.Options = map[string]any{}
	}
	if apis, ok := root["http"].([]any); ok {
		sc.HTTP = b.httpAPIs(apis)
	}
	if m, ok := root["mcp"].(map[string]any); ok {
		sc.MCP = b.mcp(m, sc.HTTP)
	}
	if _, ok := root["world"]; !ok && !sc.HasAPIs() {
		// The schema cannot say "world, unless http or mcp": the builder does, as the schema would.
		n := b.t.rootNode
		if loc := b.t.at[""]; loc != nil {
			n = loc.value
		}
		b.sink.addAt("/world", n.Line, n.Column, "missing required field %q", "world")
	}
	if g, ok := root["goal"].(map[string]any); ok {
		sc.Goal = b.goal(g, sc.HTTP)
	}

	if a, ok := root["agent"].(map[string]any); ok {
		sc.Agent = b.agent("/agent", "agent", a)
	}
	if variants, ok := root["agents"].(map[string]any); ok && len(variants) > 0 {
		sc.Agents = make(map[string]AgentSpec, len(variants))
		for name, v := range variants {
			if !variantPattern.MatchString(name) {
				key := b.keyNode("/agents/" + escapePointer(name))
				b.sink.addAt("/agents", key.Line, key.Column, "agents: invalid variant name %q: must match %s", name, variantPattern)
			}
			if a, ok := v.(map[string]any); ok {
				ptr := "/agents/" + escapePointer(name)
				sc.Agents[name] = b.agent(ptr, b.t.at[ptr].path, a)
			}
		}
	}

	sc.Task, _ = root["task"].(map[string]any)
	if sc.Task == nil {
		sc.Task = map[string]any{}
	}

	sc.Faults, sc.FaultText = []chaos.Spec{}, []string{}
	if faults, ok := root["faults"].([]any); ok {
		for i, f := range faults {
			text, ok := f.(string)
			if !ok {
				continue
			}
			ptr := "/faults/" + strconv.Itoa(i)
			sp, err := chaos.ParseSpec(text)
			if err != nil {
				var se *chaos.SpecError
				if errors.As(err, &se) {
					line, col := b.inside(b.node(ptr), se.Column()-1)
					b.sink.addAt(ptr, line, col, "faults[%d]: invalid fault %q: %s", i, text, se.Msg)
				} else {
					b.errAt(ptr, "faults[%d]: invalid fault %q: %v", i, text, err)
				}
				continue
			}
			sc.Faults = append(sc.Faults, sp)
			sc.FaultText = append(sc.FaultText, text)
		}
	}

	if draws, ok := root["draws"].([]any); ok {
		for i, v := range draws {
			m, ok := v.(map[string]any)
			if !ok {
				continue
			}
			ptr := "/draws/" + strconv.Itoa(i)
			path := fmt.Sprintf("draws[%d]", i)
			d := chaos.Draw{}
			if kinds, ok := m["kinds"].([]any); ok {
				for j, k := range kinds {
					text, _ := k.(string)
					if _, err := chaos.ParseSpec(text + "@t:0s"); err != nil {
						b.errAt(fmt.Sprintf("%s/kinds/%d", ptr, j), "%s.kinds[%d]: %q is not KIND[:ARG]", path, j, text)
						continue
					}
					d.Kinds = append(d.Kinds, text)
				}
			}
			if n, ok := m["count"].(int64); ok {
				d.Count = int(n)
			}
			for _, pair := range []struct {
				key string
				dst *[2]time.Duration
			}{{"between", &d.Between}, {"duration", &d.Duration}} {
				items, ok := m[pair.key].([]any)
				if !ok || len(items) != 2 {
					continue
				}
				for j := range items {
					if dur, ok := b.durationAt(items, j, fmt.Sprintf("%s/%s", ptr, pair.key), fmt.Sprintf("%s.%s[%d]", path, pair.key, j)); ok {
						pair.dst[j] = dur
					}
				}
				if pair.dst[1] < pair.dst[0] {
					b.errAt(ptr+"/"+pair.key, "%s.%s: the second duration is smaller than the first", path, pair.key)
				}
			}
			if d.Between[1] == d.Between[0] && d.Between[1] != 0 {
				b.errAt(ptr+"/between", "%s.between: the window is empty", path)
			}
			sc.Draws = append(sc.Draws, d)
		}
	}

	sc.Sandbox.Network = "none"
	if sb, ok := root["sandbox"].(map[string]any); ok {
		if n, ok := sb["network"].(string); ok {
			sc.Sandbox.Network = n
		}
	}

	if rep, ok := root["report"].(map[string]any); ok {
		sc.Report = b.report(rep)
	}

	if reach, ok := root["reach"].(map[string]any); ok {
		r := &chaos.Reach{}
		for key, dst := range map[string]*int{"steps": &r.Steps, "effects": &r.Effects, "llm_calls": &r.LLMCalls} {
			if n, ok := reach[key].(int64); ok {
				*dst = int(n)
			}
		}
		if d, ok := b.duration(reach, "/reach/virtual", "reach.virtual"); ok {
			r.Virtual = d
		}
		if kinds, ok := reach["kinds"].([]any); ok {
			// Which kinds exist, and whether --chaos random can draw them
			// for this reach, is the fault registry's to say: CheckScenario.
			firstAt := map[string]int{}
			for i, v := range kinds {
				name, ok := v.(string)
				if !ok {
					continue
				}
				ptr := "/reach/kinds/" + strconv.Itoa(i)
				if j, dup := firstAt[name]; dup {
					first := b.node("/reach/kinds/" + strconv.Itoa(j))
					b.errAt(ptr, "reach.kinds[%d]: %q is already listed at line %d column %d", i, name, first.Line, first.Column)
					continue
				}
				firstAt[name] = i
				r.Kinds = append(r.Kinds, name)
			}
		}
		sc.Reach = r
	}

	sc.Invariants = DefaultInvariants()
	if sc.Goal == nil && !sc.HasWorld() {
		// Nothing judges a goal: a scenario of HTTP APIs or MCP servers alone has one
		// only when it declares goal:.
		sc.Invariants = slices.DeleteFunc(sc.Invariants, func(n string) bool { return n == invariant.GoalReached })
	}
	if invs, ok := root["invariants"].([]any); ok {
		// Which names exist is the harness's invariant registry's to say
		// (a program may register its own): CheckScenario.
		sc.Invariants = []string{}
		sc.invariantAt = map[string]string{}
		firstAt := map[string]int{}
		for i, v := range invs {
			name, ok := v.(string)
			if !ok {
				continue
			}
			if j, dup := firstAt[name]; dup {
				first := b.node("/invariants/" + strconv.Itoa(j))
				b.errAt("/invariants/"+strconv.Itoa(i), "invariants[%d]: %q is already listed at line %d column %d", i, name, first.Line, first.Column)
				continue
			}
			firstAt[name] = i
			if name == invariant.GoalReached && sc.Goal == nil && !sc.HasWorld() {
				b.errAt("/invariants/"+strconv.Itoa(i), "invariants[%d]: goal-reached needs a goal, and this scenario has no world: and no goal: (add goal: {probe: {api, route, body}, expect})", i)
			}
			sc.Invariants = append(sc.Invariants, name)
			sc.invariantAt[name] = "/invariants/" + strconv.Itoa(i)
		}
	}

	sc.Limits = Limits{Timeout: DefaultTimeout, Horizon: DefaultHorizon, MaxAttempts: DefaultMaxAttempts, Approval: DefaultApproval}
	if lim, ok := root["limits"].(map[string]any); ok {
		if d, ok := b.duration(lim, "/limits/timeout", "limits.timeout"); ok {
			sc.Limits.Timeout = d
		}
		if d, ok := b.duration(lim, "/limits/horizon", "limits.horizon"); ok {
			sc.Limits.Horizon = d
		}
		if d, ok := b.duration(lim, "/limits/recovery", "limits.recovery"); ok {
			sc.Limits.Recovery = d
		}
		if d, ok := b.duration(lim, "/limits/approval", "limits.approval"); ok {
			sc.Limits.Approval = d
		}
		// The schema checks the type and range; only what fits an int is taken.
		switch n := lim["max_attempts"].(type) {
		case int64:
			if n >= 1 && n <= MaxAttemptsLimit {
				sc.Limits.MaxAttempts = int(n)
			}
		case float64:
			if n == math.Trunc(n) && n >= 1 && n <= MaxAttemptsLimit {
				sc.Limits.MaxAttempts = int(n)
			}
		}
	}

	if l, ok := root["llm"].(map[string]any); ok {
		sc.LLM = b.llm(l)
	}
	if r, ok := root["reflect"].(map[string]any); ok {
		sc.Reflect = &Reflect{Replays: DefaultReplays, Max: DefaultReflections}
		if n, ok := r["replays"].(int64); ok {
			sc.Reflect.Replays = int(n)
		}
		if n, ok := r["max"].(int64); ok {
			sc.Reflect.Max = int(n)
		}
	}
	if rules, ok := root["gate"].([]any); ok {
		sc.Gate = b.gate(rules, sc.Reflect != nil)
	}
	sc.Rollback = RollbackNone
	if r, ok := root["rollback"].(string); ok {
		sc.Rollback = r
	}
	if claims, ok := root["claims"].(map[string]any); ok && len(claims) > 0 {
		sc.Claims = make(map[string]*expr.Program, len(claims))
		for name, v := range claims {
			src, ok := v.(string)
			if !ok {
				continue
			}
			ptr := "/claims/" + escapePointer(name)
			if p := b.program(ptr, "claims."+name, src, expr.Bool, ClaimVarState, ClaimVarClaim); p != nil {
				sc.Claims[name] = p
			}
		}
	}

	switch s := root["seed"].(type) {
	case int64:
		sc.Seed = &s
	case float64:
		// An integral float: 1.0, or an integer too large for int64 (YAML gave a float).
		if s == math.Trunc(s) && s >= math.MinInt64 && s < math.MaxInt64 {
			v := int64(s)
			sc.Seed = &v
		} else if s == math.Trunc(s) {
			b.errAt("/seed", "seed: %s does not fit in a 64-bit signed integer", b.node("/seed").Value)
		}
	}
	return sc
}

// agent checks and builds one agent (the default or a variant) at ptr.
func (b *builder) agent(ptr, path string, a map[string]any) AgentSpec {
	var spec AgentSpec
	// Exactly one source. Report every extra one, at its key, in file order.
	var set []string
	for _, k := range []string{"builtin", "binary", "image"} {
		if _, ok := a[k]; ok {
			set = append(set, k)
		}
	}
	slices.SortFunc(set, func(x, y string) int {
		kx, ky := b.keyNode(ptr+"/"+x), b.keyNode(ptr+"/"+y)
		if kx.Line != ky.Line {
			return kx.Line - ky.Line
		}
		return kx.Column - ky.Column
	})
	switch len(set) {
	case 0:
		b.errAt(ptr, "%s: set one of builtin, binary or image", path)
	case 1:
	default:
		for _, extra := range set[1:] {
			k := b.keyNode(ptr + "/" + extra)
			b.sink.addAt(ptr, k.Line, k.Column, "%s: %s and %s are both set; set exactly one of builtin, binary or image", path, set[0], extra)
		}
	}
	spec.Builtin, _ = a["builtin"].(string)
	spec.Image, _ = a["image"].(string)
	if bin, ok := a["binary"].(string); ok && bin != "" {
		spec.Binary = b.binaryPath(ptr+"/binary", path, bin)
	}
	if args, ok := a["args"].([]any); ok && len(args) > 0 {
		for _, v := range args {
			if s, ok := v.(string); ok {
				spec.Args = append(spec.Args, s)
			}
		}
	}
	if command, ok := a["command"].([]any); ok && len(command) > 0 {
		if spec.Image == "" {
			k := b.keyNode(ptr + "/command")
			b.sink.addAt(ptr+"/command", k.Line, k.Column, "%s.command: only an image agent has a command to replace (its ENTRYPOINT); a builtin or binary agent takes args", path)
		}
		for _, v := range command {
			if s, ok := v.(string); ok {
				spec.Command = append(spec.Command, s)
			}
		}
	}
	if env, ok := a["env"].(map[string]any); ok && len(env) > 0 {
		spec.Env = make(map[string]string, len(env))
		for k, v := range env {
			key := b.keyNode(ptr + "/env/" + escapePointer(k))
			if !envKeyPattern.MatchString(k) {
				b.sink.addAt(ptr+"/env", key.Line, key.Column, "%s.env: invalid key %q: must match %s", path, k, envKeyPattern)
				continue
			}
			if strings.HasPrefix(k, "OVERNIGHT_") {
				b.sink.addAt(ptr+"/env", key.Line, key.Column, "%s.env: %q uses the reserved prefix OVERNIGHT_ (the harness sets those variables)", path, k)
				continue
			}
			if s, ok := v.(string); ok {
				spec.Env[k] = s
			}
		}
	}
	return spec
}

// world reads the object form of world:, which the schema has checked
// field by field; what it checks is how the fields go together.
func (b *builder) world(out *World, w map[string]any) {
	out.Name, _ = w["name"].(string)
	out.Options, _ = w["options"].(map[string]any)
	out.URL, _ = w["url"].(string)
	out.Image, _ = w["image"].(string)
	if cmd, ok := w["command"].([]any); ok {
		for _, c := range cmd {
			if s, ok := c.(string); ok {
				out.Command = append(out.Command, s)
			}
		}
	}
	if p, ok := w["port"].(int64); ok {
		out.Port = int(p)
	}
	var ways []string
	for _, k := range []string{"url", "command", "image"} {
		if _, ok := w[k]; ok {
			ways = append(ways, k)
		}
	}
	switch {
	case len(ways) > 1:
		b.errAt("/world/"+ways[1], "world: give one of url, command and image, not %s", strings.Join(ways, " and "))
	case len(ways) == 0 && out.Name == "":
		b.errAt("/world", "world: give a built-in world's name, or one of url, command and image (a world over the world protocol)")
	case len(ways) == 0:
		for _, k := range []string{"env", "port"} {
			if _, ok := w[k]; ok {
				b.errAt("/world/"+k, "world.%s: only a command or image world has one (world %q is built in)", k, out.Name)
			}
		}
	default:
		if _, ok := w["options"]; ok {
			b.errAt("/world/options", "world.options: only a built-in world takes options; a world over the protocol gets its own from its command, image or service")
		}
		if _, ok := w["env"]; ok && out.URL != "" {
			b.errAt("/world/env", "world.env: only a command or image world has an environment (this one runs at %s)", out.URL)
		}
		if _, ok := w["port"]; ok && out.Image == "" {
			b.errAt("/world/port", "world.port: only an image world has one")
		}
	}
	if out.URL != "" {
		if u, err := url.Parse(out.URL); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			b.errAt("/world/url", "world.url: %q is not an http(s) base URL", out.URL)
		}
	}
	if len(out.Command) > 0 {
		if strings.HasPrefix(b.file, BuiltinPrefix) {
			b.errAt("/world/command", "world.command: a built-in scenario cannot start a world")
		} else if abs, err := filepath.Abs(filepath.Dir(b.file)); err == nil {
			out.Dir = abs
		}
	}
	if env, ok := w["env"].(map[string]any); ok {
		out.Env = map[string]string{}
		for k, v := range env {
			key := b.keyNode("/world/env/" + escapePointer(k))
			if strings.HasPrefix(k, "OVERNIGHT_") {
				b.sink.addAt("/world/env", key.Line, key.Column, "world.env: %q uses the reserved prefix OVERNIGHT_ (the harness sets those variables)", k)
				continue
			}
			if s, ok := v.(string); ok {
				out.Env[k] = s
			}
		}
	}
	if out.Image != "" && out.Port == 0 {
		out.Port = DefaultWorldPort
	}
}

// binaryPath resolves a relative binary path against the scenario file's directory.
func (b *builder) binaryPath(ptr, path, bin string) string {
	if filepath.IsAbs(bin) {
		return filepath.Clean(bin)
	}
	if strings.HasPrefix(b.file, BuiltinPrefix) {
		b.errAt(ptr, "%s.binary: a built-in scenario cannot use a relative path (%q); use builtin: or an absolute path", path, bin)
		return bin
	}
	p := filepath.Join(filepath.Dir(b.file), bin)
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return p
}

// duration parses an optional positive duration field of m.
func (b *builder) duration(m map[string]any, ptr, path string) (time.Duration, bool) {
	key := ptr[strings.LastIndexByte(ptr, '/')+1:]
	text, ok := m[key].(string)
	if !ok {
		return 0, false
	}
	d, err := chaos.ParseDuration(text)
	if err != nil {
		var de *chaos.DurationError
		if errors.As(err, &de) {
			line, col := b.inside(b.node(ptr), utf8.RuneCountInString(text[:de.Offset]))
			b.sink.addAt(ptr, line, col, "%s: %s", path, err)
		} else {
			b.errAt(ptr, "%s: %v", path, err)
		}
		return 0, false
	}
	if d <= 0 {
		b.errAt(ptr, "%s: must be greater than 0", path)
		return 0, false
	}
	return d, true
}

// durationAt parses the duration string at items[i] (a list at ptr); zero
// is allowed.
func (b *builder) durationAt(items []any, i int, ptr, path string) (time.Duration, bool) {
	text, ok := items[i].(string)
	if !ok {
		return 0, false
	}
	d, err := chaos.ParseDuration(text)
	if err != nil {
		b.errAt(ptr+"/"+strconv.Itoa(i), "%s: %v", path, err)
		return 0, false
	}
	return d, true
}

// inside returns the position of the character at runeOffset inside scalar n's value, when the
// value sits on one line exactly as written (plain, or quoted without escapes). Otherwise it
// returns the position of n itself: best effort, never a wrong line.
func (b *builder) inside(n *yaml.Node, runeOffset int) (line, col int) {
	line, col = n.Line, n.Column
	if n.Kind != yaml.ScalarNode || strings.ContainsAny(n.Value, "\r\n") || runeOffset < 0 {
		return line, col
	}
	start := lineStart(b.data, n.Line)
	if start < 0 {
		return line, col
	}
	src := string(b.data[start:])
	if end := strings.IndexAny(src, "\r\n"); end >= 0 {
		src = src[:end]
	}
	runes := []rune(src)
	if n.Column-1 > len(runes) {
		return line, col
	}
	written := string(runes[n.Column-1:])
	switch {
	case n.Style&(yaml.LiteralStyle|yaml.FoldedStyle|yaml.TaggedStyle) != 0:
	case n.Style&yaml.DoubleQuotedStyle != 0 && strings.HasPrefix(written, `"`+n.Value+`"`),
		n.Style&yaml.SingleQuotedStyle != 0 && strings.HasPrefix(written, `'`+n.Value+`'`):
		return line, col + 1 + runeOffset
	case n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 && strings.HasPrefix(written, n.Value):
		return line, col + runeOffset
	}
	return line, col
}

// String summarises the scenario for logs: name, world, agent and faults.
func (s *Scenario) String() string {
	return fmt.Sprintf("scenario %s (world %s, agent %s, %d faults) from %s", s.Name, s.World.Name, s.Agent, len(s.Faults), s.Source)
}

// String names the agent's source: "builtin:deployer", "binary:/path", "image:my-agent:dev".
func (a AgentSpec) String() string {
	switch {
	case a.Builtin != "":
		return "builtin:" + a.Builtin
	case a.Binary != "":
		return "binary:" + a.Binary
	case a.Image != "":
		return "image:" + a.Image
	}
	return "none"
}

// gate checks and builds the gate's policies: each kinds a valid glob, and
// verify only where reflection is on.
func (b *builder) gate(rules []any, reflecting bool) []GateRule {
	out := []GateRule{}
	for i, r := range rules {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		ptr := "/gate/" + strconv.Itoa(i)
		rule := GateRule{}
		rule.Kinds, _ = m["kinds"].(string)
		rule.Policy, _ = m["policy"].(string)
		if _, err := path.Match(rule.Kinds, ""); err != nil {
			b.errAt(ptr+"/kinds", "gate[%d].kinds: %q is not a valid glob: %v", i, rule.Kinds, err)
			continue
		}
		if rule.Policy == PolicyVerify && !reflecting {
			b.errAt(ptr+"/policy", "gate[%d].policy: verify guards effects with reflection, which is off: add a reflect: block (e.g. reflect: {}) or choose allow, approve or deny", i)
			continue
		}
		out = append(out, rule)
	}
	return out
}

// report reads a report: block; its path must be a file in the workspace.
func (b *builder) report(m map[string]any) *Report {
	r := &Report{MaxBytes: DefaultReportMaxBytes}
	if n, ok := m["max_bytes"].(int64); ok {
		r.MaxBytes = n
	}
	p, ok := m["path"].(string)
	if !ok {
		return r // the schema said so
	}
	const ws = "/workspace/"
	switch {
	case path.Clean(p) != p:
		b.errAt("/report/path", "report.path: %q is not a clean path (write %q)", p, path.Clean(p))
	case !strings.HasPrefix(p, ws) || len(p) == len(ws):
		b.errAt("/report/path", "report.path: %q is not a file under /workspace, the only directory kept across the agent's attempts", p)
	default:
		r.Path = p
	}
	return r
}
