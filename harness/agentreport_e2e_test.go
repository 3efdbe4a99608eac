package harness_test

import (
	"bytes"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/report"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/scenarios"
)

var _ = Describe("the agent's report file against the real engine", func() {
	// reportingWith is the deploy scenario with report (a YAML line) and
	// a variant of the deployer, reporting, that writes /workspace/report.md
	// before it reports done; reporting is it with the default report:.
	reportingWith := func(report string) *scenarios.Scenario {
		GinkgoHelper()
		scen := deployWith("  reporting:\n    builtin: deployer\n    args: [--report, /workspace/report.md]\n")
		text := string(scen.Raw) + report
		s, err := scenarios.Parse("deploy-report.yaml", []byte(text))
		Expect(err).NotTo(HaveOccurred())
		return s
	}
	reporting := func() *scenarios.Scenario { return reportingWith("report: {path: /workspace/report.md}\n") }
	// cli runs the overnight binary on state: a process of its own.
	cli := func(ctx SpecContext, state string, args ...string) (string, string, int) {
		GinkgoHelper()
		cmd := exec.CommandContext(ctx, overnightBinary, append(args, "--state", state)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			Expect(err).NotTo(HaveOccurred())
		}
		return out.String(), errOut.String(), code
	}

	// open opens a harness on a state dir of its own; close closes it (once).
	open := func(ctx SpecContext) (h *harness.Harness, state string, close func()) {
		GinkgoHelper()
		state = GinkgoT().TempDir()
		h, err := harness.Open(ctx, harness.Options{StateDir: state, InitBinary: initBinary, Sandbox: docker.Using(dockerCli),
			Logger: slog.New(slog.NewTextHandler(GinkgoWriter, nil))})
		Expect(err).NotTo(HaveOccurred())
		var once sync.Once
		close = func() { once.Do(func() { Expect(h.Close()).To(Succeed()) }) }
		DeferCleanup(func(ctx SpecContext) {
			close()
			Expect(harnesstest.Leftovers(ctx, dockerCli, state)).To(BeEmpty(), "containers left behind by the run")
		})
		return h, state, close
	}

	It("copies the file out when the agent reports done, keeps it with the run, and a new process reads it from the journal", func(ctx SpecContext) {
		h, state, closeHarness := open(ctx)

		res, err := h.Run(ctx, harness.RunRequest{Scenario: reporting(), Agent: "reporting"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Report).NotTo(BeNil())
		Expect(res.Report.Status).To(Equal(history.ReportKept), res.Report.Error)
		Expect(res.Report.Path).To(Equal("/workspace/report.md"))

		full, err := h.Full(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(full.Report).NotTo(BeNil())
		want := full.Report.Content
		Expect(want).To(HavePrefix("# Deployed api\n"))
		Expect(want).To(ContainSubstring("- DNS: api.example.com"))
		Expect(int64(len(want))).To(Equal(res.Report.Bytes))
		var md bytes.Buffer
		Expect(report.RunMarkdown(&md, full)).To(Succeed())
		Expect(md.String()).To(ContainSubstring("## The agent's report\n\n/workspace/report.md, kept"))
		Expect(md.String()).To(ContainSubstring(want))

		// The harness that ran it is gone; a new process reads the journal.
		closeHarness()
		out, errOut, code := cli(ctx, state, "report", res.RunID, "--file")
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal(want))
		out, errOut, code = cli(ctx, state, "report", res.RunID, "--format", "html")
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(ContainSubstring("<h2>The agent's report</h2>"))
		Expect(out).To(ContainSubstring("- DNS: api.example.com"))
	}, SpecTimeout(3*time.Minute))

	It("records a file the agent never wrote as missing, not as an error of the run", func(ctx SpecContext) {
		h, state, closeHarness := open(ctx)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: reporting()}) // the default deployer writes no report
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Report).To(Equal(&history.ReportRecord{Path: "/workspace/report.md", Status: history.ReportMissing}))
		full, err := h.Full(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		var md bytes.Buffer
		Expect(report.RunMarkdown(&md, full)).To(Succeed())
		Expect(md.String()).To(ContainSubstring("/workspace/report.md, missing: the agent wrote no such file"))
		var text bytes.Buffer
		Expect(res.WriteText(&text)).To(Succeed())
		Expect(strings.Count(text.String(), "agent's report: /workspace/report.md, missing")).To(Equal(1))

		closeHarness()
		out, errOut, code := cli(ctx, state, "report", res.RunID, "--file")
		Expect(code).To(Equal(3))
		Expect(out).To(BeEmpty())
		Expect(errOut).To(ContainSubstring(": the agent's report /workspace/report.md, missing: the agent wrote no such file"))
	}, SpecTimeout(3*time.Minute))

	It("records a file over the scenario's max_bytes as unreadable, with why, and keeps nothing of it", func(ctx SpecContext) {
		h, _, _ := open(ctx)
		res, err := h.Run(ctx, harness.RunRequest{Scenario: reportingWith("report: {path: /workspace/report.md, max_bytes: 16}\n"), Agent: "reporting"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Verdict).To(Equal(harness.VerdictPass), res.Reason)
		Expect(res.Report).NotTo(BeNil())
		Expect(res.Report.Status).To(Equal(history.ReportUnreadable))
		Expect(res.Report.Error).To(ContainSubstring("file too large"))
		Expect(res.Report.SHA256).To(BeEmpty())
		full, err := h.Full(ctx, res.RunID)
		Expect(err).NotTo(HaveOccurred())
		Expect(full.Report.Content).To(BeEmpty())
	}, SpecTimeout(3*time.Minute))
})
