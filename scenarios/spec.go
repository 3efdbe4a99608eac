package scenarios

import (
	"reflect"
	"regexp"
	"strings"
)

// The file format as written: one Go type per mapping of a scenario file, one field per key.
// These types are the single source of the JSON Schema (scenario.schema.json, SchemaJSON):
// `go generate ./scenarios` reflects them into it (scenarios/internal/schemagen), and a test
// fails when the committed schema differs from what they produce. Parse does not decode into
// them — it validates the YAML tree against the schema, so that every error keeps its
// file:line:column, and then checks the rest — but FromValue takes a ScenarioFile.
//
// What the schema says comes from each field's tags and doc comment:
//   - json: the key; the yaml tag is the same, for FromValue.
//   - the field's doc comment: the key's description, shown by editors.
//   - jsonschema (github.com/invopop/jsonschema's vocabulary): required, nullable (the key
//     may be written empty, as in `faults:`, and then counts as absent), pattern,
//     minLength, maxLength, minimum, maximum, exclusiveMinimum, minItems, maxItems, enum.
//   - jsonschema_extras: keywords the generator adds or rewrites itself —
//     const=VALUE (the only value allowed), propertyNames=PATTERN (for a mapping's keys,
//     which the loader checks as well: see keyPattern), and shorthand=FIELD (the mapping
//     may also be written as the value of that one field alone, as `world: cloud`).

