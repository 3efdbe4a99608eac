package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// worldCmd gathers the commands about one world and the world protocol.
func worldCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "world",
		Short: "Serve a world over the world protocol (docs/world-protocol.md), or check one keeps it",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(worldServeCmd(g), worldCheckCmd(g))
	return cmd
}

// worldServeCmd serves a built-in world over the world protocol.
func worldServeCmd(g *globals) *cobra.Command {
	var (
		addr, data  string
		options     []string
		allowRemote bool
	)
	cmd := &cobra.Command{
		Use:   "serve NAME",
		Short: "Serve a built-in world over the world protocol (HTTP+JSON), its state in memory or in --data",
		Long: `Serve a built-in world (overnight worlds lists them) over the world
protocol, HTTP+JSON, as docs/world-protocol.md describes it: describe,
apply, lookup, ledger, state, goal, duplicates, set_version and the
instances a harness makes for shadows.

Once it listens it prints one line on stdout:
  serving world NAME on http://HOST:PORT, state in DIR
(or "state in memory" without --data: then the world is gone when the
process ends). With --data the world's state and ledger are in a Badger
database in DIR, each apply fsynced before it is answered, so a world killed
at any instant comes back as it was; instances are kept in memory only.

--addr and --data default to $OVERNIGHT_WORLD_ADDR and $OVERNIGHT_WORLD_DATA:
how a harness starts a command world. The protocol has no authentication, so
it listens on loopback only unless --allow-remote. It runs until SIGINT or
SIGTERM (exit 0).`,
		Example: `  overnight world serve cloud                               # any free port, state in memory
  overnight world serve cloud --addr 127.0.0.1:8080 --data ./cloud-world
  overnight world serve cloud --option goal=maintenance`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			reg := harness.DefaultWorlds()
			def, ok := reg.Definition(args[0])
			if !ok {
				return usagef("no built-in world %q (built-in worlds: %s)", args[0], strings.Join(reg.Names(), ", "))
			}
			opts, err := parseWorldOptions(options)
			if err != nil {
				return usagef("%w", err)
			}
			if err := loopbackOnly(cmd.Context(), addr, allowRemote,
				"the world protocol has no authentication: whoever reaches it can apply effects to the world, read its ledger and make instances"); err != nil {
				return usagef("%w", err)
			}
			ctx, stop := g.interruptible()
			defer stop()
			return serveWorld(ctx, g, def, addr, data, opts)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", envOr("OVERNIGHT_WORLD_ADDR", "127.0.0.1:0"), "address to listen on, HOST:PORT (port 0: any free one, printed); a loopback address unless --allow-remote ($OVERNIGHT_WORLD_ADDR)")
	cmd.Flags().StringVar(&data, "data", envOr("OVERNIGHT_WORLD_DATA", ""), "directory to keep the world's state in, durably (default: in memory, lost when it stops; $OVERNIGHT_WORLD_DATA)")
	cmd.Flags().StringArrayVar(&options, "option", nil, "a world option, K=V (repeatable; V is read as JSON when it is JSON, else as a string): what a scenario's world: {options} gives")
	cmd.Flags().BoolVar(&allowRemote, "allow-remote", false, "allow an address other machines can reach: the protocol has no authentication")
	return cmd
}

// serveWorld serves def until ctx ends.
func serveWorld(ctx context.Context, g *globals, def world.Definition, addr, data string, opts map[string]any) (err error) {
	var store world.Store = world.NewMemStore()
	where := "state in memory (lost when it stops)"
	if data != "" {
		abs, err := filepath.Abs(data)
		if err != nil {
			return &codeError{exitError, fmt.Errorf("--data %s: %w", data, err)}
		}
		bs, err := remote.OpenBadgerStore(abs, g.logger())
		if err != nil {
			return &codeError{exitError, err}
		}
		defer func() {
			if cerr := bs.Close(); cerr != nil {
				err = errors.Join(err, &codeError{exitError, cerr})
			}
		}()
		store, where = bs, "state in "+abs
	}
	srv, err := remote.NewServer(ctx, def, store, opts)
	if err != nil {
		return &codeError{exitError, err}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return &codeError{exitError, fmt.Errorf("listen on %s: %w", addr, err)}
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(g.stdout, "serving world %s on http://%s, %s\n", def.Name, l.Addr(), where)
	done := make(chan error, 1)
	go func() { done <- hs.Serve(l) }()
	select {
	case err := <-done:
		return &codeError{exitError, err}
	case <-ctx.Done():
	}
	// An apply in flight is answered (and recorded) before the store closes.
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return &codeError{exitError, err}
	}
	return nil
}

// parseWorldOptions reads --option K=V flags: V as JSON when it is JSON
// (a number, true, an object...), else as a string.
func parseWorldOptions(flags []string) (map[string]any, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	opts := map[string]any{}
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--option %q: want KEY=VALUE, e.g. goal=maintenance", f)
		}
		if _, dup := opts[k]; dup {
			return nil, fmt.Errorf("--option %s given twice", k)
		}
		var x any
		if json.Unmarshal([]byte(v), &x) != nil {
			x = v
		}
		opts[k] = x
	}
	return opts, nil
}
