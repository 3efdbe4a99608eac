package llm_test

import (
	"context"
	"fmt"

	"github.com/overnight-dev/overnight/harness/llm"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// The scripted model answers from rules, here proposing the correction a world's error
// describes: "$details.renamed" is replaced by that field of the JSON object in the last message.
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
