package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/harness/timeline"
)

// startServe starts `overnight serve` on a free loopback port over state
// and returns its base URL; the process is stopped (SIGTERM, then SIGKILL)
// after the spec.
func startServe(ctx context.Context, state string) string {
	GinkgoHelper()
	cmd := exec.Command(bin, "--state", state, "serve", "--addr", "127.0.0.1:0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	Expect(cmd.Start()).To(Succeed())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	DeferCleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			Expect(err).NotTo(HaveOccurred(), "serve ends with exit 0 on SIGTERM; stderr: %s", stderr.String())
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			Fail("serve did not stop within 10s of SIGTERM")
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-lines:
		url, ok := strings.CutPrefix(line, "serving ")
		Expect(ok).To(BeTrue(), "serve's first line: %q; stderr: %s", line, stderr.String())
		return url
	case <-time.After(30 * time.Second):
		Fail("serve printed no address within 30s; stderr: " + stderr.String())
	case <-ctx.Done():
	}
	return ""
}

// fetch GETs url and returns the status and body.
func fetch(ctx context.Context, url string) (int, string) {
	GinkgoHelper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	Expect(err).NotTo(HaveOccurred())
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(body)
}

var runRow = regexp.MustCompile(`<tr><td><a href="/runs/([^"]+)">[^<]*</a></td><td>deploy</td><td>default</td><td class="n">(\d+)</td><td>(\w+)</td>`)

