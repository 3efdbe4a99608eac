package history_test

import (
	"fmt"

	"github.com/overnight-dev/overnight/harness/history"
)

// An effect is shown by the name `overnight approve` takes: its key, or
// u/<n> for the n-th unkeyed effect — and its id k/<key> when the key
// itself reads as an id, so two effects never show the same label.
func ExampleEffectLabel() {
	for _, id := range []string{history.KeyedID("step-3/0"), history.UnkeyedID(9), history.KeyedID("u/9"), history.KeyedID("k/x")} {
		fmt.Println(history.EffectLabel(id))
	}
	// Output:
	// step-3/0
	// u/9
	// k/u/9
	// k/k/x
}
