package worldtest_test

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
	"github.com/overnight-dev/overnight/scenarios/world/worldtest"
)

// withoutInstances is the cloud world declaring no instances and
// refusing create_instance and drop_instance as the protocol says.
func withoutInstances(inner http.Handler) http.Handler {
	unsupported := func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		answerJSON(w, http.StatusNotImplemented, remote.ErrorBody{Error: remote.CallError{Code: remote.CodeUnsupported, Message: "no instances here"}})
	}
	return describing(func(d map[string]any) {
		d["capabilities"].(map[string]any)["instances"] = false
	})(tampered(inner, map[string]func(http.ResponseWriter, *http.Request, []byte){
		remote.PathCreateInstance: unsupported,
		remote.PathDropInstance:   unsupported,
	}))
}

var _ = Describe("what the kit may write to", func() {
	It("refuses to write to a world without instances unless allowed, then writes only under worldtest/<nonce>/", func(ctx SpecContext) {
		srv := cloudServer(ctx)
		url := serve(withoutInstances(srv))
		report := worldtest.Check(ctx, url, worldtest.Options{})
		got, text := verdicts(report)
		GinkgoWriter.Println(text)
		Expect(report.Err).To(MatchError(worldtest.ErrWritesRefused))
		Expect(report.Error).To(ContainSubstring("give --allow-writes (Options.AllowWrites)"))
		Expect(report.OK()).To(BeFalse(), "an incomplete check is not a pass")
		Expect(got).To(Equal(want(map[string]worldtest.Verdict{
			"examples": worldtest.Skip, "same-key-twice": worldtest.Skip, "lookup-after-apply": worldtest.Skip,
			"instance-restore": worldtest.Skip, "instance-isolation": worldtest.Skip, "crash-reconciled": worldtest.Skip,
		})), text)
		Expect(text).To(ContainSubstring("SKIP same-key-twice: not run: the world has no instances, so this rule would write to the world itself (keys under worldtest/"))
		Expect(text).To(ContainSubstring("SKIP instance-restore: not run: the world does not declare the instances capability"))
		Expect(text).To(ContainSubstring("501 unsupported"), "drop_instance, undeclared, is refused as documented")
		ledger := ledgerOf(ctx, url)
		Expect(ledger).To(BeEmpty(), "nothing was written")

		report = worldtest.Check(ctx, url, worldtest.Options{AllowWrites: true})
		got, text = verdicts(report)
		GinkgoWriter.Println(text)
		Expect(report.Err).NotTo(HaveOccurred())
		Expect(got).To(Equal(want(map[string]worldtest.Verdict{
			"instance-restore": worldtest.Skip, "instance-isolation": worldtest.Skip, "crash-reconciled": worldtest.Skip,
		})), text)
		Expect(text).To(ContainSubstring("PASS examples: 7 examples answered done in order on the world itself"))
		ledger = ledgerOf(ctx, url)
		Expect(ledger).NotTo(BeEmpty())
		for _, e := range ledger {
			Expect(e.Key).To(MatchRegexp(`^worldtest/[0-9a-f]{8}/(examples|same-key-twice|lookup-after-apply)/`))
		}
	})
})

// ledgerOf is the ledger of the world itself at url.
func ledgerOf(ctx SpecContext, url string) []world.LedgerEntry {
	GinkgoHelper()
	c, err := remote.Dial(ctx, url, remote.Config{})
	Expect(err).NotTo(HaveOccurred())
	l, err := c.Ledger(ctx)
	Expect(err).NotTo(HaveOccurred())
	return l
}

var _ = Describe("a world that does not answer", func() {
	It("says nothing answers, and runs no rule", func(ctx SpecContext) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		url := "http://" + l.Addr().String()
		Expect(l.Close()).To(Succeed())
		report := worldtest.Check(ctx, url, worldtest.Options{})
		Expect(report.Err).To(MatchError(worldtest.ErrNoAnswer))
		Expect(report.Error).To(ContainSubstring("connection refused"))
		Expect(report.Results).To(HaveLen(len(worldtest.Rules())))
		for _, r := range report.Results {
			Expect(r.Verdict).To(Equal(worldtest.Skip))
			Expect(r.Evidence).To(Equal("not run: nothing answers at " + url))
		}
	})

	It("fails describe for a server that is not a world, and runs nothing else", func(ctx SpecContext) {
		url := serve(http.NotFoundHandler())
		report := worldtest.Check(ctx, url, worldtest.Options{})
		got, text := verdicts(report)
		Expect(report.Err).NotTo(HaveOccurred(), "it answers: it is no world")
		Expect(got["describe"]).To(Equal(worldtest.Fail))
		Expect(report.Failed()).To(HaveLen(1))
		Expect(text).To(ContainSubstring("FAIL describe: POST /v1/describe: answered 404 404 page not found; want 200 with the world's description"))
		Expect(text).To(ContainSubstring("SKIP lookup-unknown: not run: describe answered no description"))
	})

	It("bounds a call that is never answered by CallTimeout", func(ctx SpecContext) {
		hang := make(chan struct{})
		url := serve(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
		DeferCleanup(func() { close(hang) }) // before the server closes: it waits for its handlers
		start := time.Now()
		report := worldtest.Check(ctx, url, worldtest.Options{CallTimeout: 200 * time.Millisecond})
		Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
		Expect(report.Err).To(MatchError(worldtest.ErrNoAnswer))
		Expect(report.Error).To(ContainSubstring("context deadline exceeded"))
	})
})

