package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"time"
)

// PathMCP is the path of the calls to the scenario's MCP servers
// (MCP.SetMCPToxic): the MCP faults stack on it as effect toxics do.
const PathMCP = "mcp"

// MCP is what MCP faults act on: the tools/call effects the gateway sends
// to the scenario's MCP servers.
type MCP interface {
	// SetMCPToxic makes the next tools/call it matches (or every one, if
	// not Once) meet the toxic. The zero MCPToxic removes it.
	SetMCPToxic(t MCPToxic)
	// ChangeMCPTool changes a tool as the gateway serves it: it vanishes,
	// or its input schema changes (see MCPToolChange). RestoreMCPTool
	// serves it as its server lists it again.
	ChangeMCPTool(c MCPToolChange)
	RestoreMCPTool(tool MCPScope)
}

// MCPToolChange is a change of one tool (Tool names its server and tool)
// that the gateway itself makes, the real server unchanged: the tool is
// Gone from tools/list (a call to it is a tool error saying so), or its
// input schema changes — arguments renamed, new ones required — and the
// gateway refuses a call in the old shape with a tool error saying what
// changed, and translates one in the new shape back to the server's.
type MCPToolChange struct {
	Tool    MCPScope
	Gone    bool
	Renames []MCPRename
	Require []string
}

// MCPRename is an argument renamed: the agent must send New for Old.
type MCPRename struct{ Old, New string }

// parseMCPToolChange parses mcp-schema's argument: SERVER__TOOL:CHANGE[,CHANGE],
// each CHANGE rename=OLD>NEW or require=NAME.
func parseMCPToolChange(arg string) (MCPToolChange, error) {
	want := fmt.Errorf("mcp-schema %q: want SERVER__TOOL:CHANGE[,CHANGE] with CHANGE rename=OLD>NEW or require=NAME (e.g. tickets__create_ticket:rename=title>summary)", arg)
	scope, changes, ok := strings.Cut(arg, ":")
	sc, err := ParseMCPScope(scope)
	if !ok || err != nil || sc.Tool == "" || changes == "" {
		return MCPToolChange{}, want
	}
	c := MCPToolChange{Tool: sc}
	for _, ch := range strings.Split(changes, ",") {
		op, v, _ := strings.Cut(ch, "=")
		switch op {
		case "rename":
			old, nw, ok := strings.Cut(v, ">")
			if !ok || !mcpNameRE.MatchString(old) || !mcpNameRE.MatchString(nw) || old == nw {
				return MCPToolChange{}, want
			}
			c.Renames = append(c.Renames, MCPRename{Old: old, New: nw})
		case "require":
			if !mcpNameRE.MatchString(v) {
				return MCPToolChange{}, want
			}
			c.Require = append(c.Require, v)
		default:
			return MCPToolChange{}, want
		}
	}
	return c, nil
}

// MCP toxic kinds.
const (
	MCPToolError = "tool-error" // answer isError without reaching the server (failed, transient)
	MCPRPCError  = "rpc-error"  // answer a JSON-RPC error without reaching the server (failed, transient)
	MCPTimeout   = "timeout"    // the server acts, its answer is held (at most MaxMCPTimeout) and lost: unknown
	MCPSlow      = "slow"       // the answer comes Delay of virtual time later
	MCPCrash     = "crash"      // the stdio server is SIGKILLed after it received the call, its answer lost
)

// MaxMCPTimeout bounds the real time an mcp-timeout fault holds a call.
const MaxMCPTimeout = 2 * time.Second

// MCPToxic is a toxic on the MCP path.
type MCPToxic struct {
	Kind  string        // one of the MCP* kinds; "" for none
	Scope MCPScope      // which calls it hits
	Delay time.Duration // for MCPSlow: virtual time the answer takes
	Once  bool          // only the next call it matches
}

// MCPScope says which tools/call an MCP fault hits: every one (the zero
// scope), every one to Server, or only Server's Tool.
type MCPScope struct {
	Server string
	Tool   string
}

// MCPToolSeparator joins a server's name and its tool's as the agent sees
// the tool (scenarios.MCPToolSeparator; chaos does not import scenarios).
const MCPToolSeparator = "__"

var mcpNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ParseMCPScope parses "", "SERVER" or "SERVER__TOOL".
func ParseMCPScope(s string) (MCPScope, error) {
	if s == "" {
		return MCPScope{}, nil
	}
	server, tool, hasTool := strings.Cut(s, MCPToolSeparator)
	if server == "" || !mcpNameRE.MatchString(server) || (hasTool && (tool == "" || !mcpNameRE.MatchString(tool))) {
		return MCPScope{}, fmt.Errorf("MCP scope %q: want SERVER or SERVER__TOOL (the tool as the agent sees it, e.g. tickets__create_ticket)", s)
	}
	return MCPScope{Server: server, Tool: tool}, nil
}

// String is the scope as written ("" for every call).
func (s MCPScope) String() string {
	if s.Tool != "" {
		return s.Server + MCPToolSeparator + s.Tool
	}
	return s.Server
}

// Matches says whether the scope takes a call of server's tool.
func (s MCPScope) Matches(server, tool string) bool {
	return (s.Server == "" || s.Server == server) && (s.Tool == "" || s.Tool == tool)
}

// MCPScopeOf is the scope of an MCP fault's spec: its argument, after the
// delay for mcp-slow. Specs of other kinds have the zero scope.
func MCPScopeOf(spec Spec) (MCPScope, error) {
	arg := spec.Arg
	switch spec.Kind {
	case "mcp-slow":
		_, arg, _ = strings.Cut(arg, ":")
	case "mcp-schema":
		arg, _, _ = strings.Cut(arg, ":")
	}
	return ParseMCPScope(arg)
}

