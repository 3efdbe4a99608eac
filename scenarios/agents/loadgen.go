package agents

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/overnight-dev/overnight/sandbox/agent"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/cloud"
)

// Loadgen is a load generator for benchmarks, not an example of a good
// agent: it makes --requests gateway requests as fast as it can — in turn
// an effect under a key of its own (an idempotent DNS upsert), a
// checkpoint, an LLM call and an event — and reports, in its last event
// (type "loadgen"), how many it made and how long they took inside the
// sandbox (container start excluded).
func Loadgen(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	n := fs.Int("requests", 1000, "how many gateway requests to make")
	return runMain(ctx, fs, args, stderr, func(ctx context.Context, c *agent.Client) error {
		if _, err := c.Resume(ctx); err != nil {
			return err
		}
		start := time.Now()
		for i := 0; i < *n; i++ {
			if err := LoadgenStep(ctx, c, i); err != nil {
				return fmt.Errorf("request %d: %w", i, err)
			}
		}
		elapsed := time.Since(start)
		_ = c.Event(ctx, "loadgen", fmt.Sprintf("%d requests in %s", *n, elapsed), map[string]any{"requests": *n, "elapsed_ms": elapsed.Milliseconds()})
		return c.Done(ctx, protocol.OutcomeSuccess, "load generated", nil)
	})
}

// LoadgenStep makes request i of Loadgen: in turn an effect, a checkpoint,
// an LLM call and an event.
func LoadgenStep(ctx context.Context, c *agent.Client, i int) error {
	var err error
	switch i % 4 {
	case 0:
		_, err = c.EffectWithKey(ctx, fmt.Sprintf("lg-%d", i), cloud.KindSetDNS,
			map[string]string{"host": fmt.Sprintf("h%d.example.com", i%100), "target": "svc-1.cloud.internal"})
	case 1:
		_, err = c.Checkpoint(ctx, i, map[string]int{"i": i})
	case 2:
		_, err = c.Chat(ctx, protocol.ChatRequest{Model: "any", Messages: []protocol.ChatMessage{{Role: "user", Content: protocol.MessageContent{Text: "ping"}}}})
	case 3:
		err = c.Event(ctx, "progress", "", nil)
	}
	return err
}
