package invariant_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestInvariant(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "invariant")
}
