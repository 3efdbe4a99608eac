package journal_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/overnight-dev/overnight/harness/journal"
)

func Example() {
	tmp, err := os.MkdirTemp("", "overnight-journal-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)

	j, err := journal.Open(filepath.Join(tmp, ".overnight"), journal.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()

	ctx := context.Background()
	// Both entries become durable together, or not at all.
	if err := j.Commit(ctx,
		journal.Entry{Key: []byte("run/r1"), Value: []byte(`{"status":"running"}`)},
		journal.Entry{Key: []byte("ev/r1/00000001"), Value: []byte(`{"type":"started"}`)},
	); err != nil {
		log.Fatal(err)
	}
	value, err := j.Get([]byte("run/r1"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(value))
	// Output: {"status":"running"}
}
