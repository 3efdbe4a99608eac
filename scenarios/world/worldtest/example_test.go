package worldtest_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
	"github.com/overnight-dev/overnight/scenarios/world/worldtest"
)

// The cloud world served over the protocol, checked: every rule passes
// but crash-reconciled, which needs a world the kit starts itself
// (CheckCommand).
func ExampleCheck() {
	ctx := context.Background()
	srv, err := remote.NewServer(ctx, cloud.Definition(), world.NewMemStore(), nil)
	if err != nil {
		panic(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()

	report := worldtest.Check(ctx, hs.URL, worldtest.Options{})
	for _, r := range report.Results {
		fmt.Println(r.Verdict, r.Rule)
	}
	fmt.Println("ok:", report.OK())
	// Output:
	// pass describe
	// pass examples
	// pass same-key-twice
	// pass lookup-after-apply
	// pass lookup-unknown
	// pass instance-restore
	// pass instance-isolation
	// pass error-shape
	// skip crash-reconciled
	// ok: true
}
