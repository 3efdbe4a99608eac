package chaossuite_test

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/overnighttest"
)

func TestChaosSuite(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Deployer chaos suite")
}

// Every sandbox runs the static overnight binary as its PID 1 (the built-in
// agents are its subcommands). Under go test the running executable is
// this test binary, which cannot serve, so the suite builds one, once, with
// the Go toolchain; it and its sandbox image are removed after the suite.
// With OVERNIGHT_INIT_BINARY set to an overnight binary built beforehand,
// nothing is built.
var _ = BeforeSuite(func(ctx SpecContext) {
	overnighttest.BuildInitBinary(ctx, GinkgoT())
}, NodeTimeout(5*time.Minute))
