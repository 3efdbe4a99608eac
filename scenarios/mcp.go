package scenarios

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/overnight-dev/overnight/scenarios/expr"
)

// MCPKindPrefix starts the effect kind of every tool call to an MCP
// server: mcp.<server>.<tool>.
const MCPKindPrefix = "mcp."

// Where an MCP tool call's idempotency key comes from (mcp.keys).
const (
	// MCPKeysAgent: the agent gives it in the call's _meta
	// (MCPMetaIdempotencyKey); a call without one is unkeyed. The default.
	MCPKeysAgent = "agent"
	// MCPKeysDerived: a call without a key of its own gets one the harness
	// derives from the attempt's last durable checkpoint (its seq), the
	// call's ordinal among the mutating calls since that checkpoint, the
	// tool and its arguments' digest; read-only calls stay unkeyed. A key
	// the agent gives still wins.
	MCPKeysDerived = "derived"
)

// The _meta fields of MCP tool calls the gateway reads and writes.
const (
	// MCPMetaIdempotencyKey is the field of a tools/call's _meta holding
	// the agent's idempotency key; the gateway passes the effect's key to
	// the server in the same field.
	MCPMetaIdempotencyKey = "overnight.dev/idempotency-key"
	// MCPMetaReplayed is set to true in the _meta of a result answered
	// from the journal rather than by the server.
	MCPMetaReplayed = "overnight.dev/replayed"
	// MCPMetaReconciled is set to true in the _meta of the result of a
	// call left in doubt that the server's lookup found had taken effect:
	// the server's own answer was lost.
	MCPMetaReconciled = "overnight.dev/reconciled"
)

// MCPReconciled reports whether result, a journaled CallToolResult, is
// the answer the harness wrote when a lookup found an in-doubt call done
// (MCPMetaReconciled in its _meta): the server's own answer was lost.
func MCPReconciled(result json.RawMessage) bool {
	var r struct {
		Meta map[string]any `json:"_meta"`
	}
	return json.Unmarshal(result, &r) == nil && r.Meta[MCPMetaReconciled] == true
}

// MCPToolSeparator joins a server's name and a tool's as the agent sees
// the tool: <server>__<tool>.
const MCPToolSeparator = "__"

// MCPDataDir is the placeholder a command or image server's env values
// may use for its data directory under the state dir (MCPImageDataDir
// inside an image server's container).
const MCPDataDir = "{{data_dir}}"

// MCPImageDataDir is where an image server's data directory is mounted
// inside its container: what MCPDataDir stands for in its env.
const MCPImageDataDir = "/data"

// The defaults of an image server's endpoint inside its container.
const (
	DefaultMCPPort = 8080   // MCPServer.Port
	DefaultMCPPath = "/mcp" // MCPServer.Path
)

// mcpToolName is what an OpenAI-style tool list accepts as a name.
var mcpToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// MCP is the mcp: block: the MCP servers the gateway fronts.
type MCP struct {
	Servers []MCPServer
	Keys    string // MCPKeysAgent
	// Replay, when set, names the run whose recording — each server's
	// tools/list and answers — answers every call (mcp.replay, or
	// --mcp-replay, which wins): no server is started or reached.
	Replay string
}

// MCPServer is one MCP server of mcp.servers: a stdio Command the harness
// starts, a streamable HTTP URL already running, or an Image the harness
// runs as a container per run.
type MCPServer struct {
	Name       string
	Command    []string
	Env        map[string]string // a command or image server's; values may hold MCPDataDir; nil if none
	URL        string
	Image      string // an image already on the engine, run as a container per run
	Port       int    // an image server's port inside its container (DefaultMCPPort)
	Path       string // an image server's streamable HTTP path (DefaultMCPPath)
	Replayable bool
	// Lookups are how a call left in doubt is looked for, by the tool
	// called (nil: none; such a call stays unknown).
	Lookups map[string]MCPLookup
	// Dir is the directory a command server runs in: the scenario file's
	// ("" for a built-in scenario).
	Dir string
}

// MCPLookup is how a call of one tool left in doubt is looked for: read
// only Tool of the same server, called with Args, its answer judged by
// Found.
type MCPLookup struct {
	Tool  string
	Args  *expr.Program // JSON over args and key; nil: {}
	Found *expr.Program // bool over args, key and response
	// At is where the scenario declares it (file:line:column), for an
	// error found when the server lists its tools.
	At string
}

// Variables of an MCP lookup's expressions, beside expr.Args and
// expr.Response.
const (
	// MCPVarKey is the in-doubt call's idempotency key, as the server got
	// it in _meta (MCPMetaIdempotencyKey).
	MCPVarKey expr.Var = "key"
)

