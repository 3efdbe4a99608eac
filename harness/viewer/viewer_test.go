package viewer_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/harness/viewer"
	"github.com/overnight-dev/overnight/harness/writeup"
)

func TestViewer(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Viewer Suite")
}

const detailed = "20261204-070000-c0ffee"

// externalRef finds a src or href that leaves the page.
var externalRef = regexp.MustCompile(`(?i)(src|href|action)\s*=\s*["']?\s*(https?:)?//`)

// serve starts a viewer of dir on a local test server.
func serve(dir string) *httptest.Server {
	GinkgoHelper()
	view, err := harness.OpenView(harness.ViewOptions{StateDir: dir})
	Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewServer(viewer.New(view, viewer.Options{}))
	DeferCleanup(srv.Close)
	return srv
}

// get fetches path and returns the status and body.
func get(srv *httptest.Server, path string) (int, string) {
	GinkgoHelper()
	resp, err := srv.Client().Get(srv.URL + path)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(body)
}

// rows counts the run rows of a runs page.
func rows(body string) int { return strings.Count(body, `<tr><td><a href="/runs/`) }

var _ = Describe("the viewer", func() {
	var srv *httptest.Server
	BeforeEach(func() { srv = serve(stateDir(130, detailed)) })

	It("lists the runs newest first, by pages, with filters on scenario, agent, verdict, status and seed", func() {
		code, body := get(srv, "/runs")
		Expect(code).To(Equal(200))
		Expect(rows(body)).To(Equal(50))
		Expect(body).To(ContainSubstring("Runs 1–50 of 131 matching (132 in the state dir)"), "the isolated re-run is listed under its parent only")
		Expect(strings.Index(body, runID(129))).To(BeNumerically("<", strings.Index(body, runID(128))), "newest first")
		Expect(body).To(ContainSubstring(`<a href="/runs?offset=50">older →</a>`))

		_, body = get(srv, "/runs?offset=100")
		Expect(rows(body)).To(Equal(31))
		Expect(body).To(ContainSubstring("Runs 101–131 of 131"))
		Expect(body).To(ContainSubstring(`<a href="/runs?offset=50">← newer</a>`))

		_, body = get(srv, "/runs?scenario=week&agent=naive&verdict=fail&limit=1000")
		// week: odd i; naive: (i/2)%2 == 1; fail: i%3 == 1. i ≡ 7 (mod 12) for i < 130: 11 runs.
		Expect(rows(body)).To(Equal(11))
		Expect(body).To(ContainSubstring(`<option selected>week</option>`))
		_, body = get(srv, "/runs?seed=3&verdict=pass&limit=1000")
		Expect(rows(body)).To(Equal(5), "seed 3 and pass: i ≡ 3 (mod 30)")
		_, body = get(srv, "/runs?isolated=1&scenario=deploy-v2")
		Expect(rows(body)).To(Equal(2))
		Expect(body).To(ContainSubstring("replay 1 of 1 of reflection r1"))
		_, body = get(srv, "/runs?status=running")
		Expect(body).To(ContainSubstring("No run matches"))

		code, body = get(srv, "/runs?seed=x")
		Expect(code).To(Equal(400))
		Expect(body).To(ContainSubstring("want a whole number"))
	})

	It("shows a run: its report with the SVG timeline, its LLM exchanges, events and logs", func() {
		code, body := get(srv, "/runs/"+detailed)
		Expect(code).To(Equal(200))
		for _, want := range []string{`<svg xmlns="http://www.w3.org/2000/svg"`, "restart: attempt 2", "kill@step:3", "Reflection r1", "The gate",
			"LLM exchanges (1)", "deploy &lt;carefully&gt;", "step 5 done", "<td>&#43;2d3h30s</td>", "deployed &lt;prod&gt;", "replay 1 of 1 of reflection r1", "no-duplicate-effects",
			"<h2>Poisoned state</h2>", "the world contradicts migrated {&#34;database&#34;:&#34;prod-db&#34;,&#34;version&#34;:3}",
			"<h2>MCP tool calls</h2>", "<tr><td>tickets</td><td>create_ticket</td></tr>",
			"<td><code>tickets__create_ticket</code></td><td>ticket-1</td><td>agent</td><td class=\"ok\">done</td><td>yes (1 time)</td><td>approve: approved by person:ana</td>",
			"<h2>MCP calls refused</h2>", "<tr><td>&#43;2d4h virtual</td><td><code>tickets__close_ticket</code></td><td class=\"n\">2</td><td>unkeyed</td><td><code>mcp-tool-gone:tickets__close_ticket@step:3</code></td><td class=\"bad\">tool tickets__close_ticket is gone"} {
			Expect(body).To(ContainSubstring(want))
		}
		Expect(body).NotTo(MatchRegexp(externalRef.String()))
		Expect(body).NotTo(ContainSubstring("<script"))
		Expect(body).NotTo(ContainSubstring(`http-equiv="refresh"`), "a finished run's page does not reload")
		Expect(body).To(MatchRegexp(`<span class="muted">read-only view of [^<]+ · no run is live: each page shows the state dir as it is when you load it</span>`))
		Expect(body).NotTo(ContainSubstring("journal for the moment"), "no internal language in the header")

		code, body = get(srv, "/runs/"+detailed+"/report.html")
		Expect(code).To(Equal(200))
		Expect(body).To(HavePrefix("<!DOCTYPE html>"))
		code, body = get(srv, "/runs/"+detailed+"/result.json")
		Expect(code).To(Equal(200))
		Expect(body).To(ContainSubstring(`"run_id": "` + detailed + `"`))
		code, _ = get(srv, "/runs/"+detailed+"/report.md")
		Expect(code).To(Equal(200))

		code, body = get(srv, "/runs/"+detailed)
		Expect(code).To(Equal(200))
		Expect(body).To(ContainSubstring(`<a href="/runs/` + detailed + `/agent-report">the agent's report file</a>`))
		Expect(body).To(ContainSubstring("<h2>The agent's report</h2>\n<p>/workspace/report.md, kept ("))
		Expect(body).To(ContainSubstring("&lt;b&gt;not markup&lt;/b&gt;: api behind prod.example.com"), "what the agent wrote stays text")
		code, body = get(srv, "/runs/"+detailed+"/agent-report")
		Expect(code).To(Equal(200))
		Expect(body).To(Equal(fixtureAgentReport))
		code, body = get(srv, "/runs/"+runID(1)+"/agent-report")
		Expect(code).To(Equal(404))
		Expect(body).To(ContainSubstring("the run has no report file"))

		code, body = get(srv, "/runs/no-such-run")
		Expect(code).To(Equal(404))
		Expect(body).To(ContainSubstring(`no such run &#34;no-such-run&#34;`))
	})

	It("lists the reflections and the suites, and shows a suite with its runs linked to their pages", func() {
		_, body := get(srv, "/reflections")
		Expect(body).To(ContainSubstring(`<a href="/runs/` + detailed + `">`))
		Expect(body).To(ContainSubstring("Send the api_key."))
		Expect(body).To(ContainSubstring("<th>failure came back?</th>"))
		Expect(body).To(ContainSubstring("<td>in 1 of 1 replays</td>"), "what the replays answered, not how many there were")
		_, body = get(srv, "/suites")
		Expect(body).To(ContainSubstring(`<a href="/suites/suite-fixture">suite-fixture</a>`))
		code, body := get(srv, "/suites/suite-fixture")
		Expect(code).To(Equal(200))
		Expect(body).To(ContainSubstring(`<a href="/runs/` + runID(1) + `">`))
		Expect(body).To(ContainSubstring("pass^1"))
		code, _ = get(srv, "/suites/nope")
		Expect(code).To(Equal(404))
	})

	It("is read-only and self-contained: GET and HEAD only, a policy that lets nothing load from elsewhere, every page in the one page shell", func() {
		resp, err := srv.Client().Post(srv.URL+"/runs", "text/plain", strings.NewReader("x"))
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusMethodNotAllowed))
		resp, err = srv.Client().Get(srv.URL + "/runs")
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.Header.Get("Content-Security-Policy")).To(HavePrefix("default-src 'none'"))
		for _, path := range []string{"/runs", "/reflections", "/suites", "/suites/suite-fixture", "/runs/" + detailed, "/runs/" + detailed + "/report.html", "/runs/no-such-run"} {
			_, body := get(srv, path)
			Expect(body).NotTo(MatchRegexp(externalRef.String()), path)
			Expect(body).NotTo(ContainSubstring("<script"), path)
			Expect(body).To(ContainSubstring("<style>"+string(writeup.Style)+"</style>"), "%s: overnight's one page shell", path)
			Expect(harnesstest.Unstyled(string(writeup.Style), body)).To(BeEmpty(), "%s: classes with no rule in the stylesheet", path)
		}
	})
})