// ScenarioFile is a scenario file (apiVersion overnight/v1, kind Scenario) as written. The
// package doc shows one.
type ScenarioFile struct {
	// Version of this file format: overnight/v1.
	APIVersion string `json:"apiVersion" yaml:"apiVersion" jsonschema:"required" jsonschema_extras:"const=overnight/v1"`
	// Always Scenario.
	Kind string `json:"kind" yaml:"kind" jsonschema:"required" jsonschema_extras:"const=Scenario"`
	// Scenario name: lowercase letters, digits and '-', starting with a letter or digit.
	Name string `json:"name" yaml:"name" jsonschema:"required,pattern=^[a-z0-9][a-z0-9-]*$,maxLength=63"`
	// What the scenario exercises, for people (overnight scenarios prints it).
	Description string `json:"description,omitempty" yaml:"description,omitempty" jsonschema:"nullable"`
	// The world the agent acts on: a built-in's name (overnight worlds lists them), or {name, options}, or a world of your own over the world protocol — {url}, {command} or {image, port} (docs/worlds.md). Required unless the scenario declares http: APIs or mcp: servers.
	World WorldFile `json:"world,omitempty" yaml:"world,omitempty" jsonschema_extras:"shorthand=name"`
	// HTTP APIs the agent calls with its own HTTP client through the gateway ($OVERNIGHT_HTTP_<NAME>): every request an effect of kind http.<name>.<kind>, credentials added by the gateway (docs/http-apis.md).
	HTTP []HTTPFile `json:"http,omitempty" yaml:"http,omitempty" jsonschema:"nullable"`
	// MCP servers the agent calls through the gateway's MCP endpoint ($OVERNIGHT_MCP_URL): every tools/call an effect of kind mcp.<server>.<tool> (docs/mcp.md).
	MCP *MCPFile `json:"mcp,omitempty" yaml:"mcp,omitempty" jsonschema:"nullable"`
	// How goal-reached is judged from an HTTP API: a read-only probe request and a CEL expression over its response. Without it, the world's own goal judges.
	Goal *GoalFile `json:"goal,omitempty" yaml:"goal,omitempty" jsonschema:"nullable"`
	// The agent to run: exactly one of builtin, binary or image, with its command, args and env.
	Agent AgentFile `json:"agent" yaml:"agent" jsonschema:"required"`
	// Named agent variants, chosen with --agent NAME.
	Agents map[string]AgentFile `json:"agents,omitempty" yaml:"agents,omitempty" jsonschema:"nullable" jsonschema_extras:"propertyNames=^[A-Za-z0-9][A-Za-z0-9_.-]*$"`
	// Free-form task handed to the agent in GET /v1/run; the world's goal judges it (overnight worlds shows the shape each goal wants).
	Task map[string]any `json:"task,omitempty" yaml:"task,omitempty" jsonschema:"nullable"`
	// Fault specs, KIND[:ARG]@TRIGGER[/DURATION], such as kill@step:3 or netdrop@t:36h/2h (overnight faults lists the kinds).
	Faults []string `json:"faults,omitempty" yaml:"faults,omitempty" jsonschema:"nullable"`
	// Faults drawn from the run's seed: count of them, each of one of kinds, at a virtual time in [between[0], between[1]), lasting a duration in [duration[0], duration[1]] when the kind takes one.
	Draws []DrawFile `json:"draws,omitempty" yaml:"draws,omitempty" jsonschema:"nullable"`
	// The agent's sandbox. network: internal gives every attempt's container a per-run internal network (no route out) instead of none, which the disconnect fault can cut.
	Sandbox *SandboxFile `json:"sandbox,omitempty" yaml:"sandbox,omitempty" jsonschema:"nullable"`
	// The agent's report file, such as {path: /workspace/report.md}: copied out of its sandbox when it reports done, kept with the run and shown in the run's report (docs/scenarios.md). It needs a sandbox backend with the copy-out capability.
	Report *ReportFile `json:"report,omitempty" yaml:"report,omitempty" jsonschema:"nullable"`
	// What a run of this scenario can reach, for --chaos random: checkpoint steps, effects, LLM calls, virtual time; and the fault kinds it draws.
	Reach *ReachFile `json:"reach,omitempty" yaml:"reach,omitempty" jsonschema:"nullable"`
	// Invariant names: the built-in no-duplicate-effects, goal-reached, no-lost-progress, effects-resolved, faults-fired, state-consistent, or one a Go program registered with its harness (harness.Options.Invariants); overnight validate and run check them against the harness's registry. Default: no-duplicate-effects, goal-reached, no-lost-progress.
	Invariants []string `json:"invariants,omitempty" yaml:"invariants,omitempty" jsonschema:"nullable"`
	// Limits of a run: wall-clock and virtual time, attempts, recovery and approval windows.
	Limits *LimitsFile `json:"limits,omitempty" yaml:"limits,omitempty" jsonschema:"nullable"`
	// Turns the reflection loop on: a failure is replayed in isolation, diagnosed, a lesson drawn and verified there before the agent may act again.
	Reflect *ReflectFile `json:"reflect,omitempty" yaml:"reflect,omitempty" jsonschema:"nullable"`
	// Gate policies of the effect path, in order: the first whose kinds (a glob on the effect kind) matches decides; an effect no rule matches is allowed.
	Gate []GateRuleFile `json:"gate,omitempty" yaml:"gate,omitempty" jsonschema:"nullable"`
	// CEL judges of the claims an agent sends with a checkpoint or done, by claim name: a bool expression over state (the world's snapshot) and claim (the claim's value); true: the world shows it. A claim no expression names is judged by the world when it can (docs/state.md).
	Claims map[string]string `json:"claims,omitempty" yaml:"claims,omitempty" jsonschema:"nullable"`
	// consistent: an attempt never resumes from a poisoned checkpoint (one whose claims the world contradicts); the harness first writes a checkpoint carrying the newest consistent state. none (the default): it resumes from the last checkpoint, whatever it claims.
	Rollback string `json:"rollback,omitempty" yaml:"rollback,omitempty" jsonschema:"enum=none,enum=consistent"`
	// Default seed of a run (int64); --seed overrides it, and without either the seed is 1.
	Seed *int64 `json:"seed,omitempty" yaml:"seed,omitempty" jsonschema:"nullable"`
	// The model behind the gateway's LLM endpoint: the default model, budgets, prices, and the rules of the scripted model (a deterministic test double).
	LLM *LLMFile `json:"llm,omitempty" yaml:"llm,omitempty" jsonschema:"nullable"`
}

