package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/viewer"
)

// serveCmd is the local, read-only web viewer over a state dir.
func serveCmd(g *globals) *cobra.Command {
	var (
		addr        string
		allowRemote bool
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Browse the state dir's runs, timelines, reflections and suites in a local, read-only web viewer",
		Long: `Serve a read-only web viewer over the state dir: the runs, with filters
(scenario, agent, verdict, status, seed) and paging; each run's timeline,
invariants, faults, effects, LLM exchanges, events and the logs of each
attempt; the reflections; the suites' results. Pages are rendered on the
server: no script, nothing fetched from elsewhere.

It never blocks a run of the same state dir: while another process owns the
state dir (a run, a suite), it reads through that process's control socket,
and a live run's page reloads itself; while nobody does, it opens the journal
read-only for the moment of each request (a run starting meanwhile waits
those milliseconds), and holds nothing between requests.

It listens on loopback only, unless --allow-remote: the pages show every
prompt, answer and log line of the runs, and nothing asks who is looking.
It runs until interrupted (exit 0).`,
		Example: `  overnight serve                          # http://127.0.0.1:7777
  overnight serve --addr 127.0.0.1:0       # any free port; the URL is printed
  overnight --state ci/.overnight serve --addr 127.0.0.1:8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := loopbackOnly(cmd.Context(), addr, allowRemote, "the viewer has no login and shows every prompt, answer and log line of the runs"); err != nil {
				return usagef("%w", err)
			}
			view, err := harness.OpenView(harness.ViewOptions{StateDir: g.state, Logger: g.logger()})
			if err != nil {
				return &codeError{exitError, err}
			}
			ctx, stop := g.interruptible()
			defer stop()
			// Index the runs' headers before the first request asks.
			page, err := view.QueryRuns(ctx, history.RunQuery{Limit: 1})
			if err != nil {
				return &codeError{exitError, err}
			}
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return &codeError{exitError, fmt.Errorf("listen on %s: %w", addr, err)}
			}
			srv := &http.Server{Handler: viewer.New(view, viewer.Options{Logger: g.logger()}), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(g.stdout, "serving http://%s\n", l.Addr())
			if !g.quiet {
				fmt.Fprintf(g.stderr, "overnight serve: %d runs in %s, read-only; Ctrl-C stops\n", page.Total, view.StateDir())
			}
			done := make(chan error, 1)
			go func() { done <- srv.Serve(l) }()
			select {
			case err := <-done:
				return &codeError{exitError, err}
			case <-ctx.Done():
			}
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return &codeError{exitError, err}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:7777", "address to listen on: a loopback address (127.0.0.1, ::1, localhost) unless --allow-remote")
	cmd.Flags().BoolVar(&allowRemote, "allow-remote", false, "allow an address other machines can reach: the viewer has no login, and shows every prompt, answer and log line")
	return cmd
}

// loopbackOnly refuses an address other machines could reach, unless
// allowed: all interfaces (an empty host), an address not on loopback, a
// name that resolves to one. risk says why, for the message.
func loopbackOnly(ctx context.Context, addr string, allowRemote bool, risk string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: want HOST:PORT, e.g. 127.0.0.1:7777: %w", addr, err)
	}
	if allowRemote {
		return nil
	}
	why := "--addr %s: %s; " + risk + ", so it listens on loopback only (127.0.0.1, ::1, localhost) unless --allow-remote"
	if host == "" {
		return fmt.Errorf(why, addr, "no host listens on every interface")
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return fmt.Errorf("--addr %s: resolve %s: %w", addr, host, err)
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return fmt.Errorf(why, addr, ip.String()+" is not a loopback address")
		}
	}
	return nil
}
