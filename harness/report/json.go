package report

import (
	"encoding/json"
	"io"

	"github.com/overnight-dev/overnight/harness/suite"
)

// JSON writes a suite's result as indented JSON: the contract of
// `overnight suite --json`, which `suite merge` reads back.
func JSON(w io.Writer, res *suite.Result) error { return writeJSON(w, res) }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
