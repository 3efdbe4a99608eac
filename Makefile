# overnight — make help lists the targets.
SHELL := /bin/bash
GO    ?= go
BIN   := bin/overnight
# The slim sandbox side (init, pause, probe, the built-in agents), injected
# into every sandbox as PID 1 by bin/overnight when both carry one build id.
SANDBOX_BIN := bin/overnight-sandbox
# Both binaries run inside sandboxes (FROM scratch), so they must be static.
export CGO_ENABLED := 0
# BUILD_ID is linked into both binaries (-X main.buildID): bin/overnight
# injects the overnight-sandbox beside it only when that one answers the
# same id, so a stale sibling is never used. It hashes the sources (names
# and contents), so an unchanged tree builds the same binaries, and the
# sandbox image (made once per binary hash) is not made again.
BUILD_ID = $(shell find chaos cmd harness reflect sandbox scenarios go.mod go.sum -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)

# The demo keeps its journal here, so `bin/overnight --state .overnight-demo runs` shows its runs.
DEMO_STATE ?= .overnight-demo
# The Debian+Python image of the Python agent's tests (make python-image).
PYTHON_IMAGE ?= overnight-test/debian-python:bookworm

.PHONY: help build test bench lint fuzz demo clean python-image etcd mcp-example

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-7s %s\n", $$1, $$2}'

build: ## build the static overnight binary and its slim sandbox side (overnight-sandbox) into bin/
	@id='$(BUILD_ID)'; set -x; \
	$(GO) build -trimpath -ldflags "-X main.buildID=$$id" -o $(BIN) ./cmd/overnight && \
	$(GO) build -trimpath -ldflags "-X main.buildID=$$id" -o $(SANDBOX_BIN) ./cmd/overnight-sandbox

# The MCP example's agent (the official Go SDK's client) and its Go MCP
# server, static, where examples/mcp/scenario.yaml names them.
mcp-example: ## build the MCP example's agent and notes server into examples/mcp/bin/
	$(GO) build -trimpath -o examples/mcp/bin/mcp-agent ./examples/mcp/agent
	$(GO) build -trimpath -o examples/mcp/bin/notes ./examples/mcp/notes

test: python-image etcd ## run every test (needs a running Docker engine; .ci/run starts one)
	$(GO) test -count=1 -timeout 45m ./...

