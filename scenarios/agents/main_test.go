package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// What every built-in agent's process does around its own work: the exit
// codes the harness reads from the attempt and the messages a person reads
// in `overnight logs`. The work itself runs against the real gateway in the
// harness's end-to-end specs.
var _ = Describe("a built-in agent's process", func() {
	run := func(name string, args ...string) (int, string) {
		main, ok := Lookup(name)
		Expect(ok).To(BeTrue(), name)
		var stdout, stderr bytes.Buffer
		code := main(context.Background(), args, &stdout, &stderr)
		return code, stderr.String()
	}
	outsideSandbox := func() {
		GinkgoT().Setenv(protocol.EnvSocket, "")
		GinkgoT().Setenv(protocol.EnvURL, "")
		GinkgoT().Setenv(protocol.EnvToken, "")
	}

	DescribeTable("exits 2 on a flag it does not know",
		func(name string) {
			outsideSandbox()
			code, stderr := run(name, "--no-such-flag")
			Expect(code).To(Equal(2))
			Expect(stderr).To(ContainSubstring("flag provided but not defined: -no-such-flag"))
		},
		Entry(nil, "deployer"), Entry(nil, "maintainer"), Entry(nil, "loadgen"))

	DescribeTable("exits 2 outside a sandbox, saying which agent and why",
		func(name string) {
			outsideSandbox()
			code, stderr := run(name)
			Expect(code).To(Equal(2))
			Expect(stderr).To(HavePrefix(name + ": agent: no gateway token: $" + protocol.EnvToken + " is empty"))
		},
		Entry(nil, "deployer"), Entry(nil, "maintainer"), Entry(nil, "loadgen"))

	// A stand-in for the gateway that fences every request, as the real one
	// does once a newer attempt holds the run: the agent must stop, and say
	// so with exit code 3 rather than claim a failure of its own.
	DescribeTable("exits 3 when a newer attempt has fenced it",
		func(name string) {
			gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusConflict)
				_ = json.NewEncoder(w).Encode(protocol.ErrorBody{Error: protocol.ErrorDetail{Code: protocol.CodeFenced, Message: "a newer attempt owns this run"}})
			}))
			DeferCleanup(gw.Close)
			outsideSandbox()
			GinkgoT().Setenv(protocol.EnvURL, gw.URL)
			GinkgoT().Setenv(protocol.EnvToken, "attempt-1")
			code, stderr := run(name)
			Expect(stderr).To(HavePrefix(name + ": "))
			Expect(stderr).To(ContainSubstring(protocol.CodeFenced))
			Expect(code).To(Equal(3))
		},
		Entry(nil, "deployer"), Entry(nil, "maintainer"), Entry(nil, "loadgen"))
})
