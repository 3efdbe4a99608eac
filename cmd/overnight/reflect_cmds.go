package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"time"

	"github.com/spf13/cobra"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/reflect"
)

// reflectCmd writes a run's reflections up for a person.
func reflectCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "reflect RUN",
		Short: "Write up a run's reflections: the failure, its replays, the diagnosis, the lesson, its verification, the gate's decisions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "md" && format != "json" && format != "html" {
				return usagef("--format %q: want md, json or html", format)
			}
			h, err := g.openExisting(cmd.Context(), false)
			if err != nil {
				return &codeError{exitError, err}
			}
			defer h.Close()
			rep, err := reflect.Load(cmd.Context(), h, args[0])
			if err != nil {
				return &codeError{exitError, err}
			}
			switch format {
			case "json":
				err = writeJSON(g.stdout, rep)
			case "html":
				err = rep.WriteHTML(g.stdout)
			default:
				err = rep.WriteMarkdown(g.stdout)
			}
			if err != nil {
				return &codeError{exitError, err}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "md", "md, json or html (self-contained, with an SVG timeline)")
	return cmd
}

// gateCmd lists the effects of a run held at its gate now.
func gateCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "gate RUN",
		Short: "List the effects of a run held at its gate now (approve or deny them with overnight approve|deny)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var held []harness.HeldEffect
			h, err := g.openExisting(cmd.Context(), false)
			if rm := g.remote(cmd.Context(), err); rm != nil {
				held, err = rm.Held(cmd.Context(), args[0])
			} else if err == nil {
				defer h.Close()
				held, err = h.Held(cmd.Context(), args[0])
			}
			if err != nil {
				return &codeError{exitError, err}
			}
			if held == nil {
				held = []harness.HeldEffect{}
			}
			if output == "json" {
				return writeJSON(g.stdout, map[string]any{"held": held})
			}
			if len(held) == 0 {
				fmt.Fprintf(g.stdout, "no effect of run %s is held at its gate\n", args[0])
				return nil
			}
			for _, e := range held {
				name := history.EffectLabel(e.ID)
				if e.Key == "" {
					name += " (unkeyed)"
				}
				fmt.Fprintf(g.stdout, "%s  %s %s  (policy %s, waiting for %s since %s; args digest %s)\n", name, e.Kind, e.Args, e.Policy, e.Waiting,
					e.Since.Local().Format(time.DateTime), e.ArgsDigest)
			}
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

// decideCmd is approve (or deny): a person's decision on a held effect.
func decideCmd(g *globals, approve bool) *cobra.Command {
	name, verb := "deny", "Deny"
	if approve {
		name, verb = "approve", "Approve"
	}
	var by, digest string
	cmd := &cobra.Command{
		Use:   name + " RUN EFFECT",
		Short: verb + " an effect held at a run's gate by an approve policy (its id or idempotency key, as overnight gate lists it)",
		Long: verb + ` one call held at a run's gate by an approve policy: EFFECT is its id (u/3 for an
unkeyed call) or its idempotency key, as overnight gate lists them. The decision is that call's
alone: a second call with other arguments is held again. With --args-digest (as overnight gate
lists it), the decision is refused unless the held call's arguments are the ones you saw.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			d := harness.Decision{Effect: args[1], ArgsDigest: digest, Approve: approve, By: by}
			h, err := g.openExisting(ctx, false)
			if rm := g.remote(ctx, err); rm != nil {
				err = rm.Decide(ctx, args[0], d)
			} else if err == nil {
				defer h.Close()
				err = h.Decide(ctx, args[0], d)
			}
			if errors.Is(err, harness.ErrNotHeld) {
				return &codeError{exitError, err}
			}
			if err != nil {
				return &codeError{exitError, err}
			}
			fmt.Fprintf(g.stdout, "%s %s of run %s\n", map[bool]string{true: "approved", false: "denied"}[approve], args[1], args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&by, "by", whoami(), "who decides, for the record")
	cmd.Flags().StringVar(&digest, "args-digest", "", "refuse unless the held call's arguments digest is this one (overnight gate lists it)")
	return cmd
}

func whoami() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if n := os.Getenv("USER"); n != "" {
		return n
	}
	return "someone"
}
