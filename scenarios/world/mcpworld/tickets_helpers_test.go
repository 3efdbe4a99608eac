package mcpworld_test

import (
	"context"
	"os"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/mcpworld"
)

// openTickets opens the world of examples/mcp/tickets.py, declared as s,
// each connection a new tickets.py process on the file db.
func openTickets(ctx context.Context, s scenarios.MCPServer, db string) (*mcpworld.World, error) {
	return mcpworld.Open(ctx, mcpworld.Config{Server: s, Timeout: 10 * time.Second, Transport: func(context.Context) (mcp.Transport, error) {
		cmd := exec.Command("python3", "../../../examples/mcp/tickets.py")
		cmd.Env = append(os.Environ(), "TICKETS_DB="+db)
		return &mcp.CommandTransport{Command: cmd}, nil
	}}, world.NewMemStore(), []byte("t/"))
}
