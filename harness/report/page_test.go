package report_test

import (
	"bytes"
	"os/exec"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/report"
	"github.com/overnight-dev/overnight/harness/writeup"
	"github.com/overnight-dev/overnight/reflect"
)

var _ = Describe("the reports' pages", func() {
	It("are written in the one page shell, and every class they use has a rule in its stylesheet — the suite's report, a run's, a live run's and the reflection report", func() {
		var suitePage, runPage, livePage, reflectPage bytes.Buffer
		Expect(report.SuiteHTML(&suitePage, nightlySuite(), report.SuiteOptions{})).To(Succeed())
		Expect(report.RunHTML(&runPage, runFixture(), report.RunOptions{})).To(Succeed())
		Expect(report.RunHTML(&livePage, liveFixture(), report.RunOptions{})).To(Succeed())
		Expect(reflect.FromHistory(runFixture()).WriteHTML(&reflectPage)).To(Succeed())
		for name, page := range map[string]string{"suite": suitePage.String(), "run": runPage.String(), "live run": livePage.String(), "reflection": reflectPage.String()} {
			Expect(page).To(HavePrefix("<!DOCTYPE html>"), name)
			Expect(strings.Count(page, "<style>")).To(Equal(1), name)
			Expect(page).To(ContainSubstring("<style>"+string(writeup.Style)+"</style>"), name)
			Expect(harnesstest.Unstyled(string(writeup.Style), page)).To(BeEmpty(), "%s: classes with no rule in writeup.Style", name)
		}
	})

	It("come from a package that does not import reflect: a run's reflections are written up from its history records", func() {
		cmd := exec.Command("go", "list", "-deps", "./harness/report")
		cmd.Dir = harnesstest.ModuleRoot()
		out, err := cmd.Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Fields(string(out))).NotTo(ContainElement("github.com/overnight-dev/overnight/reflect"))
	})
})
