package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/spf13/cobra"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/harness/llm"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/scenarios"
)

// The codes of an error printed as JSON ({"error": {"code", ...}}), for
// scripts to branch on; README.md lists them. The exit code does not
// depend on them: it is 3 for all but not_failing (2).
const (
	codeUsage             = "usage"              // the command line: an unknown command or flag, the wrong arguments, a flag's bad value, an --agent the scenario lacks
	codeScenarioNotFound  = "scenario_not_found" // neither a scenario file nor a built-in scenario of that name
	codeScenarioInvalid   = "scenario_invalid"   // the scenario fails validation (file, line, column), or cannot be read
	codeFaultInvalid      = "fault_invalid"      // a fault no kind can take (--fault, or the scenario's faults), or fault sources that do not combine
	codeLLMConfig         = "llm_config"         // the model cannot be set up: a bad --llm, a provider without its key, a scripted model without rules
	codeStateNotFound     = "state_not_found"    // --state names no state dir holding a journal
	codeStateLocked       = "state_locked"       // another process owns the state dir
	codeStateFormat       = "state_format"       // the state dir's journal is of another format version
	codeRunNotFound       = "run_not_found"      // no run of that id in the state dir
	codeDockerUnavailable = "docker_unavailable" // the sandbox backend (the Docker engine) cannot be reached
	codeNotFailing        = "not_failing"        // shrink: the run did not fail, so there is nothing to shrink (exit 2)
	codeInterrupted       = "interrupted"        // Ctrl-C or SIGTERM; run_id names the resumable run
	codeWorldUnreachable  = "world_unreachable"  // a world over the world protocol does not answer where the scenario (or --world) says
	codeWorldMismatch     = "world_mismatch"     // a world over the protocol answers, but is not the one the scenario asks for
	codeHTTPConfig        = "http_config"        // an HTTP API cannot be reached as declared: its credential not in the environment, a replay without its recording
	codeImageNotFound     = "image_not_found"    // the agent's own image, or an image world's, is not on the engine (which pulls nothing)
	codeAgentInvalid      = "agent_invalid"      // the agent cannot run as given: an image with nothing to run, a binary that is not static
	codeInternal          = "internal"           // anything else: the message says what failed
)

// usageError marks an error of the command line.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef is a usage error, exit 3.
func usagef(format string, args ...any) error {
	return &codeError{exitError, &usageError{fmt.Errorf(format, args...)}}
}

// scenarioLoadError marks an error of finding or reading a scenario, so
// that a missing file is told from other missing files.
type scenarioLoadError struct{ err error }

func (e *scenarioLoadError) Error() string { return e.err.Error() }
func (e *scenarioLoadError) Unwrap() error { return e.err }

// interruptedError is a run stopped by a signal, resumable.
type interruptedError struct {
	runID string
	err   error
}

func (e *interruptedError) Error() string {
	return fmt.Sprintf("interrupted; the run is resumable: overnight resume %s", e.runID)
}
func (e *interruptedError) Unwrap() error { return e.err }

// errorBody is the JSON form of an error: {"error": errorBody}. File,
// Line and Column are set for a problem in a scenario file, RunID for an
// interrupted run.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	RunID   string `json:"run_id,omitempty"`
}

// describeError is the JSON form of err; usage says the command line was
// refused before the command ran.
func describeError(err error, usage bool) errorBody {
	b := errorBody{Code: errorCode(err, usage), Message: err.Error()}
	var pos *scenarios.Error
	if errors.As(err, &pos) {
		b.File, b.Line, b.Column = pos.File, pos.Line, pos.Column
	}
	var ie *interruptedError
	if errors.As(err, &ie) {
		b.RunID = ie.runID
	}
	return b
}