// mcpKinds are the MCP faults of the catalog.
func mcpKinds() []Kind {
	const scope = "[SERVER|SERVER__TOOL]: the calls it hits (default: every tools/call)"
	mk := func(name, toxic string, severity int, example, summary string) Kind {
		return Kind{
			Name: name, Group: "mcp", MCP: true, Path: PathMCP, Severity: severity, MetBy: MetByEffectHit,
			Triggers: anyTrigger, DrawTriggers: effectOnly, DefaultPhase: PhaseBefore, Example: example,
			Arg: scope, Duration: DurationOptional, Summary: summary, Draw: noArg,
			New: func(s Spec) (Fault, error) {
				sc, err := ParseMCPScope(s.Arg)
				if err != nil {
					return nil, err
				}
				return mcpFault{toxic: MCPToxic{Kind: toxic, Scope: sc, Once: s.Duration == 0}}, nil
			},
		}
	}
	crash := mk("mcp-crash", MCPCrash, 4, "mcp-crash:tickets@effect:2",
		"SIGKILL the stdio MCP server after it received the call and acted, before its answer reaches the harness; the harness starts it again on its data for the next call. "+
			"The call is in doubt: a retry under its key is reconciled through the tool's lookup when the scenario declares one (mcp.servers[].lookups), else it stays unknown unless its tool is idempotent, when the retry runs it again")
	crash.Draw = nil // only a stdio server can be killed: scheduled by hand
	crash.Arg = "[SERVER|SERVER__TOOL]: the calls it hits (a stdio server's; default: every tools/call)"
	return []Kind{
		mk("mcp-error", MCPToolError, 3, "mcp-error:tickets__create_ticket@effect:2",
			"answer the tools/call with the tool's error result (isError) without reaching the server: the next matching call, or every one for /DURATION; journaled failed and transient, so a retry under the same key runs it"),
		mk("mcp-rpc-error", MCPRPCError, 3, "mcp-rpc-error:tickets@effect:1",
			"answer the tools/call with a JSON-RPC error (-32603) without reaching the server: the next matching call, or every one for /DURATION; journaled failed and transient"),
		mk("mcp-timeout", MCPTimeout, 2, "mcp-timeout@effect:3",
			"the server acts on the tools/call, its answer is held (at most 2s of real time) and lost: the call is in doubt (unknown), reconciled from the world's journal of answers on a retry under the same key"),
		{
			Name: "mcp-slow", Group: "mcp", MCP: true, Path: PathMCP, Severity: 1, MetBy: MetByEffectHit,
			Triggers: anyTrigger, DrawTriggers: effectOnly, DefaultPhase: PhaseBefore, Example: "mcp-slow:30s:tickets@effect:1/1h",
			Arg: "DELAY[:SERVER|SERVER__TOOL]: the virtual time each answer takes, and the calls it hits", ArgNeed: true,
			Duration: DurationOptional,
			Summary:  "the server's answer to a tools/call comes DELAY of virtual time later (the run's clock moves on): the next matching call, or every one for /DURATION",
			New: func(s Spec) (Fault, error) {
				ds, _, _ := strings.Cut(s.Arg, ":")
				d, err := ParseDuration(ds)
				if err != nil || d <= 0 {
					return nil, fmt.Errorf("mcp-slow %q: want DELAY[:SERVER|SERVER__TOOL] with a positive delay", s.Arg)
				}
				sc, err := MCPScopeOf(s)
				if err != nil {
					return nil, err
				}
				return mcpFault{toxic: MCPToxic{Kind: MCPSlow, Scope: sc, Delay: d, Once: s.Duration == 0}}, nil
			},
			Draw: func(rng *rand.Rand, r Reach) (string, time.Duration) {
				return FormatDuration(time.Duration(1+rng.IntN(30)) * time.Second), 0
			},
		},
		crash,
		{
			Name: "mcp-tool-gone", Group: "mcp", MCP: true, MetBy: MetByLaterCallOfTool, DefaultPhase: PhaseBefore, Triggers: onceTriggers,
			Example: "mcp-tool-gone:tickets__close_ticket@effect:3",
			Arg:     "SERVER__TOOL: the tool that vanishes", ArgNeed: true, Duration: DurationOptional,
			Summary: "the tool vanishes: the gateway's tools/list omits it from then on, and a call to it is a tool error (isError) saying it is gone, which never reaches the server; with /DURATION it comes back. " +
				"The gateway sends notifications/tools/list_changed to the agent's open MCP streams when it vanishes and when it comes back",
			New: func(s Spec) (Fault, error) {
				sc, err := ParseMCPScope(s.Arg)
				if err != nil || sc.Tool == "" {
					return nil, fmt.Errorf("mcp-tool-gone %q: want SERVER__TOOL, the tool as the agent sees it (e.g. tickets__close_ticket)", s.Arg)
				}
				return mcpToolFault{change: MCPToolChange{Tool: sc, Gone: true}}, nil
			},
		},
		{
			Name: "mcp-schema", Group: "mcp", MCP: true, MetBy: MetByLaterCallOfTool, DefaultPhase: PhaseBefore, Triggers: onceTriggers,
			Example: "mcp-schema:tickets__create_ticket:rename=title>summary,require=priority@effect:2",
			Arg:     "SERVER__TOOL:CHANGE[,CHANGE], each CHANGE rename=OLD>NEW or require=NAME", ArgNeed: true, Duration: DurationOptional,
			Summary: "the tool's input schema changes (the MCP form of an API version change): the gateway serves the changed schema, refuses a call in the old shape (the old argument, or a new required one missing) " +
				"with a tool error saying what changed, and translates a call in the new shape to the server's (NEW back to OLD, a required argument the server does not know dropped); with /DURATION it changes back. " +
				"The gateway sends notifications/tools/list_changed to the agent's open MCP streams when it changes and when it changes back",
			New: func(s Spec) (Fault, error) {
				c, err := parseMCPToolChange(s.Arg)
				if err != nil {
					return nil, err
				}
				return mcpToolFault{change: c}, nil
			},
		},
	}
}

type mcpToolFault struct{ change MCPToolChange }

func (f mcpToolFault) Inject(ctx context.Context, t Target) error {
	t.ChangeMCPTool(f.change)
	return nil
}

func (f mcpToolFault) Undo(ctx context.Context, t Target) error {
	t.RestoreMCPTool(f.change.Tool)
	return nil
}

type mcpFault struct{ toxic MCPToxic }

func (f mcpFault) Inject(ctx context.Context, t Target) error {
	t.SetMCPToxic(f.toxic)
	return nil
}

func (f mcpFault) Undo(ctx context.Context, t Target) error {
	t.SetMCPToxic(MCPToxic{})
	return nil
}