var _ = Describe("overnight serve", func() {
	It("refuses an address other machines can reach, saying why, unless --allow-remote", func(ctx SpecContext) {
		state := GinkgoT().TempDir()
		for _, addr := range []string{":7777", "0.0.0.0:0", "[::]:0"} {
			o := overnight(ctx, state, nil, "serve", "--addr", addr)
			Expect(o.code).To(Equal(3), addr)
			Expect(o.stderr).To(ContainSubstring("loopback only"), addr)
			Expect(o.stderr).To(ContainSubstring("--allow-remote"), addr)
		}
		o := overnight(ctx, state, nil, "serve", "--addr", "127.0.0.1:0", "--allow-remote")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring("holds no journal"), "past the address check, the state dir is checked")
	})

	It("shows a run live while it runs, never blocking it, and to the end", func(ctx SpecContext) {
		state := stateDir()
		first := overnight(ctx, state, nil, "run", "deploy", "--seed", "1", "-q")
		Expect(first.code).To(Equal(0), first.stderr)
		base := startServe(ctx, state)

		// Readers hammer the viewer all along: every request of theirs
		// opens the journal when nobody owns the state dir.
		served, stop := harnesstest.Hammer(http.DefaultClient, 2, base+"/runs")
		DeferCleanup(stop)
		Eventually(served).Should(BeNumerically(">", 5))

		run := exec.CommandContext(ctx, bin, "--state", state, "run", "deploy", "--seed", "2", "--fault", "kill@step:3", "--output", "json", "-q")
		var out, errb bytes.Buffer
		run.Stdout, run.Stderr = &out, &errb
		Expect(run.Start()).To(Succeed())
		var runErr error
		done := make(chan struct{})
		go func() { runErr = run.Wait(); close(done) }()
		DeferCleanup(func() {
			_ = run.Process.Kill()
			<-done
		})

		var live string
		Eventually(func(g Gomega) {
			_, body := fetch(ctx, base+"/runs")
			for _, m := range runRow.FindAllStringSubmatch(body, -1) {
				if m[2] == "2" && m[3] == "running" {
					live = m[1]
				}
			}
			g.Expect(live).NotTo(BeEmpty(), "the live run is listed as running")
		}, time.Minute, 20*time.Millisecond).Should(Succeed())
		code, page := fetch(ctx, base+"/runs/"+live)
		Expect(code).To(Equal(200))
		Expect(page).To(ContainSubstring("a run is live"), "read from the process that owns the state dir, and the header says so")
		Expect(page).To(ContainSubstring(`http-equiv="refresh"`), "a live run's page reloads itself")
		Expect(page).To(ContainSubstring("no verdict yet (running)"))

		Eventually(done, 2*time.Minute).Should(BeClosed())
		Expect(runErr).NotTo(HaveOccurred(), "the run is not refused the state dir: %s", errb.String())
		res := decodeResult(out.String())
		Expect(res.RunID).To(Equal(live))
		Expect(res.Verdict).To(Equal("pass"))

		Eventually(func(g Gomega) {
			_, page := fetch(ctx, base+"/runs/"+live)
			g.Expect(page).To(ContainSubstring("no run is live"))
			g.Expect(page).To(ContainSubstring(`Verdict: <b class="pass">PASS</b>`))
			g.Expect(page).NotTo(ContainSubstring(`http-equiv="refresh"`))
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		Expect(served()).To(BeNumerically(">", 20))
	}, SpecTimeout(4*time.Minute))

	It("renders in headless Chromium: the runs list, and a run's page with its timeline drawn", func(ctx SpecContext) {
		browser := harnesstest.Chromium(ctx, GinkgoT())
		state := stateDir()
		o := overnight(ctx, state, nil, "run", "deploy", "--seed", "3", "--fault", "kill@step:2", "--output", "json", "-q")
		Expect(o.code).To(Equal(0), o.stderr)
		res := decodeResult(o.stdout)
		base := startServe(ctx, state)
		dir := GinkgoT().TempDir()

		list := harnesstest.Headless(ctx, GinkgoT(), browser, dir, "--dump-dom", base+"/runs")
		Expect(list).To(ContainSubstring(`<a href="/runs/` + res.RunID + `">`))
		Expect(list).To(ContainSubstring(`<td class="pass">pass</td>`))

		dom := harnesstest.Headless(ctx, GinkgoT(), browser, dir, "--dump-dom", base+"/runs/"+res.RunID)
		Expect(dom).To(ContainSubstring(`aria-label="timeline of the run"`), "the SVG is in the DOM")
		Expect(strings.Count(dom, "<circle")).To(BeNumerically(">=", 6), "the steps, effects and the fault are drawn")
		Expect(dom).To(ContainSubstring("restart: attempt 2"))

		shot := filepath.Join(dir, "run.png")
		harnesstest.Headless(ctx, GinkgoT(), browser, dir, "--window-size=1200,1400", "--screenshot="+shot, base+"/runs/"+res.RunID)
		f, err := os.Open(shot)
		Expect(err).NotTo(HaveOccurred())
		defer f.Close()
		img, err := png.Decode(f)
		Expect(err).NotTo(HaveOccurred())
		region, ok := timelineRegion(img)
		Expect(ok).To(BeTrue(), "the timeline's panel is in the screenshot (%v)", region)
		Expect(countColour(img, region, timeline.Tones["ok"])).To(BeNumerically(">", 40), "green marks (steps, effects, attempts) in the timeline's region %v", region)
		Expect(countColour(img, region, timeline.Tones["bad"])).To(BeNumerically(">", 20), "the red mark of the kill in the timeline's region %v", region)
	}, SpecTimeout(10*time.Minute))
})

// timelineRegion finds the timeline in a screenshot: the bounding box of
// its panel's colour (timeline.Background), which nothing else of the page
// uses.
func timelineRegion(img image.Image) (image.Rectangle, bool) {
	var want [3]int
	_, _ = fmt.Sscanf(timeline.Background, "#%02x%02x%02x", &want[0], &want[1], &want[2])
	b := img.Bounds()
	r := image.Rectangle{Min: b.Max, Max: b.Min}
	n := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if near(img.At(x, y), want, 1) {
				n++
				r.Min.X, r.Min.Y = min(r.Min.X, x), min(r.Min.Y, y)
				r.Max.X, r.Max.Y = max(r.Max.X, x+1), max(r.Max.Y, y+1)
			}
		}
	}
	// A panel, not a few stray pixels: most of its box is its colour.
	return r, n > 0 && n > r.Dx()*r.Dy()/2 && r.Dx() > b.Dx()/2 && r.Dy() > 100
}

// countColour counts the pixels of r whose colour is hex (#rrggbb), give
// or take a little.
func countColour(img image.Image, r image.Rectangle, hex string) int {
	var want [3]int
	_, _ = fmt.Sscanf(hex, "#%02x%02x%02x", &want[0], &want[1], &want[2])
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if near(img.At(x, y), want, 6) {
				n++
			}
		}
	}
	return n
}

func near(c interface{ RGBA() (r, g, b, a uint32) }, want [3]int, tol int) bool {
	r, g, b, _ := c.RGBA()
	got := [3]int{int(r >> 8), int(g >> 8), int(b >> 8)}
	for i := range got {
		if d := got[i] - want[i]; d < -tol || d > tol {
			return false
		}
	}
	return true
}