var _ = Describe("the viewer beside a process that owns the state dir", func() {
	It("reads through the owner's control socket, and sees the runs it writes and the ones it drives as running", func(ctx SpecContext) {
		dir := stateDir(20, "")
		h, err := harness.Open(ctx, harness.Options{StateDir: dir, Existing: true})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(h.Close)
		srv := serve(dir)

		_, body := get(srv, "/runs")
		Expect(body).To(ContainSubstring("read-only view of "+dir+" · a run is live"), "the header says, for a person, that what it shows may change")
		Expect(body).To(ContainSubstring("(20 in the state dir)"))

		// The owner writes more runs, and rewrites one: its index reads
		// exactly those again.
		writeRuns(ctx, h.Writer(), 20, 25)
		rec, err := h.History().Run(runID(3))
		Expect(err).NotTo(HaveOccurred())
		rec.Status, rec.Verdict, rec.Result = history.StatusRunning, "", nil
		Expect(h.Writer().Put(ctx, history.RunEntry(rec))).To(Succeed())
		_, body = get(srv, "/runs?limit=1000")
		Expect(body).To(ContainSubstring("(25 in the state dir)"))
		Expect(body).To(ContainSubstring(runID(24)))
		_, body = get(srv, "/runs?status=interrupted")
		Expect(rows(body)).To(Equal(1), "recorded running, driven by no process: interrupted")

		Expect(h.Close()).To(Succeed())
		_, body = get(srv, "/runs")
		Expect(body).To(ContainSubstring("read-only view of "+dir+" · no run is live"), "the owner left: the viewer reads the journal")
		Expect(body).To(ContainSubstring("(25 in the state dir)"))
	})

	It("never keeps a process from taking the state dir, however often it is asked", func(ctx SpecContext) {
		dir := stateDir(200, detailed)
		srv := serve(dir)
		requests, stop := harnesstest.Hammer(srv.Client(), 3, srv.URL+"/runs", srv.URL+"/runs/"+detailed, srv.URL+"/suites")
		DeferCleanup(stop)
		Eventually(requests).WithTimeout(10*time.Second).Should(BeNumerically(">", 10), "the viewer is being asked (under load, ten requests take more than the default second)")
		before := requests()
		for i := range 20 {
			start := time.Now()
			j, err := journal.Open(dir, journal.Options{})
			Expect(err).NotTo(HaveOccurred(), "open %d while the viewer reads", i)
			Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))
			w := history.NewWriter(j)
			writeRuns(ctx, w, 200+i, 201+i)
			Expect(j.Close()).To(Succeed())
			time.Sleep(20 * time.Millisecond) // a process's life: it does not take the state dir back at once
		}
		_, body := get(srv, "/runs")
		Expect(body).To(ContainSubstring("(222 in the state dir)"))
		Expect(requests()).To(BeNumerically(">", before), "the viewer answered meanwhile")
	})

	It("says so when the state dir is owned by a process without a control socket", func(ctx SpecContext) {
		dir := stateDir(1, "")
		srv := serve(dir)
		j, err := journal.Open(dir, journal.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(j.Close)
		code, body := get(srv, "/runs")
		Expect(code).To(Equal(http.StatusServiceUnavailable))
		Expect(body).To(ContainSubstring("is in use by pid"))
		Expect(errors.Is(context.Cause(ctx), nil)).To(BeTrue())
	})
})