// WorldFile names the world. A file may write it as the name alone (world: cloud). At most
// one of url, command and image is set: without any, name is a built-in world's (required);
// with one, the world is served over the world protocol (docs/world-protocol.md) and name, if
// given, must be the name it describes itself with.
type WorldFile struct {
	// The world's name: a built-in's (overnight worlds), or the name a remote world must describe itself with.
	Name string `json:"name,omitempty" yaml:"name,omitempty" jsonschema:"pattern=^[a-z0-9][a-z0-9-]*$"`
	// Free-form options for a built-in world (overnight worlds lists each world's); a remote world gets its own from its command or service.
	Options map[string]any `json:"options,omitempty" yaml:"options,omitempty" jsonschema:"nullable"`
	// A world already running, served over the world protocol at this http(s) base URL.
	URL string `json:"url,omitempty" yaml:"url,omitempty" jsonschema:"pattern=^https?://[^\\s]+$"`
	// A world the harness starts, once per run, from this command (run in the scenario file's directory, with OVERNIGHT_WORLD_ADDR and OVERNIGHT_WORLD_DATA set; $OVERNIGHT_WORLD_ADDR and $OVERNIGHT_WORLD_DATA in its arguments are expanded).
	Command []string `json:"command,omitempty" yaml:"command,omitempty" jsonschema:"minItems=1"`
	// Environment variables of a command or image world; OVERNIGHT_* is reserved for the harness.
	Env map[string]string `json:"env,omitempty" yaml:"env,omitempty" jsonschema:"nullable" jsonschema_extras:"propertyNames=^[A-Za-z_][A-Za-z0-9_]*$"`
	// A world the harness starts, once per run, as a container of this image (already on the engine), on a network the harness reaches and the agent's sandbox does not.
	Image string `json:"image,omitempty" yaml:"image,omitempty" jsonschema:"pattern=^[^\\s]+$"`
	// The port an image world listens on inside its container (it is also given as OVERNIGHT_WORLD_ADDR=0.0.0.0:PORT). Default: 8080.
	Port int `json:"port,omitempty" yaml:"port,omitempty" jsonschema:"minimum=1,maximum=65535"`
}