// EffectKind is the effect kind of the server's tool: mcp.<server>.<tool>.
func (s MCPServer) EffectKind(tool string) string { return MCPKindPrefix + s.Name + "." + tool }

// ToolName is the tool as the agent sees it: <server>__<tool>.
func (s MCPServer) ToolName(tool string) string { return s.Name + MCPToolSeparator + tool }

// Label names the server for people: its name and where it runs.
func (s MCPServer) Label() string {
	if s.URL != "" {
		return fmt.Sprintf("MCP server %s (%s)", s.Name, s.URL)
	}
	if s.Image != "" {
		return fmt.Sprintf("MCP server %s (image %s)", s.Name, s.Image)
	}
	return fmt.Sprintf("MCP server %s (%s)", s.Name, strings.Join(s.Command, " "))
}

// CheckToolName reports why the agent could not be given tool of the
// server as <server>__<tool> (nil: it can).
func (s MCPServer) CheckToolName(tool string) error {
	if name := s.ToolName(tool); !mcpToolName.MatchString(name) {
		return fmt.Errorf("%s lists tool %q, and %q is not a tool name an agent's model accepts (%s)", s.Label(), tool, name, mcpToolName)
	}
	return nil
}

// MCPServer returns the scenario's MCP server called name.
func (s *Scenario) MCPServer(name string) (MCPServer, bool) {
	if s.MCP == nil {
		return MCPServer{}, false
	}
	for _, m := range s.MCP.Servers {
		if m.Name == name {
			return m, true
		}
	}
	return MCPServer{}, false
}

// MCPServers are the scenario's MCP servers (nil: none).
func (s *Scenario) MCPServers() []MCPServer {
	if s.MCP == nil {
		return nil
	}
	return s.MCP.Servers
}

// ReplayingMCP is the scenario with every MCP server answered from run
// recording's journal instead of reached (MCP.Replay); s itself when
// recording is "" or it declares no MCP server.
func (s *Scenario) ReplayingMCP(recording string) *Scenario {
	if recording == "" || s.MCP == nil {
		return s
	}
	out := *s
	m := *s.MCP
	m.Replay = recording
	out.MCP = &m
	return &out
}

// ReplaysMCP reports whether the scenario's MCP servers are answered from
// a recording (MCP.Replay).
func (s *Scenario) ReplaysMCP() bool { return s.MCP != nil && s.MCP.Replay != "" }

// HasAPIs reports whether the scenario declares HTTP APIs or MCP servers:
// worlds beside (or instead of) its world:, behind one router.
func (s *Scenario) HasAPIs() bool { return len(s.HTTP) > 0 || len(s.MCPServers()) > 0 }

