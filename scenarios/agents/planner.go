package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/overnight-dev/overnight/sandbox/agent"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// planStep is one step of a plan the model proposed: a tool and its
// arguments (names, versions; the agent binds the ids it gets back).
type planStep struct {
	Tool string         `json:"tool"`
	Args map[string]any `json:"args"`
}

// The five tools of a deployment, in the order they must run.
var deploySteps5 = []string{"create_network", "create_database", "run_migration", "deploy_service", "set_dns"}

func tool(name, desc string, props map[string]string, required ...string) protocol.ChatTool {
	p := map[string]any{}
	for k, t := range props {
		p[k] = map[string]string{"type": t}
	}
	params, _ := json.Marshal(map[string]any{"type": "object", "properties": p, "required": required})
	return protocol.ChatTool{Type: "function", Function: protocol.ChatFunction{Name: name, Description: desc, Parameters: params}}
}

var deployTools = []protocol.ChatTool{
	tool("create_network", "Step 1: create the network.", map[string]string{"name": "string"}, "name"),
	tool("create_database", "Step 2: create the database on the network.", map[string]string{"name": "string"}, "name"),
	tool("run_migration", "Step 3: migrate the database's schema to a version.", map[string]string{"version": "integer"}, "version"),
	tool("deploy_service", "Step 4: deploy the service on the database.", map[string]string{"name": "string", "image": "string"}, "name", "image"),
	tool("set_dns", "Step 5: point the DNS name at the service.", map[string]string{"host": "string"}, "host"),
}

var correctTool = tool("correct_request",
	"Propose how to correct a request the world's API refused: arguments to rename, arguments to add, the kind that replaces a removed one, or the kind that issues credentials and the argument that carries them.",
	map[string]string{"rename": "object", "add": "object", "use_kind": "string", "obtain": "string", "field": "string"})

// errNoModel says the run serves no model (or none that takes tools): the
// agent falls back on what it can decide alone.
var errNoModel = errors.New("the run has no model to ask")

// planner asks the run's model for the agent's decisions, through the
// gateway (any OpenAI client pointed at OPENAI_BASE_URL would do the same).
type planner struct {
	c *agent.Client
}

// ask sends a conversation offering tools and returns the tool calls of the
// answer, each decoded. It asks again (a bounded number of times) when the
// answer was cut short or a call's arguments are not valid JSON, telling
// the model what was wrong; brief is repeated as the last message each
// time, so the model always has the facts.
func (p *planner) ask(ctx context.Context, system, brief string, tools []protocol.ChatTool) ([]protocol.ChatToolCall, []map[string]any, error) {
	msgs := []protocol.ChatMessage{
		{Role: "system", Content: protocol.MessageContent{Text: system}},
		{Role: "user", Content: protocol.MessageContent{Text: brief}},
	}
	choice := json.RawMessage(`"required"`)
	for try := 1; try <= 5; try++ {
		resp, err := p.c.Chat(ctx, protocol.ChatRequest{Model: "overnight", Messages: msgs, Tools: tools, ToolChoice: choice})
		var apiErr *agent.APIError
		switch {
		case errors.As(err, &apiErr) && apiErr.Status == 501:
			return nil, nil, errNoModel
		case errors.As(err, &apiErr) && apiErr.Code == protocol.CodeUnsupportedParameter && apiErr.Param == "tool_choice" && choice != nil:
			// Not every provider carries "required": ask with the default.
			choice = nil
			continue
		case errors.As(err, &apiErr) && apiErr.Code == protocol.CodeUnsupportedParameter && apiErr.Param == "tools":
			return nil, nil, fmt.Errorf("%w: its provider carries no tools", errNoModel)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("ask the model: %w", err)
		}
		choice := resp.Choices[0]
		if choice.FinishReason == "length" || len(choice.Message.ToolCalls) == 0 {
			msgs = append(msgs, protocol.ChatMessage{Role: "user", Content: protocol.MessageContent{
				Text: "Your answer was cut short or had no tool call. Answer again with the tool calls only. " + brief}})
			continue
		}
		var args []map[string]any
		var problems []protocol.ChatMessage
		for _, call := range choice.Message.ToolCalls {
			var a map[string]any
			if err := agent.ToolArguments(call, &a); err != nil {
				problems = append(problems, protocol.ChatMessage{Role: "tool", ToolCallID: call.ID, Content: protocol.MessageContent{Text: err.Error()}})
				continue
			}
			problems = append(problems, protocol.ChatMessage{Role: "tool", ToolCallID: call.ID, Content: protocol.MessageContent{Text: "not run yet"}})
			args = append(args, a)
		}
		if len(args) == len(choice.Message.ToolCalls) {
			return choice.Message.ToolCalls, args, nil
		}
		// A malformed call: answer the model with the error, and ask again.
		assistant := choice.Message
		assistant.Role = "assistant"
		msgs = append(msgs, assistant)
		msgs = append(msgs, problems...)
		msgs = append(msgs, protocol.ChatMessage{Role: "user", Content: protocol.MessageContent{Text: "Some tool calls were malformed (see above). Call all the tools again. " + brief}})
	}
	return nil, nil, fmt.Errorf("the model gave no usable answer after 5 tries")
}

// plan asks the model for the deployment's steps.
func (p *planner) plan(ctx context.Context, task DeployTask) ([]planStep, error) {
	brief, _ := json.Marshal(map[string]any{"task": task})
	calls, args, err := p.ask(ctx,
		"You are a deployment agent. Plan the deployment described by the task as tool calls, one per step, in the order they must run.",
		string(brief), deployTools)
	if err != nil {
		return nil, err
	}
	var plan []planStep
	for i, call := range calls {
		plan = append(plan, planStep{Tool: call.Function.Name, Args: args[i]})
	}
	var names []string
	for _, s := range plan {
		names = append(names, s.Tool)
	}
	if !slices.Equal(names, deploySteps5) {
		return nil, fmt.Errorf("the model's plan %v is not the five steps in order %v", names, deploySteps5)
	}
	return plan, nil
}

// advise asks the model how to correct a request the world refused.
func (p *planner) advise(ctx context.Context, kind string, args map[string]any, e *protocol.EffectError) (correction, error) {
	brief, _ := json.Marshal(map[string]any{"kind": kind, "args": args, "error": e})
	calls, parsed, err := p.ask(ctx,
		"An effect was refused by the world's API. Propose a correction with correct_request, from what the error says.",
		string(brief), []protocol.ChatTool{correctTool})
	if errors.Is(err, errNoModel) {
		return fromDetails(ctx, kind, args, e)
	}
	if err != nil {
		return correction{}, err
	}
	for i, call := range calls {
		if call.Function.Name != "correct_request" {
			continue
		}
		b, _ := json.Marshal(parsed[i])
		var c correction
		if err := json.Unmarshal(b, &c); err != nil {
			return correction{}, fmt.Errorf("the model's correction %s: %w", b, err)
		}
		return c, nil
	}
	return correction{}, nil
}

// builtinPlan is the plan the deployer follows when the run has no model.
func builtinPlan(task DeployTask) []planStep {
	return []planStep{
		{Tool: "create_network", Args: map[string]any{"name": task.Network}},
		{Tool: "create_database", Args: map[string]any{"name": task.Database}},
		{Tool: "run_migration", Args: map[string]any{"version": task.Migration}},
		{Tool: "deploy_service", Args: map[string]any{"name": task.Service.Name, "image": task.Service.Image}},
		{Tool: "set_dns", Args: map[string]any{"host": task.DNS}},
	}
}