// HTTPFile is one HTTP API of http:. Every request the agent sends to $OVERNIGHT_HTTP_<NAME>
// (the name upper-cased, - as _) is matched against routes and runs as an effect of kind
// http.<name>.<kind>: journaled, gated, faulted, keyed by its Idempotency-Key header.
type HTTPFile struct {
	// The API's name: lowercase letters, digits and '-', starting with a letter. It names the effect kinds (http.NAME.KIND) and the agent's variable (OVERNIGHT_HTTP_NAME).
	Name string `json:"name" yaml:"name" jsonschema:"required,pattern=^[a-z][a-z0-9-]*$,maxLength=40"`
	// Where the harness sends the requests: the upstream's http(s) base URL, such as http://127.0.0.1:2379. A route's path is appended to it.
	BaseURL string `json:"base_url" yaml:"base_url" jsonschema:"required,pattern=^https?://[^\\s]+$"`
	// The requests the agent may send, each an effect kind; a request no route matches is refused.
	Routes []HTTPRouteFile `json:"routes" yaml:"routes" jsonschema:"required,minItems=1"`
	// How the harness finds out whether an in-doubt request (a 5xx, a timeout, a crash) happened: a request built from its args, and a CEL predicate over the answer. Without it, such a request stays unknown.
	Lookup *HTTPLookupFile `json:"lookup,omitempty" yaml:"lookup,omitempty" jsonschema:"nullable"`
	// A header the gateway adds to every request upstream, its value read from the harness's environment (never the sandbox's); the agent's own value of that header is dropped.
	Credentials *HTTPCredentialsFile `json:"credentials,omitempty" yaml:"credentials,omitempty" jsonschema:"nullable"`
	// How long a request upstream may take before it is in doubt (a timeout: reconciled through lookup), such as 10s. Default 30s.
	Timeout string `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// The largest body a request to the API, or an answer from it, may have: bytes, or a size such as 64KiB, 1MiB or 16MiB (B, KB, KiB, MB, MiB). Default 1MiB, at most 64MiB. A larger request is refused 413; a larger answer fails its effect.
	MaxBody any `json:"max_body,omitempty" yaml:"max_body,omitempty" jsonschema:"oneof_type=integer;string"`
	// live (the default: requests go upstream), record (live; the run is meant as a recording) or replay (answered from the recording's exchanges, never sent upstream).
	Mode string `json:"mode,omitempty" yaml:"mode,omitempty" jsonschema:"enum=live,enum=record,enum=replay"`
	// The run whose exchanges a replay answers from (mode: replay; --http-replay RUN gives it on the command line).
	Recording string `json:"recording,omitempty" yaml:"recording,omitempty" jsonschema:"minLength=1"`
	// A scratch upstream the harness starts for reflection's verification runs, restored by replaying the real run's mutating requests in order; {{data_dir}}, {{url}}, {{host}} and {{port}} in the command are filled in.
	Shadow *HTTPShadowFile `json:"shadow,omitempty" yaml:"shadow,omitempty" jsonschema:"nullable"`
}

// MCPFile is the mcp: block: the MCP servers the gateway fronts, and where a tool call's
// idempotency key comes from.
type MCPFile struct {
	// The MCP servers, each a stdio command the harness starts, a streamable HTTP URL already running, or an image the harness runs as a container per run.
	Servers []MCPServerFile `json:"servers" yaml:"servers" jsonschema:"required,minItems=1"`
	// Where a tools/call's idempotency key comes from: agent (the call's _meta["overnight.dev/idempotency-key"]; a call without one is unkeyed) or derived (a call without one gets a key the harness derives from the attempt's last durable checkpoint, the call's ordinal among the mutating calls since it, the tool and its arguments' digest; read-only calls stay unkeyed).
	Keys string `json:"keys,omitempty" yaml:"keys,omitempty" jsonschema:"enum=agent,enum=derived"`
	// A run whose recording of these servers (each one's tools/list and answers) answers every tools/call: no server is started or reached, and a call the recording cannot answer is the first divergence (--mcp-replay RUN gives it on the command line, and wins).
	Replay string `json:"replay,omitempty" yaml:"replay,omitempty"`
}

// MCPServerFile is one MCP server: exactly one of command, url and image.
type MCPServerFile struct {
	// The server's name: lowercase letters, digits, '_' and '-', starting with a letter, without "__". It names the effect kinds (mcp.NAME.TOOL) and prefixes its tools as the agent sees them (NAME__TOOL).
	Name string `json:"name" yaml:"name" jsonschema:"required,pattern=^[a-z][a-z0-9_-]*$,maxLength=40"`
	// A stdio server the harness starts (outside the sandbox), run in the scenario file's directory, such as [python3, tickets.py].
	Command []string `json:"command,omitempty" yaml:"command,omitempty" jsonschema:"minItems=1"`
	// The environment of a command server (added to the harness's own) or an image server (its container's, added to its image's); {{data_dir}} in a value is the server's data directory (under the state dir; /data inside an image server's container).
	Env map[string]string `json:"env,omitempty" yaml:"env,omitempty" jsonschema:"nullable" jsonschema_extras:"propertyNames=^[A-Za-z_][A-Za-z0-9_]*$"`
	// A server already running, reached over streamable HTTP at this http(s) URL.
	URL string `json:"url,omitempty" yaml:"url,omitempty" jsonschema:"pattern=^https?://[^\\s]+$"`
	// A server the harness runs per run as a container of this image (already on the engine), speaking streamable HTTP on port at path, on a network the harness reaches and the agent's sandbox does not.
	Image string `json:"image,omitempty" yaml:"image,omitempty" jsonschema:"pattern=^[^\\s]+$"`
	// The port an image server listens on inside its container. Default: 8080.
	Port int `json:"port,omitempty" yaml:"port,omitempty" jsonschema:"minimum=1,maximum=65535"`
	// The path of an image server's streamable HTTP endpoint. Default: /mcp.
	Path string `json:"path,omitempty" yaml:"path,omitempty" jsonschema:"pattern=^/[^\\s]*$"`
	// A fresh instance of the server, sent the ledger's mutating calls in order, rebuilds its state (for reflection's shadows).
	Replayable bool `json:"replayable,omitempty" yaml:"replayable,omitempty"`
	// How the harness finds out whether a call left in doubt (the server died mid-call, the harness crashed) took effect, by the name of the tool called (as the server lists it): a read-only tool of the same server to call and a CEL expression over its answer. A tool without one leaves such a call unknown.
	Lookups map[string]MCPLookupFile `json:"lookups,omitempty" yaml:"lookups,omitempty" jsonschema:"nullable"`
}

// MCPLookupFile is how a call of one tool left in doubt is looked for: a read-only tool of the same server, called with args, and whether its answer shows the call took effect.
type MCPLookupFile struct {
	// The read-only tool (readOnlyHint) to call, as the server lists it, such as list_tickets.
	Tool string `json:"tool" yaml:"tool" jsonschema:"required,minLength=1"`
	// A CEL expression over args (the in-doubt call's arguments) and key (its idempotency key, as the server got it in _meta) giving the read tool's arguments, a JSON object. Default: {}.
	Args string `json:"args,omitempty" yaml:"args,omitempty" jsonschema:"minLength=1"`
	// A CEL expression over args, key and response (the read tool's CallToolResult: content, structuredContent, isError) that is true when the in-doubt call took effect, such as response.structuredContent.tickets.exists(t, t.key == key).
	Found string `json:"found" yaml:"found" jsonschema:"required,minLength=1"`
}

// HTTPRouteFile is one route of an HTTP API: a method and path, and the effect kind it is.
type HTTPRouteFile struct {
	// METHOD /path, such as "POST /v3/kv/put": the method (GET, POST, PUT, PATCH or DELETE) and the exact path, without wildcards or a query.
	Route string `json:"route" yaml:"route" jsonschema:"required,minLength=3"`
	// The route's kind: the effect kind is http.<api name>.<kind>.
	Kind string `json:"kind" yaml:"kind" jsonschema:"required,pattern=^[a-z][a-z0-9_]*$,maxLength=40"`
	// A CEL expression over args (the JSON body; for GET and DELETE the query parameters) giving the string that names the resource a request acts on, such as args.key: two requests of a non-idempotent kind for one identity under different keys are a duplicate. Default: the whole canonical args.
	Identity string `json:"identity,omitempty" yaml:"identity,omitempty" jsonschema:"minLength=1"`
	// The request changes nothing upstream.
	ReadOnly bool `json:"read_only,omitempty" yaml:"read_only,omitempty"`
	// A repeat with the same arguments changes nothing more: it is never a duplicate.
	Idempotent bool `json:"idempotent,omitempty" yaml:"idempotent,omitempty"`
	// The request removes or overwrites what cannot be had back.
	Destructive bool `json:"destructive,omitempty" yaml:"destructive,omitempty"`
}

// HTTPLookupFile is how the harness asks the upstream whether an in-doubt request happened.
type HTTPLookupFile struct {
	// METHOD /path of the lookup request, such as "POST /v3/kv/range" (it need not be one of routes).
	Route string `json:"route" yaml:"route" jsonschema:"required,minLength=3"`
	// A CEL expression over args (the in-doubt request's) giving the lookup's JSON body, such as '{"key": args.key}'; for GET, its fields are the query parameters. Default: no body.
	Body string `json:"body,omitempty" yaml:"body,omitempty" jsonschema:"minLength=1"`
	// A CEL predicate over args and response (the lookup's JSON answer): true when the in-doubt request happened, such as 'int(response.count) > 0'.
	Found string `json:"found" yaml:"found" jsonschema:"required,minLength=1"`
}

// HTTPCredentialsFile is a credential the gateway adds to every request upstream.
type HTTPCredentialsFile struct {
	// The header, such as Authorization.
	Header string `json:"header" yaml:"header" jsonschema:"required,pattern=^[A-Za-z0-9-]+$"`
	// The variable of the harness's environment holding the value, such as ETCD_TOKEN. A run whose variable is unset or empty is refused before it starts.
	Env string `json:"env" yaml:"env" jsonschema:"required,pattern=^[A-Za-z_][A-Za-z0-9_]*$"`
	// Written before the value, such as "Bearer ".
	Prefix string `json:"prefix,omitempty" yaml:"prefix,omitempty"`
}

// HTTPShadowFile is a scratch upstream for reflection.
type HTTPShadowFile struct {
	// The command that starts it, run in the scenario file's directory, such as [etcd, --data-dir, "{{data_dir}}", --listen-client-urls, "{{url}}", --advertise-client-urls, "{{url}}"].
	Command []string `json:"command" yaml:"command" jsonschema:"required,minItems=1"`
}

// GoalFile says how goal-reached is judged from an HTTP API.
type GoalFile struct {
	// The read-only request whose answer the goal is judged from.
	Probe GoalProbeFile `json:"probe" yaml:"probe" jsonschema:"required"`
	// A CEL predicate over response (the probe's JSON answer) and task, such as 'int(response.count) == 3'.
	Expect string `json:"expect" yaml:"expect" jsonschema:"required,minLength=1"`
}

// GoalProbeFile is the probe request of a goal.
type GoalProbeFile struct {
	// The http: API it is sent to.
	API string `json:"api" yaml:"api" jsonschema:"required,pattern=^[a-z][a-z0-9-]*$"`
	// METHOD /path, such as "POST /v3/kv/range".
	Route string `json:"route" yaml:"route" jsonschema:"required,minLength=3"`
	// A CEL expression over task giving the probe's JSON body (for GET, its query parameters). Default: no body.
	Body string `json:"body,omitempty" yaml:"body,omitempty" jsonschema:"minLength=1"`
}

// AgentFile is an agent as written: the default agent, or a variant. Exactly one of Builtin,
// Binary and Image is set (the loader checks that, not the schema).
type AgentFile struct {
	// An example agent built into the overnight binary (deployer, maintainer, ...).
	Builtin string `json:"builtin,omitempty" yaml:"builtin,omitempty" jsonschema:"pattern=^[a-z0-9][a-z0-9-]*$"`
	// A static linux/amd64 binary; a relative path resolves against the scenario file's directory.
	Binary string `json:"binary,omitempty" yaml:"binary,omitempty" jsonschema:"minLength=1"`
	// An image already on the engine.
	Image string `json:"image,omitempty" yaml:"image,omitempty" jsonschema:"pattern=^[^\\s]+$"`
	// An image agent's command: replaces the image's ENTRYPOINT (as in Kubernetes and Compose).
	Command []string `json:"command,omitempty" yaml:"command,omitempty" jsonschema:"nullable"`
	// The agent's arguments: for an image agent, they replace the image's CMD and follow its ENTRYPOINT (or command).
	Args []string `json:"args,omitempty" yaml:"args,omitempty" jsonschema:"nullable"`
	// Environment variables of the agent; OVERNIGHT_* is reserved for the harness.
	Env map[string]string `json:"env,omitempty" yaml:"env,omitempty" jsonschema:"nullable" jsonschema_extras:"propertyNames=^[A-Za-z_][A-Za-z0-9_]*$"`
}

// DrawFile is one entry of draws: faults drawn from the run's seed.
type DrawFile struct {
	// Fault kinds to draw from, each KIND[:ARG] (no trigger).
	Kinds []string `json:"kinds" yaml:"kinds" jsonschema:"required,minItems=1"`
	// How many faults to draw.
	Count int `json:"count" yaml:"count" jsonschema:"required,minimum=1,maximum=100"`
	// The virtual-time window [from, to) the faults fire in, such as [1d, 6d].
	Between []string `json:"between" yaml:"between" jsonschema:"required,minItems=2,maxItems=2"`
	// The range [shortest, longest] of a drawn fault's duration, for kinds that take one.
	Duration []string `json:"duration,omitempty" yaml:"duration,omitempty" jsonschema:"minItems=2,maxItems=2"`
}

// SandboxFile says how the agent's sandbox differs from the hardened default.
type SandboxFile struct {
	// none (the default: no network at all) or internal (a per-run internal network with no route out, which the disconnect fault can cut).
	Network string `json:"network,omitempty" yaml:"network,omitempty" jsonschema:"enum=none,enum=internal"`
}

// ReportFile is the agent's report file.
type ReportFile struct {
	// Where the agent writes it: an absolute, clean path under /workspace, such as /workspace/report.md.
	Path string `json:"path" yaml:"path" jsonschema:"required,minLength=1"`
	// The largest report kept, in bytes (at most 16777216). Default 1048576 (1 MiB); a larger file is recorded as too large, not kept.
	MaxBytes int64 `json:"max_bytes,omitempty" yaml:"max_bytes,omitempty" jsonschema:"minimum=1,maximum=16777216"`
}

// ReachFile says what a run can reach, and which kinds it draws, for --chaos random.
type ReachFile struct {
	// Checkpoint steps a run reaches.
	Steps int `json:"steps,omitempty" yaml:"steps,omitempty" jsonschema:"minimum=0"`
	// Effects a run executes.
	Effects int `json:"effects,omitempty" yaml:"effects,omitempty" jsonschema:"minimum=0"`
	// LLM calls a run makes.
	LLMCalls int `json:"llm_calls,omitempty" yaml:"llm_calls,omitempty" jsonschema:"minimum=0"`
	// Virtual time a run lasts, such as 7d.
	Virtual string `json:"virtual,omitempty" yaml:"virtual,omitempty"`
	// The only fault kinds --chaos random draws for this scenario (overnight faults lists them), such as [kill, restart, netdrop]; --chaos-kinds overrides it. Default: every kind random draws. It does not change the scenario's draws:, which name their own kinds.
	Kinds []string `json:"kinds,omitempty" yaml:"kinds,omitempty" jsonschema:"nullable,minItems=1,pattern=^[a-z0-9][a-z0-9-]*$"`
}

// LimitsFile bounds a run. Durations are Go durations plus d (24h): 90s, 5m, 36h, 30d.
type LimitsFile struct {
	// Wall-clock limit of a run, e.g. 2m (default 5m).
	Timeout string `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// Maximum number of attempts (default 10).
	MaxAttempts int `json:"max_attempts,omitempty" yaml:"max_attempts,omitempty" jsonschema:"minimum=1,maximum=1000"`
	// Virtual-time limit of a run, e.g. 30d (default 30d).
	Horizon string `json:"horizon,omitempty" yaml:"horizon,omitempty"`
	// Eventually-bound: the goal must be reached within this much virtual time after the last fault heals (default: by the end of the run).
	Recovery string `json:"recovery,omitempty" yaml:"recovery,omitempty"`
	// How long an effect held by an approve policy waits for a person, in real time (default 10m); then it is denied.
	Approval string `json:"approval,omitempty" yaml:"approval,omitempty"`
}

