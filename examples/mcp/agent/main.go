// Command agent is the example agent of the MCP scenario
// (examples/mcp/scenario.yaml): it opens one ticket per title of the task
// with the MCP server's create_ticket tool, one ticket per step, through
// the official Go SDK's MCP client pointed at $OVERNIGHT_MCP_URL — the
// gateway's MCP endpoint, where the scenario's servers' tools appear as
// <server>__<tool>. Its task and checkpoints come from the harness through
// the project's agent SDK (sandbox/agent).
//
// Well-behaved (the default), it resumes from its last checkpoint and gives
// each create a key in the call's _meta, "overnight.dev/idempotency-key"
// ("ticket-2"), so a call it made just before it was killed is answered
// from the harness's record when it makes it again (the result's _meta says
// "overnight.dev/replayed": true), instead of opening the ticket twice. A
// call the harness refuses for now (a JSON-RPC error whose data carries
// retry_after_ms) is retried under the same key, and so is a call left in
// doubt (code "unknown": the server died mid-call): the harness looks for it
// with the scenario's lookup and answers the retry from what it finds, or
// refuses it (in_doubt) when nobody can tell, and the agent gives up.
//
// A tool's error answer ends the attempt with a failure it reports
// (tickets.py refuses a title longer than 40 characters). A lesson that
// says to shorten titles to 40 characters is followed: every title is cut
// to 40 characters, and a shortened call is a new call, under a new key
// ("ticket-1/short"), never the refused one's.
//
// With --watch-tools its client has a ToolListChangedHandler (so the SDK
// opens a subscriptions/listen stream): once its tickets are open it waits
// for notifications/tools/list_changed, lists the tools again and calls
// each tool that went, reporting what the gateway answered (a scenario with
// an mcp-tool-gone fault, as the harness's specs run it).
//
// With --no-keys it is the deliberately broken variant: no keys, and it
// never reads its checkpoint back, so after a restart it starts over and
// opens every ticket again — tickets.py's own file shows them twice, and
// the harness's no-duplicate-effects invariant catches it.
//
//	CGO_ENABLED=0 go build -o examples/mcp/bin/mcp-agent ./examples/mcp/agent
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/overnight-dev/overnight/sandbox/agent"
)

// Task is the scenario's task: a ticket to open per title.
type Task struct {
	Titles []string `json:"titles"`
}

// maxTitle is the longest title tickets.py takes, in characters.
const maxTitle = 40

// maxTries bounds the tries of one call the harness refuses for now.
const maxTries = 30

func main() {
	noKeys := flag.Bool("no-keys", false, "send no idempotency keys and start over on every attempt (the broken variant)")
	watch := flag.Bool("watch-tools", false, "wait for notifications/tools/list_changed once done, and report the tools that went")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a, err := agent.FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcp-agent:", err)
		os.Exit(2)
	}
	if err := run(ctx, a, !*noKeys, *watch); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-agent:", err)
		_ = a.Done(ctx, "failure", err.Error(), nil)
		os.Exit(1)
	}
}

func run(ctx context.Context, a *agent.Client, keyed, watch bool) error {
	info, err := a.Run(ctx)
	if err != nil {
		return err
	}
	var task Task
	if err := json.Unmarshal(info.Task, &task); err != nil || len(task.Titles) == 0 {
		return fmt.Errorf("the task wants {titles: [...]}, got %s", info.Task)
	}
	shorten := false
	for _, l := range info.Lessons {
		if strings.Contains(l.Text, "40 characters") {
			shorten = true
		}
	}
	step := 0
	if keyed {
		cp, err := a.Resume(ctx)
		if err != nil {
			return err
		}
		step = cp.Step
	}
	url := os.Getenv("OVERNIGHT_MCP_URL")
	if url == "" {
		return errors.New("OVERNIGHT_MCP_URL is not set: the scenario declares no mcp: servers")
	}
	var opts *mcp.ClientOptions
	changed := make(chan struct{}, 1)
	if watch {
		opts = &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcp-agent", Version: "v1"}, opts)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", url, err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return err
	}
	fmt.Printf("attempt %d: %d tools; opening tickets %d..%d\n", info.Attempt, len(tools.Tools), step, len(task.Titles)-1)
	for i := step; i < len(task.Titles); i++ {
		title, key := task.Titles[i], fmt.Sprintf("ticket-%d", i)
		if r := []rune(title); shorten && len(r) > maxTitle {
			title, key = string(r[:maxTitle]), key+"/short"
		}
		params := &mcp.CallToolParams{Name: "tickets__create_ticket", Arguments: map[string]any{"title": title}}
		if keyed {
			params.Meta = mcp.Meta{"overnight.dev/idempotency-key": key}
		}
		res, err := call(ctx, cs, params)
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("create_ticket %q: the tool answered an error: %s", task.Titles[i], text(res))
		}
		fmt.Printf("ticket %d: %s (replayed: %v)\n", i, text(res), res.Meta["overnight.dev/replayed"] == true)
		if _, err := a.Checkpoint(ctx, i+1, map[string]int{"opened": i + 1}); err != nil {
			return err
		}
	}
	summary := fmt.Sprintf("opened %d tickets", len(task.Titles))
	if watch {
		gone, err := toolsGone(ctx, cs, tools.Tools, changed)
		if err != nil {
			return err
		}
		summary += "; tools gone: " + strings.Join(gone, ", ")
	}
	return a.Done(ctx, "success", summary, nil)
}

// toolsGone waits for notifications/tools/list_changed, lists the tools
// again, and calls each tool of before that went, printing the answer.
func toolsGone(ctx context.Context, cs *mcp.ClientSession, before []*mcp.Tool, changed <-chan struct{}) ([]string, error) {
	select {
	case <-changed:
		fmt.Println("notified: notifications/tools/list_changed")
	case <-time.After(20 * time.Second):
		return nil, errors.New("no notifications/tools/list_changed within 20s")
	}
	after, err := cs.ListTools(ctx, nil)
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	for _, t := range after.Tools {
		listed[t.Name] = true
	}
	var gone []string
	for _, t := range before {
		if listed[t.Name] {
			continue
		}
		gone = append(gone, t.Name)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: t.Name, Arguments: map[string]any{}})
		if err != nil {
			return nil, fmt.Errorf("call %s: %w", t.Name, err)
		}
		fmt.Printf("calling %s: isError %v: %s\n", t.Name, res.IsError, text(res))
	}
	fmt.Printf("tools gone: %v\n", gone)
	return gone, nil
}

// call makes one tools/call, retrying under the same key while the harness
// says to try again later.
func call(ctx context.Context, cs *mcp.ClientSession, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	for try := 1; ; try++ {
		res, err := cs.CallTool(ctx, params)
		var rpc *jsonrpc.Error
		if err == nil || !errors.As(err, &rpc) || try >= maxTries {
			return res, err
		}
		var data struct {
			Code         string `json:"code"`
			RetryAfterMS int64  `json:"retry_after_ms"`
		}
		if json.Unmarshal(rpc.Data, &data) != nil {
			return nil, err
		}
		if _, keyed := params.Meta["overnight.dev/idempotency-key"]; keyed && data.Code == "unknown" && data.RetryAfterMS <= 0 {
			// In doubt: only a keyed call may be sent again, so the
			// harness can tell the retry from a new call.
			data.RetryAfterMS = 100
		}
		if data.RetryAfterMS <= 0 {
			return nil, err
		}
		fmt.Printf("%s: %s, retrying in %dms\n", params.Name, data.Code, data.RetryAfterMS)
		time.Sleep(time.Duration(data.RetryAfterMS) * time.Millisecond)
	}
}

func text(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}
