// Command schemagen writes scenario.schema.json from the Go types of package scenarios. It runs
// in the package's directory, by `go generate ./scenarios`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/overnight-dev/overnight/scenarios/internal/schemagen"
)

func main() {
	out := flag.String("o", "scenario.schema.json", "the file to write")
	dir := flag.String("dir", ".", "the directory of package scenarios")
	flag.Parse()
	data, err := schemagen.Generate(*dir)
	if err == nil {
		err = os.WriteFile(*out, data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}