// ReflectFile configures the reflection loop; an empty one (reflect: {}) turns it on with the defaults.
type ReflectFile struct {
	// Isolated replays of the failing attempt (default 3).
	Replays int `json:"replays,omitempty" yaml:"replays,omitempty" jsonschema:"minimum=1,maximum=10"`
	// Reflections a run may open (default 2).
	Max int `json:"max,omitempty" yaml:"max,omitempty" jsonschema:"minimum=1,maximum=10"`
}

// GateRuleFile is one gate policy.
type GateRuleFile struct {
	// A glob on the effect kind, e.g. cloud.deploy_*.
	Kinds string `json:"kinds" yaml:"kinds" jsonschema:"required,minLength=1"`
	// allow; verify (guarded by reflection, which needs a reflect block); approve (held for a person); deny (never executed).
	Policy string `json:"policy" yaml:"policy" jsonschema:"required,enum=allow,enum=verify,enum=approve,enum=deny"`
}

// LLMFile is the llm block.
type LLMFile struct {
	// Default model: scripted (the default), openai:MODEL, anthropic:MODEL or ollama:MODEL. --llm overrides it; replay:RUN-ID is for the command line only.
	Model string `json:"model,omitempty" yaml:"model,omitempty" jsonschema:"minLength=1"`
	// Limits of a run's LLM use; exceeding one ends the run with that reason. Leave a field out for no limit.
	Budget *LLMBudgetFile `json:"budget,omitempty" yaml:"budget,omitempty" jsonschema:"nullable"`
	// Prices in US dollars per 1000 tokens, overriding the model's price table.
	Prices *LLMPricesFile `json:"prices,omitempty" yaml:"prices,omitempty" jsonschema:"nullable"`
	// The scripted model's rules, tried in order: the first whose every condition of when holds answers, with reply or with tool_calls (exactly one).
	Rules []LLMRuleFile `json:"rules,omitempty" yaml:"rules,omitempty" jsonschema:"nullable"`
}

