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
	if spec.Kind == "mcp-slow" {
		_, arg, _ = strings.Cut(arg, ":")
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
			"The call is in doubt: unknown (MCP has no lookup) unless its tool is idempotent, when a retry under its key runs it again")
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
	}
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
