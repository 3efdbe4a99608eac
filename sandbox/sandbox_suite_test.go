package sandbox_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The contract's own specs need no engine: the Docker backend's are in
// sandbox/docker, and every backend passes the kit in sandbox/sandboxtest.
func TestSandbox(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Sandbox Contract Suite")
}