// LLMBudgetFile bounds a run's LLM use.
type LLMBudgetFile struct {
	// Maximum chat completions.
	Calls int `json:"calls,omitempty" yaml:"calls,omitempty" jsonschema:"minimum=1,maximum=1000000000"`
	// Maximum prompt plus completion tokens.
	Tokens int64 `json:"tokens,omitempty" yaml:"tokens,omitempty" jsonschema:"minimum=1,maximum=1000000000000"`
	// Maximum cost in US dollars.
	CostUSD float64 `json:"cost_usd,omitempty" yaml:"cost_usd,omitempty" jsonschema:"exclusiveMinimum=0,maximum=1000000"`
}

// LLMPricesFile are prices in US dollars per 1000 tokens.
type LLMPricesFile struct {
	// US dollars per 1000 prompt tokens.
	PromptPer1K float64 `json:"prompt_per_1k" yaml:"prompt_per_1k" jsonschema:"required,minimum=0,maximum=1000"`
	// US dollars per 1000 completion tokens.
	CompletionPer1K float64 `json:"completion_per_1k" yaml:"completion_per_1k" jsonschema:"required,minimum=0,maximum=1000"`
}

// LLMRuleFile is one rule of the scripted model.
type LLMRuleFile struct {
	// Conditions on the request, all of which must hold; {} matches every request (a default rule: put it last).
	When LLMWhenFile `json:"when" yaml:"when" jsonschema:"required"`
	// A text answer (finish_reason stop).
	Reply string `json:"reply,omitempty" yaml:"reply,omitempty" jsonschema:"minLength=1"`
	// Tool calls to answer with, in order (finish_reason tool_calls).
	ToolCalls []LLMToolCallFile `json:"tool_calls,omitempty" yaml:"tool_calls,omitempty" jsonschema:"minItems=1"`
}