var _ = Describe("a check that runs out of time", func() {
	It("says it was cut short, and names the timeout in the evidence of the rule it stopped", func(ctx SpecContext) {
		srv := cloudServer(ctx)
		slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(20 * time.Millisecond)
			srv.ServeHTTP(w, r)
		})
		report := worldtest.Check(ctx, serve(slow), worldtest.Options{Timeout: 300 * time.Millisecond})
		_, text := verdicts(report)
		Expect(report.Err).To(MatchError(ContainSubstring("the check was cut short: context deadline exceeded")))
		Expect(text).To(ContainSubstring("(the check ran out of time: Options.Timeout, --timeout, is 300ms)"))
	})
})

var _ = Describe("a world the kit starts itself", func() {
	self, err := os.Executable()
	Expect(err).NotTo(HaveOccurred())

	It("passes every rule on a durable world, crash-reconciled included, and stops it", func(ctx SpecContext) {
		data := filepath.Join(GinkgoT().TempDir(), "data")
		report := worldtest.CheckCommand(ctx, []string{self}, worldtest.Options{Env: []string{"WORLDTEST_HELPER=durable"}, Data: data})
		got, text := verdicts(report)
		GinkgoWriter.Println(text)
		Expect(report.Err).NotTo(HaveOccurred())
		Expect(report.Command).To(Equal([]string{self}))
		Expect(got).To(Equal(want(nil)), text)
		Expect(text).To(MatchRegexp(`PASS crash-reconciled: SIGKILLed right after answering 7 applies and started again on the same data: lookup found every key with its outcome, ledger \(7 entries\) and state intact; SIGKILLed with an apply in flight, after it had (read the request, before it answered|answered \(it was quicker than the kill\)): it came back (with the apply recorded whole|without the apply)`))
		Expect(data).To(BeADirectory(), "a data dir given is kept")
		_, err := http.Get(report.URL + remote.PathDescribe)
		Expect(err).To(HaveOccurred(), "the world is stopped")
	})

	It("fails crash-reconciled on a world that keeps its state in memory", func(ctx SpecContext) {
		report := worldtest.CheckCommand(ctx, []string{self}, worldtest.Options{Env: []string{"WORLDTEST_HELPER=memory"}})
		got, text := verdicts(report)
		GinkgoWriter.Println(text)
		Expect(got).To(Equal(want(map[string]worldtest.Verdict{"crash-reconciled": worldtest.Fail})), text)
		Expect(report.Failed()[0].Evidence).To(MatchRegexp(`^SIGKILLed right after it answered example 1 \(cloud.create_network key worldtest/[0-9a-f]+/crash-reconciled/1\) with \{"status":"done","result":\{"id":"net-1","name":"prod-net"\}\}, and started again on .*: lookup answers found=false; an apply is answered only once it is durable$`))
	})

	It("says nothing answers when the command exits, or never listens, quoting its output", func(ctx SpecContext) {
		report := worldtest.CheckCommand(ctx, []string{"sh", "-c", "echo no world here >&2; exit 4"}, worldtest.Options{})
		Expect(report.Err).To(MatchError(worldtest.ErrNoAnswer))
		Expect(report.Error).To(ContainSubstring("the process exited (exit status 4); its output ends: no world here"))
		Expect(report.Results).To(HaveLen(len(worldtest.Rules())))

		start := time.Now()
		report = worldtest.CheckCommand(ctx, []string{"sleep", "30"}, worldtest.Options{StartTimeout: 300 * time.Millisecond})
		Expect(report.Err).To(MatchError(worldtest.ErrNoAnswer))
		Expect(report.Error).To(ContainSubstring("did not answer describe at http://127.0.0.1:"))
		Expect(report.Error).To(ContainSubstring("within 300ms"))
		Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second), "the command is killed, not waited for")

		report = worldtest.CheckCommand(ctx, []string{"/no/such/world"}, worldtest.Options{})
		Expect(report.Err).To(MatchError(worldtest.ErrNoAnswer))
		Expect(report.Error).To(ContainSubstring(`start ["/no/such/world"]`))
	})

	It("refuses a data dir that holds files unless writes are allowed", func(ctx SpecContext) {
		data := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(data, "precious.db"), []byte("x"), 0o644)).To(Succeed())
		report := worldtest.CheckCommand(ctx, []string{self}, worldtest.Options{Env: []string{"WORLDTEST_HELPER=durable"}, Data: data})
		Expect(report.Err).To(MatchError(worldtest.ErrWritesRefused))
		Expect(report.Error).To(ContainSubstring("the data directory " + data + " holds files already"))
		b, err := os.ReadFile(filepath.Join(data, "precious.db"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(Equal("x"))
	})

	It("writes the report as JSON with each rule's verdict and evidence", func(ctx SpecContext) {
		report := worldtest.Check(ctx, serve(cloudServer(ctx)), worldtest.Options{})
		b, err := json.Marshal(report)
		Expect(err).NotTo(HaveOccurred())
		var back struct {
			URL     string `json:"url"`
			World   string `json:"world"`
			Results []struct{ Rule, Verdict, Evidence string }
		}
		Expect(json.Unmarshal(b, &back)).To(Succeed())
		Expect(back.World).To(Equal("cloud"))
		Expect(back.Results).To(HaveLen(len(worldtest.Rules())))
		Expect(back.Results[0].Rule).To(Equal("describe"))
		Expect(back.Results[0].Verdict).To(Equal("pass"))
		Expect(strings.Contains(string(b), `"error"`)).To(BeFalse(), "no error field when the check was complete")
	})
})
