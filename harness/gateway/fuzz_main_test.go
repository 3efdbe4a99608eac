package gateway_test

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// fuzzMinimizeRuns bounds the runs the fuzzing engine spends minimising
// each input that found new coverage, unless -fuzzminimizetime is given.
// Its own default, 60 s per input, is more than a `make fuzz` run of 30 s:
// minimising is quadratic in the input's length (it tries removing every
// range of bytes), FuzzMCP's bodies grow to kilobytes, and the engine
// counts a minimisation's runs only when it ends — so one new input of
// 2.7 kB kept the only worker minimising from the 12th second to the end,
// shown as 0 execs/s. A bound by runs, not time: with a time bound the
// coordinator's deadline races the worker's own and kills the worker,
// which then restarts. 1000 runs take about a quarter of a second.
const fuzzMinimizeRuns = "1000x"

// minimizeFlag is the testing package's flag behind -fuzzminimizetime.
const minimizeFlag = "test.fuzzminimizetime"

// minimizeGiven says whether the command line gave -fuzzminimizetime.
var minimizeGiven bool

func TestMain(m *testing.M) {
	flag.Parse()
	minimizeGiven = flagGiven(minimizeFlag)
	if !minimizeGiven {
		if err := flag.Set(minimizeFlag, fuzzMinimizeRuns); err != nil {
			fmt.Fprintf(os.Stderr, "bound the fuzzing engine's minimisation: set -%s: %v\n", minimizeFlag, err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}

var _ = Describe("the package's fuzz targets", func() {
	It("minimise each input that found new coverage for a bounded number of runs, not the engine's 60 s", func() {
		if minimizeGiven {
			Skip("-fuzzminimizetime was given: the caller's bound holds")
		}
		Expect(flag.Lookup(minimizeFlag).Value.String()).To(Equal(fuzzMinimizeRuns))
	})
})

// flagGiven says whether the flag name was set, on the command line or by
// flag.Set.
func flagGiven(name string) bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// fuzzRequestBound is the longest one fuzzed request may take: the gateway
// answers each within its bounded time, and a fuzzed request takes well
// under a millisecond.
const fuzzRequestBound = 10 * time.Second

// serveBounded serves req with h, and crashes the fuzzing worker with
// every goroutine's stack if h has not returned after fuzzRequestBound: a
// request that never ends is a failure, whose input the engine keeps, not
// a fuzzer that stops making progress.
func serveBounded(h http.Handler, w http.ResponseWriter, req *http.Request, input string) {
	watchdog := time.AfterFunc(fuzzRequestBound, func() {
		stacks := make([]byte, 1<<20)
		stacks = stacks[:runtime.Stack(stacks, true)]
		panic(fmt.Sprintf("%s %s with body %q not answered after %s; goroutines:\n%s", req.Method, req.URL.Path, input, fuzzRequestBound, stacks))
	})
	defer watchdog.Stop()
	h.ServeHTTP(w, req)
}