// errorCode derives an error's code from the sentinels and types it wraps.
func errorCode(err error, usage bool) string {
	var ue *usageError
	var pos *scenarios.Error
	var load *scenarioLoadError
	switch {
	case usage, errors.As(err, &ue), errors.Is(err, scenarios.ErrUnknownAgent):
		return codeUsage
	case errors.As(err, &pos):
		return codeScenarioInvalid
	case errors.Is(err, scenarios.ErrUnknownScenario),
		errors.As(err, &load) && errors.Is(err, fs.ErrNotExist):
		return codeScenarioNotFound
	case load != nil:
		return codeScenarioInvalid
	case errors.Is(err, harness.ErrNoStateDir):
		return codeStateNotFound
	case errors.Is(err, journal.ErrLocked):
		return codeStateLocked
	case errors.Is(err, journal.ErrFormat):
		return codeStateFormat
	case errors.Is(err, harness.ErrRunNotFound):
		return codeRunNotFound
	case errors.Is(err, sandbox.ErrUnavailable):
		return codeDockerUnavailable
	case errors.Is(err, sandbox.ErrImageNotFound):
		return codeImageNotFound
	case errors.Is(err, sandbox.ErrInvalidSpec):
		return codeAgentInvalid
	case errors.Is(err, chaos.ErrUnknownFault), errors.Is(err, chaos.ErrUnsupported), errors.Is(err, chaos.ErrNotDrawable),
		errors.Is(err, harness.ErrFaultSources):
		return codeFaultInvalid
	case errors.Is(err, llm.ErrConfig):
		return codeLLMConfig
	case errors.Is(err, harness.ErrNotFailing):
		return codeNotFailing
	case errors.Is(err, harness.ErrInterrupted):
		return codeInterrupted
	case errors.Is(err, harness.ErrWorldUnreachable):
		return codeWorldUnreachable
	case errors.Is(err, harness.ErrWorldMismatch):
		return codeWorldMismatch
	case errors.Is(err, harness.ErrNoCredential), errors.Is(err, harness.ErrNoRecording):
		return codeHTTPConfig
	}
	return codeInternal
}

// writeErrorJSON prints err as one JSON object.
func writeErrorJSON(w io.Writer, err error, usage bool) error {
	return writeJSON(w, map[string]errorBody{"error": describeError(err, usage)})
}

// jsonFlags are the flags whose value json makes a command print JSON:
// --output (-o), and reflect's --format.
var jsonFlags = []string{"output", "format"}

// wantsJSON reports whether the command line asks cmd for JSON. parsed
// says cobra parsed its flags; when it did not (a usage error), or cmd is
// the root (an unknown command), the arguments are read as pflag would.
func wantsJSON(root, cmd *cobra.Command, args []string, parsed bool) bool {
	if cmd == nil {
		return false
	}
	takes := false
	for _, name := range jsonFlags {
		if f := cmd.Flags().Lookup(name); f != nil {
			takes = true
			if f.Value.String() == "json" {
				return true
			}
		}
	}
	if parsed || (!takes && cmd != root) {
		return false
	}
	return scanJSON(root, cmd, args)
}

// scanJSON reads args as pflag would, enough to find the last --output,
// -o or --format and its value: flags that take a value skip it, and
// nothing after "--" is a flag.
func scanJSON(root, cmd *cobra.Command, args []string) bool {
	// takesValue says whether the long flag name takes a value.
	takesValue := func(name string) bool {
		f := cmd.Flags().Lookup(name)
		if f == nil {
			f = root.PersistentFlags().Lookup(name)
		}
		return f != nil && f.NoOptDefVal == ""
	}
	// shorthand names the flag of a one-letter form, and whether it takes a value.
	shorthand := func(letter byte) (string, bool) {
		if letter == 'o' {
			return "output", true
		}
		f := cmd.Flags().ShorthandLookup(string(letter))
		if f == nil {
			f = root.PersistentFlags().ShorthandLookup(string(letter))
		}
		if f == nil {
			return "", false
		}
		return f.Name, f.NoOptDefVal == ""
	}
	wants := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "--":
			return wants
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			isJSONFlag := name == "output" || name == "format"
			if !hasVal && (isJSONFlag || takesValue(name)) {
				val = next()
			}
			if isJSONFlag {
				wants = val == "json"
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for j := 1; j < len(a); j++ {
				name, takesValue := shorthand(a[j])
				if !takesValue {
					continue
				}
				val := strings.TrimPrefix(a[j+1:], "=")
				if val == "" {
					val = next()
				}
				if name == "output" {
					wants = val == "json"
				}
				break
			}
		}
	}
	return wants
}
