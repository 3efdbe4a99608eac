package initproc_test

import (
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox/initproc"
)

// roleEnv marks a re-executed test binary: it then plays init or a helper agent instead of
// running the specs.
const roleEnv = "OVERNIGHT_INITPROC_TEST"

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "1" && len(os.Args) > 1 {
		switch os.Args[1] {
		case "init": // test-binary init -- COMMAND...
			os.Exit(initproc.Main(os.Args[3:]))
		case "helper":
			os.Exit(helper(os.Args[2:]))
		}
	}
	os.Exit(m.Run())
}

func TestInitproc(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "initproc")
}
