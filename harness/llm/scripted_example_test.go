package llm_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/overnight-dev/overnight/harness/llm"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// The scripted model answers from rules, here proposing the correction a world's error
// describes: "$details.renamed" is replaced by that field of the first JSON object in the last
// message (the same as "$message.details.renamed").
func ExampleScripted() {
	model, err := llm.NewScripted("", []llm.Rule{
		{When: llm.Match{LastMessageContains: "field_renamed"}, ToolCalls: []llm.ScriptedCall{
			{Name: "correct_request", Arguments: map[string]any{"rename": "$details.renamed"}},
		}},
		{When: llm.Match{}, Reply: "OK"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := model.Complete(context.Background(), protocol.ChatRequest{Messages: []protocol.ChatMessage{
		{Role: "tool", Content: protocol.MessageContent{Text: `create_database failed: {"code":"field_renamed","details":{"renamed":{"database_id":"db_id"}}}`}},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	choice := resp.Choices[0]
	call := choice.Message.ToolCalls[0]
	fmt.Println(model.Provider(), choice.FinishReason, call.ID, call.Function.Name, call.Function.Arguments)

	resp, _ = model.Complete(context.Background(), protocol.ChatRequest{Messages: []protocol.ChatMessage{
		{Role: "user", Content: protocol.MessageContent{Text: "Deploy the shop."}},
	}})
	fmt.Println(resp.Choices[0].FinishReason, resp.Choices[0].Message.Content.Text, *resp.Usage)
	// Output:
	// scripted tool_calls call_1 correct_request {"rename":{"database_id":"db_id"}}
	// stop OK {4 1 5}
}

// A "$task" reference reads the run's task — the scenario's task:, given with WithTask — and
// "$error.details.renamed" (short for "$message.error.details.renamed") the first JSON object of
// the last message.
func ExampleWithTask() {
	model, err := llm.NewScripted("", []llm.Rule{
		{When: llm.Match{ToolOffered: "create_network"}, ToolCalls: []llm.ScriptedCall{
			{Name: "create_network", Arguments: map[string]any{"name": "$task.network"}},
		}},
		{When: llm.Match{LastMessageContains: "field_renamed"}, ToolCalls: []llm.ScriptedCall{
			{Name: "correct_request", Arguments: map[string]any{"rename": "$error.details.renamed"}},
		}},
	}, llm.WithTask(json.RawMessage(`{"network":"prod-net"}`)))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, req := range []protocol.ChatRequest{
		{Tools: []protocol.ChatTool{{Type: "function", Function: protocol.ChatFunction{Name: "create_network"}}},
			Messages: []protocol.ChatMessage{{Role: "user", Content: protocol.MessageContent{Text: "Plan the deployment."}}}},
		{Messages: []protocol.ChatMessage{{Role: "user", Content: protocol.MessageContent{
			Text: `{"error":{"code":"field_renamed","details":{"renamed":{"database_id":"db_id"}}}}`}}}},
	} {
		resp, err := model.Complete(context.Background(), req)
		if err != nil {
			fmt.Println(err)
			return
		}
		call := resp.Choices[0].Message.ToolCalls[0]
		fmt.Println(call.Function.Name, call.Function.Arguments)
	}

	_, err = llm.NewScripted("", []llm.Rule{{ToolCalls: []llm.ScriptedCall{
		{Name: "create_network", Arguments: map[string]any{"name": "$task.netwrk"}},
	}}}, llm.WithTask(json.RawMessage(`{"network":"prod-net"}`)))
	fmt.Println(err)
	// Output:
	// create_network {"name":"prod-net"}
	// correct_request {"rename":{"database_id":"db_id"}}
	// llm configuration: scripted model rules[0].tool_calls[0].arguments.name: "$task.netwrk": the task has no field "netwrk" at $task (fields there: network; write $$ for a literal $)
}
