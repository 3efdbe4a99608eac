// Command openaiagent is an agent for the harness's Docker specs that uses
// the official openai-go client exactly as it comes: its base URL and key
// from OPENAI_BASE_URL and OPENAI_API_KEY, its built-in retries on (a 429's
// Retry-After is waited in real time). It asks the run's model once, prints
// the answer and reports done over plain HTTP. It is a test helper only;
// nothing ships it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/openai/openai-go/v3"
)

// buildNonce is set with -ldflags "-X main.buildNonce=..." so a test suite
// gets a binary (and so a sandbox image) of its own.
var buildNonce string

func main() {
	_ = buildNonce
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := openai.NewClient()
	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "any",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "openaiagent:", err)
		done(ctx, "failure", err.Error())
		os.Exit(1)
	}
	answer := resp.Choices[0].Message.Content
	fmt.Println(answer)
	done(ctx, "success", answer)
}

// done reports the agent's claim to the gateway.
func done(ctx context.Context, outcome, summary string) {
	body, _ := json.Marshal(map[string]string{"outcome": outcome, "summary": summary})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, os.Getenv("OVERNIGHT_URL")+"/v1/done", bytes.NewReader(body))
	if err != nil {
		fmt.Fprintln(os.Stderr, "openaiagent:", err)
		os.Exit(1)
	}
	req.Header.Set("Authorization", "Bearer "+os.Getenv("OVERNIGHT_TOKEN"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "openaiagent: done:", err)
		os.Exit(1)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		fmt.Fprintln(os.Stderr, "openaiagent: done:", resp.Status)
		os.Exit(1)
	}
}
