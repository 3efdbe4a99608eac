// Package scenarios owns the scenario file format (apiVersion overnight/v1, kind Scenario):
// reading it, validating it before anything runs, applying its defaults, and resolving what a
// user typed — a path or a built-in scenario's name — to a Scenario.
//
// A scenario file is one YAML document:
//
//	apiVersion: overnight/v1
//	kind: Scenario
//	name: deploy                 # [a-z0-9][a-z0-9-]*
//	description: "..."           # optional
//	world: cloud                 # or {name: cloud, options: {...}}; optional with http:
//	http:                        # optional: HTTP APIs the agent calls through the gateway
//	  - name: etcd               # effect kinds http.etcd.<kind>; the agent's $OVERNIGHT_HTTP_ETCD
//	    base_url: http://127.0.0.1:2379
//	    routes: [{route: "POST /v3/kv/put", kind: put, identity: args.key}]   # identity: CEL over args
//	    lookup: {route: "POST /v3/kv/range", body: '{"key": args.key}', found: 'has(response.count)'}
//	    credentials: {header: Authorization, env: ETCD_TOKEN}  # from the harness's environment
//	goal: {probe: {api: etcd, route: "POST /v3/kv/range", body: '{"key": task.key}'}, expect: 'has(response.count)'}
//	agent:                       # exactly one of builtin / binary / image
//	  builtin: deployer          # an example agent inside the overnight binary
//	  # binary: ./bin/deployer   # static linux/amd64; relative to the scenario file's directory
//	  # image: my-agent:dev      # an image already on the engine
//	  args: []
//	  env: {}                    # NAME: "value"; OVERNIGHT_* is reserved for the harness
//	task: {}                     # free-form, handed to the agent in GET /v1/run
//	agents:                      # optional variants, chosen with --agent NAME
//	  naive: {builtin: deployer, args: [--naive]}
//	faults: []                   # KIND[:ARG]@TRIGGER[/DURATION], see package chaos
//	invariants: [no-duplicate-effects, goal-reached, no-lost-progress]   # the default
//	limits: {timeout: 5m, max_attempts: 10, horizon: 30d}                # the defaults
//	seed: 1                      # optional
//	llm:                         # optional: the model behind the gateway's LLM endpoint
//	  model: scripted            # the default; or openai:MODEL, anthropic:MODEL, ollama:MODEL (--llm overrides it)
//	  budget: {calls: 40, tokens: 200000, cost_usd: 0.50}                 # optional; leave a field out for no limit
//	  prices: {prompt_per_1k: 0.00015, completion_per_1k: 0.0006}         # optional override of the price table
//	  rules:                     # the scripted model's rules, tried in order
//	    - when: {tool_offered: create_network}
//	      tool_calls: [{name: create_network, arguments: {name: $task.network}}]
//	    - when: {last_message_contains: field_renamed}      # also: last_role, prompt_contains
//	      tool_calls: [{name: correct_request, arguments: {rename: $error.details.renamed}}]
//	    - when: {}               # matches everything: a default rule, last
//	      reply: "OK"
//
// The scripted model is a deterministic test double, never a real model (package harness/llm).
// A string argument that starts with $ is a reference into one of two sources: "$task.path.to.field"
// is that field of the scenario's task ("$task" all of it), and "$message.path.to.field" that
// field of the first JSON object in the last message ("$message" or "$." all of it); any other
// "$name.…" (or "$.name.…") is short for "$message.name.…", so "$error.details.renamed" reads the
// error an agent put in its message. "$$" at the start is a literal $. This package hands each
// rule on as JSON (LLM.Rules) and does not import harness/llm; harness/llm.DecodeRules reads it.
//
// The structure is described by a JSON Schema (draft 2020-12, SchemaJSON, scenario.schema.json)
// that editors can use. It is generated from the Go types of the file as written (spec.go:
// ScenarioFile and the types of its parts) by `go generate ./scenarios`, and a test fails when
// the committed file is stale; Expected reads it to say what a value should look like.
// Parse also checks what the schema does not: fault syntax, durations, one agent source, env
// keys, duplicate keys, invariants listed twice, the LLM model spec ("replay:" is for the command line only),
// the http: APIs (routes, names, lookups; every CEL expression compiled and type-checked, a
// problem inside one reported at its own line and column), the goal's API, one of reply or
// tool_calls per rule, the syntax of references and that each "$task" reference
// names a path the task holds. Every problem is reported as file:line:column, and all
// problems of a file are reported together (ErrorList), each with the JSON pointer of the value
// it is about. Validate adds the checks of a caller that knows more (a harness: its worlds,
// agents, fault kinds and invariants) and reports their problems in the same pass. An optional field set
// to null (or left empty, as in `faults:`) counts as absent. YAML anchors, aliases and merge
// keys (<<) work.
//
// Values handed on as JSON (task, world options) are converted consistently: mappings become
// map[string]any (keys are the keys' text), sequences []any, integers that fit become int64, all
// other numbers float64 (.inf and .nan are refused), timestamps and !!binary stay text.
//
// What this package must not do: run anything, talk to Docker, or read any file but the scenario
// itself. It knows neither the simulated worlds (scenarios/cloud) nor the built-in scenarios
// (scenarios/builtin, whose lookup function the caller passes to Resolve); it checks fault
// syntax, not which fault kinds exist (the chaos registry's job), nor which invariants exist (the
// harness's invariant registry's, which a program may extend), and it does not check that a
// binary or image exists (the harness does, when it builds the sandbox).
package scenarios
