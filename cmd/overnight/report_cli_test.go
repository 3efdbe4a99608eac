package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/timeline"
)

// externalRef finds a src or href that leaves the page: a self-contained
// report has none.
var externalRef = regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?\s*(https?:)?//`)

var _ = Describe("overnight report", func() {
	It("renders a real run as self-contained HTML with the SVG timeline, as Markdown, and as the run's JSON result", func(ctx SpecContext) {
		state := stateDir()
		o := overnight(ctx, state, nil, "run", "deploy", "--seed", "2", "--fault", "kill@step:3", "--output", "json")
		Expect(o.code).To(Equal(0), o.stderr)
		res := decodeResult(o.stdout)

		html := overnight(ctx, state, nil, "report", res.RunID, "--format", "html")
		Expect(html.code).To(Equal(0), html.stderr)
		page := html.stdout
		Expect(page).To(HavePrefix("<!DOCTYPE html>"))
		Expect(page).To(ContainSubstring(`<svg xmlns="http://www.w3.org/2000/svg"`))
		Expect(page).NotTo(MatchRegexp(externalRef.String()), "no external URL in a src or href")
		Expect(page).NotTo(ContainSubstring("<script"))
		svg := page[strings.Index(page, "<svg"):strings.Index(page, "</svg>")]
		for _, lane := range timeline.Lanes {
			if lane == "reflection" || lane == "gate" {
				Expect(svg).NotTo(ContainSubstring(">"+lane+"<"), "no empty row for %s: deploy has no reflection, nor a gate", lane)
			} else {
				Expect(svg).To(ContainSubstring(">"+lane+"<"), "lane %s", lane)
			}
		}
		Expect(svg).To(MatchRegexp(`<text [^>]*>kill@step:3</text>`), "the fault is written on the timeline, not only in a tooltip")
		Expect(svg).To(ContainSubstring(">legend<"))
		Expect(svg).To(ContainSubstring("restart: attempt 2"), "the kill's restart is on the timeline")
		Expect(svg).To(ContainSubstring("kill@step:3"), "the fault is on the timeline")
		Expect(svg).To(MatchRegexp(`step 5 \(attempt 2\)`), "the steps are on the timeline")
		Expect(svg).To(ContainSubstring("cloud.create_network"), "the effects are on the timeline")
		Expect(page).To(ContainSubstring("no-duplicate-effects"))
		Expect(page).To(ContainSubstring("overnight run deploy --seed 2 --fault kill@step:3"))

		md := overnight(ctx, state, nil, "report", res.RunID, "--format", "md")
		Expect(md.code).To(Equal(0), md.stderr)
		Expect(md.stdout).To(HavePrefix("# Run " + res.RunID + "\n\nVerdict: **PASS**"))
		Expect(md.stdout).To(ContainSubstring("| `kill@step:3` |"))

		js := overnight(ctx, state, nil, "report", res.RunID, "--format", "json")
		Expect(js.code).To(Equal(0), js.stderr)
		Expect(js.stdout).To(Equal(o.stdout), "the run's result as run --output json printed it")

		bad := overnight(ctx, state, nil, "report", res.RunID, "--format", "pdf")
		Expect(bad.code).To(Equal(3))
		Expect(bad.stderr).To(ContainSubstring("want html, md or json"))
		missing := overnight(ctx, state, nil, "report", "no-such-run")
		Expect(missing.code).To(Equal(3))
		Expect(missing.stderr).To(ContainSubstring(`no such run "no-such-run"`))
	}, SpecTimeout(3*time.Minute))

	It("writes a suite's HTML report with the reports of the runs that did not pass beside it, linked", func(ctx SpecContext) {
		state, dir := stateDir(), GinkgoT().TempDir()
		out, js := filepath.Join(dir, "suite.html"), filepath.Join(dir, "suite.json")
		o := overnight(ctx, state, nil, "suite", "deploy", "--agents", "naive", "--seeds", "2", "--fault", "kill@step:3",
			"--require", "pass^1>=0.9", "--html", out, "--json", js, "-q")
		Expect(o.code).To(Equal(1), o.stderr+o.stdout)
		res := readSuite(js)
		data, err := os.ReadFile(out)
		Expect(err).NotTo(HaveOccurred())
		page := string(data)
		Expect(page).To(HavePrefix("<!DOCTYPE html>"))
		Expect(page).NotTo(MatchRegexp(externalRef.String()))
		Expect(page).To(ContainSubstring("FAIL (requirement not met)"))
		Expect(page).To(ContainSubstring("pass^2"))
		for _, r := range res.Runs {
			link := "suite-runs/" + r.RunID + ".html"
			Expect(page).To(ContainSubstring(`<a href="`+link+`">`), "run %s is linked", r.RunID)
			run, err := os.ReadFile(filepath.Join(dir, link))
			Expect(err).NotTo(HaveOccurred())
			Expect(string(run)).To(ContainSubstring("<svg"))
			Expect(string(run)).To(ContainSubstring("Run " + r.RunID))
			Expect(page).To(ContainSubstring(r.Reproduce))
		}

		merged := filepath.Join(dir, "merged.html")
		m := overnight(ctx, state, nil, "suite", "merge", js, "--html", merged)
		Expect(m.code).To(Equal(1), m.stderr)
		data, err = os.ReadFile(merged)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(data)).To(ContainSubstring("Runs that did not pass (2)"))
		Expect(string(data)).NotTo(ContainSubstring("<a href="), "a merge has no run reports to link")
	}, SpecTimeout(4*time.Minute))
})