// mcp checks and builds mcp:, whose server names must differ from the
// HTTP APIs' names.
func (b *builder) mcp(m map[string]any, apis []HTTPAPI) *MCP {
	out := &MCP{Keys: MCPKeysAgent}
	if k, ok := m["keys"].(string); ok {
		out.Keys = k
	}
	if r, ok := m["replay"].(string); ok {
		out.Replay = r
		if r == "" || strings.ContainsAny(r, " \t\n/") {
			b.errAt("/mcp/replay", "mcp.replay: %q is not a run's id: name the run whose recording answers the calls (overnight runs lists them)", r)
		}
	}
	list, _ := m["servers"].([]any)
	names := map[string]int{}
	for i, v := range list {
		sm, ok := v.(map[string]any)
		if !ok {
			continue
		}
		ptr, path := "/mcp/servers/"+strconv.Itoa(i), fmt.Sprintf("mcp.servers[%d]", i)
		s := MCPServer{}
		s.Name, _ = sm["name"].(string)
		if j, dup := names[s.Name]; dup && s.Name != "" {
			first := b.node("/mcp/servers/" + strconv.Itoa(j) + "/name")
			b.errAt(ptr+"/name", "%s.name: %q is already declared at line %d column %d", path, s.Name, first.Line, first.Column)
		}
		names[s.Name] = i
		if j := slices.IndexFunc(apis, func(a HTTPAPI) bool { return a.Name == s.Name }); j >= 0 && s.Name != "" {
			first := b.node("/http/" + strconv.Itoa(j) + "/name")
			b.errAt(ptr+"/name", "%s.name: %q is already the name of the HTTP API at line %d column %d", path, s.Name, first.Line, first.Column)
		}
		if strings.Contains(s.Name, MCPToolSeparator) {
			b.errAt(ptr+"/name", "%s.name: %q holds %q, which separates a server's name from a tool's as the agent sees them", path, s.Name, MCPToolSeparator)
		}
		if cmd, ok := sm["command"].([]any); ok {
			for _, c := range cmd {
				if c, ok := c.(string); ok {
					s.Command = append(s.Command, c)
				}
			}
		}
		s.URL, _ = sm["url"].(string)
		s.Image, _ = sm["image"].(string)
		if p, ok := sm["port"].(int64); ok {
			s.Port = int(p)
		}
		s.Path, _ = sm["path"].(string)
		s.Replayable, _ = sm["replayable"].(bool)
		if env, ok := sm["env"].(map[string]any); ok && len(env) > 0 {
			s.Env = map[string]string{}
			for k, v := range env {
				val, _ := v.(string)
				s.Env[k] = val
				if strings.HasPrefix(k, "OVERNIGHT_") {
					b.errAt(ptr+"/env/"+escapePointer(k), "%s.env.%s: the prefix OVERNIGHT_ is reserved for the harness", path, k)
				}
				if rest := strings.ReplaceAll(val, MCPDataDir, ""); strings.Contains(rest, "{{") {
					b.errAt(ptr+"/env/"+escapePointer(k), "%s.env.%s: %q: the only placeholder is %s", path, k, val, MCPDataDir)
				}
			}
		}
		if lk, ok := sm["lookups"].(map[string]any); ok && len(lk) > 0 {
			s.Lookups = b.mcpLookups(ptr+"/lookups", path+".lookups", lk)
		}
		var ways []string
		for _, k := range []string{"command", "url", "image"} {
			if _, ok := sm[k]; ok {
				ways = append(ways, k)
			}
		}
		switch {
		case len(ways) > 1:
			b.errAt(ptr+"/"+ways[1], "%s: give one of command, url and image, not %s", path, strings.Join(ways, " and "))
		case len(ways) == 0:
			b.errAt(ptr, "%s: give command: (a stdio server the harness starts), url: (a streamable HTTP server already running) or image: (a container the harness runs)", path)
		}
		for _, k := range []string{"port", "path"} {
			if _, ok := sm[k]; ok && s.Image == "" {
				b.errAt(ptr+"/"+k, "%s.%s: only an image server has one", path, k)
			}
		}
		if s.Image != "" {
			if s.Port == 0 {
				s.Port = DefaultMCPPort
			}
			if s.Path == "" {
				s.Path = DefaultMCPPath
			}
		}
		if s.URL != "" {
			if u, err := url.Parse(s.URL); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
				b.errAt(ptr+"/url", "%s.url: %q is not an http(s) URL", path, s.URL)
			}
			if _, ok := sm["env"]; ok {
				b.errAt(ptr+"/env", "%s.env: only a command or image server has an environment (this one runs at %s)", path, s.URL)
			}
		}
		if len(s.Command) > 0 {
			if strings.HasPrefix(b.file, BuiltinPrefix) {
				b.errAt(ptr+"/command", "%s.command: a built-in scenario cannot start an MCP server", path)
			} else if abs, err := filepath.Abs(filepath.Dir(b.file)); err == nil {
				s.Dir = abs
			}
		}
		out.Servers = append(out.Servers, s)
	}
	return out
}

// mcpLookups checks and builds a server's lookups, by tool. Whether each
// names tools the server lists, the lookup's read-only, is checked when
// the server lists them (mcpworld).
func (b *builder) mcpLookups(ptr, path string, m map[string]any) map[string]MCPLookup {
	out := map[string]MCPLookup{}
	for tool, v := range m {
		lm, ok := v.(map[string]any)
		if !ok {
			continue
		}
		lptr, lpath := ptr+"/"+escapePointer(tool), path+"."+tool
		n := b.node(lptr)
		l := MCPLookup{At: fmt.Sprintf("%s:%d:%d", b.file, n.Line, n.Column)}
		l.Tool, _ = lm["tool"].(string)
		if l.Tool == tool {
			b.errAt(lptr+"/tool", "%s.tool: %q is the tool looked up: a call in doubt is looked for with a read-only tool", lpath, l.Tool)
		}
		if args, ok := lm["args"].(string); ok && args != "" {
			l.Args = b.program(lptr+"/args", lpath+".args", args, expr.JSON, expr.Args, MCPVarKey)
		}
		if found, ok := lm["found"].(string); ok && found != "" {
			l.Found = b.program(lptr+"/found", lpath+".found", found, expr.Bool, expr.Args, MCPVarKey, expr.Response)
		}
		out[tool] = l
	}
	return out
}
