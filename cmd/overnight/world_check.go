package main

import (
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/overnight-dev/overnight/scenarios/world/worldtest"
)

// worldCheckCmd runs the world conformance kit against a world at a URL,
// or against a command it starts.
func worldCheckCmd(g *globals) *cobra.Command {
	var (
		data        string
		allowWrites bool
		output      string
		timeout     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "check URL | check [--data DIR] -- COMMAND [ARGS...]",
		Short: "Check that a world keeps the world protocol's promises: the conformance kit, a line per rule",
		Long: `Check that a world — in any language — keeps the promises of the world
protocol (docs/world-protocol.md): describe, a key applied twice, lookup
after an apply and of an unknown key, instances restored from a ledger
and isolated from each other, the shape of refused calls, and, for a
world it starts itself, what survives a SIGKILL. It prints one line per
rule: PASS, FAIL or SKIP, the rule, and what it saw.

  overnight world check URL
checks the world serving at URL. It applies the requests the world's
describe gives as "examples", under keys beginning worldtest/<nonce>/, to
instances it makes and drops; the world itself is only read. A world
without instances would be written to: the kit refuses (exit 3) unless
--allow-writes. The world must not be in use by a run meanwhile.

  overnight world check [--data DIR] -- COMMAND [ARGS...]
starts COMMAND as the harness starts a command world, with
OVERNIGHT_WORLD_ADDR (a free loopback port) and OVERNIGHT_WORLD_DATA (DIR,
default a temporary directory removed after) set, waits until it answers
describe, checks it, SIGKILLs it and starts it again on the same data
(crash-reconciled), and stops it. A DIR that holds files already is
refused unless --allow-writes.

Exit codes: 0 every rule passed or was skipped for a reason of the
world's own (a capability it does not declare), 1 a rule failed, 3 the
check could not be made (nothing answers, writes not allowed, bad
arguments).`,
		Example: `  overnight world check http://127.0.0.1:8088
  overnight world check -- python3 examples/pyworld/inventory.py
  overnight world check -o json -- overnight world serve cloud`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := worldtest.Options{AllowWrites: allowWrites, Data: data, Timeout: timeout}
			if g.verbose {
				opts.Output = g.stderr
			}
			dash := cmd.ArgsLenAtDash()
			var target string
			switch {
			case dash < 0 && len(args) != 1:
				return usagef("world check: give the world's URL, or -- and the command that starts it (got %d arguments)", len(args))
			case dash < 0 && data != "":
				return usagef("world check: --data is for a world the kit starts: give -- COMMAND ARGS... after it")
			case dash > 0:
				return usagef("world check: give either a URL or -- COMMAND, not both (got %q before --)", args[:dash])
			case dash == 0 && len(args) == 0:
				return usagef("world check: give the command that starts the world after --")
			case dash < 0:
				u, err := url.Parse(args[0])
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return usagef("world check: %q is not a world's URL; want http://HOST:PORT, e.g. http://127.0.0.1:8088", args[0])
				}
				target = args[0]
			}
			ctx, stop := g.interruptible()
			defer stop()
			var report worldtest.Report
			if target != "" {
				report = worldtest.Check(ctx, target, opts)
			} else {
				report = worldtest.CheckCommand(ctx, args, opts)
			}
			return printWorldCheck(g, report, output)
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "data directory of the world the kit starts (its OVERNIGHT_WORLD_DATA); default a temporary one, removed after")
	cmd.Flags().BoolVar(&allowWrites, "allow-writes", false, "let the kit write to the world itself (keys under worldtest/<nonce>/) when it has no instances, or to a --data DIR that holds files")
	cmd.Flags().DurationVar(&timeout, "timeout", worldtest.DefaultTimeout, "bound on the whole check")
	outputFlag(cmd, &output)
	return cmd
}

// printWorldCheck prints the report and turns it into the exit code.
func printWorldCheck(g *globals, report worldtest.Report, output string) error {
	if output == "json" {
		if err := writeJSON(g.stdout, report); err != nil {
			return &codeError{exitError, err}
		}
	} else {
		for _, r := range report.Results {
			fmt.Fprintln(g.stdout, r)
		}
		where := report.URL
		if len(report.Command) > 0 {
			where = fmt.Sprintf("%q", report.Command)
		}
		name := report.World
		if name == "" {
			name = "?"
		}
		fmt.Fprintf(g.stdout, "world %s (%s): %d passed, %d failed, %d skipped\n", name, where,
			report.Count(worldtest.Pass), report.Count(worldtest.Fail), report.Count(worldtest.Skip))
	}
	switch {
	case report.Err != nil:
		if output == "json" {
			fmt.Fprintln(g.stderr, "overnight:", report.Err)
			return &codeError{exitError, nil}
		}
		return &codeError{exitError, report.Err}
	case len(report.Failed()) > 0:
		return &codeError{exitFail, nil}
	}
	return nil
}
