package scenarios_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/scenarios"
)

// FuzzParse checks, for any bytes: Parse does not panic; it returns either a scenario or an
// error that is an *Error or an ErrorList of more than one, sorted, each naming the file with a
// line and column >= 1 (Parse does no I/O, so there is no unpositioned error to allow for); and
// a scenario it returns is complete: one agent source, faults that round-trip, limits set.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed files in testdata: %v", err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"", "- a\n", "{{{", "a: &a [*a]\n", "<<: 5\n", "\x00", "\xff",
		header, header + "agents: {v: {<<: [{builtin: a}, {image: b}]}}\n",
		header + "faults: [\"kill@stp:3\", 'x@t:1x', kill@step:0]\n",
		header + "task: {a: .nan, b: !x y, [c]: 1}\n",
		header + "limits: {timeout: 1d, horizon: '0', max_attempts: 1e3}\nseed: 1e30\n",
		header + "---\n---\nx: 1\n",
		header + "llm: {model: 'ollama:a b', budget: {calls: 0, cost_usd: -1}, rules: [{when: {}, reply: x, tool_calls: []}]}\n",
		header + "llm:\n  rules:\n    - when: {last_role: tool}\n      tool_calls: [{name: f, arguments: {a: \"$x..y\", b: [\"$.\", \"$$\"]}}]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := scenarios.Parse("fuzz.yaml", data)
		if err != nil {
			if sc != nil {
				t.Fatalf("Parse returned both a scenario and an error: %v", err)
			}
			var list scenarios.ErrorList
			var one *scenarios.Error
			switch {
			case errors.As(err, &list):
				if len(list) < 2 {
					t.Fatalf("an ErrorList of %d: %v", len(list), err)
				}
			case errors.As(err, &one):
				list = scenarios.ErrorList{one}
			default:
				t.Fatalf("error %T is neither *Error nor ErrorList: %v", err, err)
			}
			for i, e := range list {
				if e.File != "fuzz.yaml" || e.Line < 1 || e.Column < 1 || e.Msg == "" {
					t.Fatalf("badly positioned error %#v in %v", e, err)
				}
				if i > 0 && (e.Line < list[i-1].Line || e.Line == list[i-1].Line && e.Column < list[i-1].Column) {
					t.Fatalf("errors out of order: %v", err)
				}
			}
			return
		}
		if !bytes.Equal(sc.Raw, data) || sc.Source != "fuzz.yaml" || sc.Name == "" || (sc.World.Name == "" && !sc.HasAPIs()) {
			t.Fatalf("incomplete scenario: %+v", sc)
		}
		agents := []scenarios.AgentSpec{sc.Agent}
		for _, a := range sc.Agents {
			agents = append(agents, a)
		}
		for _, a := range agents {
			n := 0
			for _, s := range []string{a.Builtin, a.Binary, a.Image} {
				if s != "" {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("agent %+v has %d sources", a, n)
			}
		}
		if len(sc.Faults) != len(sc.FaultText) || sc.Task == nil || sc.World.Options == nil {
			t.Fatalf("inconsistent scenario: %+v", sc)
		}
		for i, sp := range sc.Faults {
			again, err := chaos.ParseSpec(sp.String())
			if err != nil || again != sp {
				t.Fatalf("fault %q does not round-trip: %v", sc.FaultText[i], err)
			}
		}
		if l := sc.LLM; l != nil {
			if l.Model == "" || l.Budget.Calls < 0 || l.Budget.Tokens < 0 || l.Budget.CostUSD < 0 {
				t.Fatalf("bad llm block %+v", l)
			}
			for i, r := range l.Rules {
				var rule map[string]any
				if err := json.Unmarshal(r, &rule); err != nil || rule["when"] == nil {
					t.Fatalf("llm.rules[%d] is not a JSON object with when: %s (%v)", i, r, err)
				}
				_, reply := rule["reply"]
				_, calls := rule["tool_calls"]
				if reply == calls {
					t.Fatalf("llm.rules[%d] has not exactly one of reply and tool_calls: %s", i, r)
				}
			}
		}
		if sc.Limits.Timeout <= 0 || sc.Limits.Horizon <= 0 || sc.Limits.MaxAttempts < 1 || sc.Limits.MaxAttempts > scenarios.MaxAttemptsLimit {
			t.Fatalf("bad limits %+v", sc.Limits)
		}
	})
}