// LLMWhenFile holds the conditions of a scripted rule.
type LLMWhenFile struct {
	// A substring of the last message's content (case-sensitive).
	LastMessageContains string `json:"last_message_contains,omitempty" yaml:"last_message_contains,omitempty" jsonschema:"minLength=1"`
	// The role of the last message.
	LastRole string `json:"last_role,omitempty" yaml:"last_role,omitempty" jsonschema:"enum=system,enum=developer,enum=user,enum=assistant,enum=tool"`
	// The request offers a tool of this name.
	ToolOffered string `json:"tool_offered,omitempty" yaml:"tool_offered,omitempty" jsonschema:"minLength=1"`
	// Substrings that must all appear in the request's messages (several conditions at once).
	PromptContains []string `json:"prompt_contains,omitempty" yaml:"prompt_contains,omitempty" jsonschema:"minItems=1,minLength=1"`
}

// LLMToolCallFile is one tool call of a scripted answer.
type LLMToolCallFile struct {
	// The tool's name.
	Name string `json:"name" yaml:"name" jsonschema:"required,minLength=1"`
	// The call's arguments. A string "$task.path.to.field" is replaced by that field of the scenario's task ("$task" all of it); "$message.path.to.field" (or "$path.to.field", "$.path.to.field") by that field of the first JSON object in the last message ("$message" or "$." all of it); "$$" at the start is a literal $.
	Arguments map[string]any `json:"arguments,omitempty" yaml:"arguments,omitempty" jsonschema:"nullable"`
}

// keyPattern compiles the propertyNames pattern that field of the spec type t declares in its
// jsonschema_extras tag, for the builder to check keys with; it panics if there is none (a
// mistake in this file).
func keyPattern(t reflect.Type, field string) *regexp.Regexp {
	f, ok := t.FieldByName(field)
	if !ok {
		panic("scenarios: spec type " + t.Name() + " has no field " + field)
	}
	// The tag's entries are separated by commas; a comma in a value is escaped as \, (the
	// convention of github.com/invopop/jsonschema).
	tag := strings.ReplaceAll(f.Tag.Get("jsonschema_extras"), `\,`, "\x00")
	for _, entry := range strings.Split(tag, ",") {
		if pattern, ok := strings.CutPrefix(entry, "propertyNames="); ok {
			return regexp.MustCompile(strings.ReplaceAll(pattern, "\x00", ","))
		}
	}
	panic("scenarios: spec field " + t.Name() + "." + field + " declares no propertyNames pattern")
}
