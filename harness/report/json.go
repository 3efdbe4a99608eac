package report

import (
	"encoding/json"
	"io"

	"github.com/overnight-dev/overnight/harness/suite"
)

// JSON writes a suite's result as indented JSON: the contract of
// `overnight suite --json`, which `suite merge` reads back.
func JSON(w io.Writer, res *suite.Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}