# The Python example agent's tests and benchmark run in a Debian image made
# without a registry (debootstrap + docker import), kept on the engine once made.
# Without root it says so and goes on: those specs are then skipped, saying why.
python-image: ## make the Debian+Python image the Python agent's tests use (once; needs root)
	@if docker image inspect $(PYTHON_IMAGE) >/dev/null 2>&1; then echo "python-image: $(PYTHON_IMAGE) is on the engine already"; \
	elif [ "$$(id -u)" != 0 ]; then echo "python-image: not root, so no debootstrap: the Python agent's specs will be skipped (run make python-image as root once)"; \
	else command -v debootstrap >/dev/null || { echo "installing debootstrap (Debian's package)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap; } && \
	  sandbox/agent/python/debian-image.sh $(PYTHON_IMAGE); fi

# The HTTP pass-through's specs and benchmark run a real etcd (Debian's
# etcd-server, 3.4) on free loopback ports; the package's own service is never used.
etcd: ## install Debian's etcd-server when etcd is missing (once; needs root)
	@if command -v etcd >/dev/null 2>&1; then echo "etcd: $$(command -v etcd) is installed"; \
	elif [ "$$(id -u)" != 0 ]; then echo "etcd: not root, so no apt-get: the etcd specs will be skipped (run make etcd as root once)"; \
	else echo "installing etcd-server (Debian's package)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q etcd-server; fi

# The benchmarks run with the overnight binary's own GOMAXPROCS (1, see
# cmd/overnight/main.go); the LLM overhead is measured with 2 as well.
# -bench 'Effect|LLM' takes in EffectRoundTripRemoteWorld: the effect round
# trip on `overnight world serve cloud` (built first), durable and in memory,
# against the in-process world's.
bench: export GOMAXPROCS := 1
bench: python-image etcd
bench: ## measure the journal, the gateway (effects, LLM calls, the HTTP pass-through to etcd, calls beside a slow world, MCP tools/call, an MCP run replayed offline), the week, kill recovery, sandbox cold start, the gate, the reflection loop, the viewer's run list and a suite's throughput
	$(GO) test -run '^$$' -bench . -benchtime 20000x ./harness/journal
	$(GO) test -run '^$$' -bench 'Effect|LLM' -benchtime 2000x ./harness
	GOMAXPROCS=2 $(GO) test -run '^$$' -bench 'LLMOverhead' -benchtime 2000x ./harness
	$(GO) test -run '^$$' -bench 'HTTPPassThrough' -benchtime 1000x ./harness
	$(GO) test -run '^$$' -bench 'GatewayCallsBesideSlowWorld' -benchtime 300x ./harness
	$(GO) test -run '^$$' -bench 'MCPCall' -benchtime 1000x ./harness
	$(GO) test -run '^$$' -bench 'MCPReplay' -benchtime 1x ./harness
	$(GO) test -run '^$$' -bench 'Week|KillRecovery' -benchtime 3x ./harness
	$(GO) test -run '^$$' -bench ColdStart -benchtime 20x ./sandbox/docker
	$(GO) test -run '^$$' -bench NeverSeenImage -benchtime 10x ./harness
	$(GO) test -run '^$$' -bench GateAllow ./reflect
	$(GO) test -run '^$$' -bench FailureToDecision -benchtime 10x ./reflect
	$(GO) test -run '^$$' -bench 'Replay$$' -benchtime 3x ./reflect
	$(GO) test -run '^$$' -bench GatewayFloor -benchtime 3x ./sandbox/docker
	$(GO) test -run '^$$' -bench LoadgenFloor -benchtime 3x ./harness
	$(GO) test -run '^$$' -bench RunList -benchtime 200x ./harness/viewer
	$(GO) test -run '^$$' -bench SuiteDeploy -benchtime 1x -timeout 60m ./harness/suite

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: ## go vet, staticcheck and gofmt
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@out=$$(gofmt -l . | grep -v '^bin/'); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

fuzz: ## fuzz the parsers, the scenario expressions, the gateway protocol, its MCP front and the world protocol, 30s each
	$(GO) test -run '^$$' -fuzz '^FuzzParseSpec$$' -fuzztime 30s ./chaos
	$(GO) test -run '^$$' -fuzz '^FuzzParseDuration$$' -fuzztime 30s ./chaos
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 30s ./scenarios
	$(GO) test -run '^$$' -fuzz '^FuzzCompile$$' -fuzztime 30s ./scenarios/expr
	$(GO) test -run '^$$' -fuzz '^FuzzGateway$$' -fuzztime 30s ./harness/gateway
	$(GO) test -run '^$$' -fuzz '^FuzzMCP$$' -fuzztime 30s ./harness/gateway
	$(GO) test -run '^$$' -fuzz '^FuzzParseRequest$$' -fuzztime 30s ./harness/llm
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime 30s ./scenarios/world/remote

demo: build mcp-example ## deploy with the agent SIGKILLed after step 3, the naive agent caught, a week in seconds, a week optimising a fleet's logging, a failure reflected on and fixed, then an MCP agent killed mid-run
	@echo "== 1. The well-behaved deployer, SIGKILLed once its step-3 checkpoint is durable:"
	@echo "   $(BIN) run deploy --seed 1 --fault kill@step:3"
	@./$(BIN) --state $(DEMO_STATE) run deploy --seed 1 --fault kill@step:3
	@echo
	@echo "== 2. The naive deployer (never reads its checkpoint, sends no idempotency keys), same fault."
	@echo "   It must FAIL: after the restart it creates the network and database a second time."
	@echo "   $(BIN) run deploy --seed 1 --agent naive --fault kill@step:3"
	@./$(BIN) --state $(DEMO_STATE) run deploy --seed 1 --agent naive --fault kill@step:3; \
	  code=$$?; if [ $$code -ne 1 ]; then echo "demo: expected exit code 1 (fail) from the naive agent, got $$code"; exit 1; fi
	@echo
	@echo "== 3. A week in seconds: 7 virtual days of maintenance through 3 restarts, 2 outages"
	@echo "   and an API change, all drawn from the seed."
	@echo "   $(BIN) run week --seed 42"
	@./$(BIN) --state $(DEMO_STATE) run week --seed 42
	@echo
	@echo "== 4. A week optimising a microservice fleet's logging: candidates chosen by the (scripted)"
	@echo "   model, tried on staging, kept or rolled back, through 3 restarts, 2 outages and a"
	@echo "   dependency update that changes a logging library's default, all drawn from the seed."
	@echo "   $(BIN) run logopt-week --seed 42"
	@./$(BIN) --state $(DEMO_STATE) run logopt-week --seed 42
	@echo
	@echo "== 5. The reflection loop: the API changes to v2 after step 3 and the agent gives up."
	@echo "   The harness replays the failure in isolation, diagnoses it, verifies a lesson there,"
	@echo "   and only then lets the next attempt deploy (the lesson is written by the scripted test double)."
	@echo "   $(BIN) run deploy-v2 --seed 3 --lessons none"
	@out=$$(./$(BIN) --state $(DEMO_STATE) run deploy-v2 --seed 3 --lessons none); code=$$?; \
	  printf '%s\n' "$$out"; if [ $$code -ne 0 ]; then exit $$code; fi; \
	  id=$$(printf '%s\n' "$$out" | sed -n '1s/^run \([^:]*\): .*/\1/p'); \
	  if [ -z "$$id" ]; then echo "demo: no run id on the first line of the deploy-v2 run's output"; exit 1; fi; \
	  echo "   The write-up: $(BIN) --state $(DEMO_STATE) reflect $$id"
	@echo
	@echo "== 6. MCP: an agent (the official Go SDK's client) opens tickets with the tools of a Python"
	@echo "   MCP server (stdio, started by the harness outside the sandbox) through the gateway's"
	@echo "   MCP endpoint, each call keyed; it is SIGKILLed after the server opened its 2nd ticket."
	@echo "   Its next attempt repeats that call under the same key and is answered from the journal."
	@echo "   $(BIN) run examples/mcp/scenario.yaml --seed 1"
	@./$(BIN) --state $(DEMO_STATE) run examples/mcp/scenario.yaml --seed 1
	@echo
	@echo "demo ok: the harness passed the agents that survive, caught the one that does not, taught one that failed, and kept an MCP agent's tool calls exactly once."
	@echo "See the runs with: $(BIN) --state $(DEMO_STATE) runs"

clean: ## remove bin/ and the demo's state dir (containers: bin/overnight gc)
	rm -rf bin examples/mcp/bin $(DEMO_STATE)
