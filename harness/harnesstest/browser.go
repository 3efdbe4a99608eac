package harnesstest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// TB is what the browser helpers need of a test: *testing.T and GinkgoT()
// both have it.
type TB interface {
	Helper()
	Skip(args ...any)
	Fatalf(format string, args ...any)
}

// Chromium returns Debian's chromium, installing it (apt-get) when it is
// missing and this is root, as CI is; without root it skips tb, saying why.
func Chromium(ctx context.Context, tb TB) string {
	tb.Helper()
	if path, err := exec.LookPath("chromium"); err == nil {
		return path
	}
	if os.Geteuid() != 0 {
		tb.Skip("the browser test needs Debian's chromium: it is not installed, and installing it (apt-get install chromium) needs root")
		return ""
	}
	if err := AptInstall(ctx, "chromium"); err != nil {
		tb.Fatalf("install chromium: %v", err)
		return ""
	}
	path, err := exec.LookPath("chromium")
	if err != nil {
		tb.Fatalf("chromium installed, yet not on PATH: %v", err)
	}
	return path
}

// Headless runs browser headless with args (a URL last), its profile in
// dir, in its own process group (killed whole afterwards: the browser's
// helpers go with it), and returns its stdout — the DOM with --dump-dom.
// It gives up after two minutes.
func Headless(ctx context.Context, tb TB, browser, dir string, args ...string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
		"--user-data-dir=" + filepath.Join(dir, "profile"), "--virtual-time-budget=5000"}, args...)
	cmd := exec.Command(browser, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start chromium: %v", err)
		return ""
	}
	pgid := cmd.Process.Pid
	defer func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			tb.Fatalf("chromium %v: %v: %s", args, err, errb.String())
		}
	case <-ctx.Done():
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
		tb.Fatalf("chromium %v did not finish: %s", args, errb.String())
	}
	return out.String()
}

// Layout is how a page lays out in a browser window.
type Layout struct {
	// WindowWidth is the window's inner width, in CSS pixels.
	WindowWidth int `json:"window_width"`
	// ScrollWidth is the page's (document.scrollingElement.scrollWidth):
	// wider than the window, the page scrolls sideways.
	ScrollWidth int `json:"scroll_width"`
	// Commands are the page's commands: every code, pre, kbd or samp
	// element whose text starts with "overnight " (the reproducing
	// commands), in document order.
	Commands []CommandLayout `json:"commands"`
}

// CommandLayout is how one command lays out.
type CommandLayout struct {
	Text string `json:"text"`
	// Lines is how many lines its text is laid out on: 1 when it does not
	// wrap, however it scrolls inside its own box.
	Lines int `json:"lines"`
	// Right is where its box ends, in CSS pixels from the page's left
	// edge: past the window's width, the page is cut there.
	Right float64 `json:"right"`
}

// Overflows says what in the layout does not fit a window of its width —
// a page wider than the window, commands wrapped over several lines or
// reaching past the window's right edge — or "" when everything fits.
func (l Layout) Overflows() string {
	var out []string
	if l.ScrollWidth > l.WindowWidth {
		out = append(out, fmt.Sprintf("the page is %d px wide in a window of %d px: it scrolls sideways", l.ScrollWidth, l.WindowWidth))
	}
	var wrapped, past []CommandLayout
	for _, c := range l.Commands {
		if c.Lines != 1 {
			wrapped = append(wrapped, c)
		}
		if c.Right > float64(l.WindowWidth)+0.5 {
			past = append(past, c)
		}
	}
	if len(wrapped) > 0 {
		out = append(out, fmt.Sprintf("%d of %d commands wrap, the first on %d lines: %q", len(wrapped), len(l.Commands), wrapped[0].Lines, wrapped[0].Text))
	}
	if len(past) > 0 {
		out = append(out, fmt.Sprintf("%d of %d commands reach past the window's %d px, the first to %.0f px: %q", len(past), len(l.Commands), l.WindowWidth, past[0].Right, past[0].Text))
	}
	return strings.Join(out, "\n")
}

// measureScript measures the page once it has loaded, then writes the
// measurements (JSON) into an element of its own at the end of the body,
// which --dump-dom prints.
const measureScript = `<script>
window.addEventListener("load", function () {
  var commands = [];
  document.querySelectorAll("code,pre,kbd,samp").forEach(function (e) {
    if (!/^overnight\s/.test(e.textContent.trim()) || e.querySelector("code,pre,kbd,samp")) return;
    var range = document.createRange();
    range.selectNodeContents(e);
    var tops = [];
    Array.prototype.forEach.call(range.getClientRects(), function (r) {
      if (r.width < 1) return;
      if (!tops.some(function (t) { return Math.abs(t - r.top) < r.height / 2; })) tops.push(r.top);
    });
    commands.push({text: e.textContent.trim(), lines: tops.length, right: e.getBoundingClientRect().right + window.scrollX});
  });
  var out = {window_width: window.innerWidth, scroll_width: document.scrollingElement.scrollWidth, commands: commands};
  var pre = document.createElement("pre");
  pre.id = "overnight-layout";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>`

var measured = regexp.MustCompile(`(?s)<pre id="overnight-layout">(.*?)</pre>`)

// MeasureLayout lays page (a whole HTML document) out in browser, headless,
// in a window width CSS pixels wide, and measures it (see Layout): a copy
// of the page with a small script added before </body> is opened from dir.
func MeasureLayout(ctx context.Context, tb TB, browser, dir string, page []byte, width int) Layout {
	tb.Helper()
	i := bytes.LastIndex(page, []byte("</body>"))
	if i < 0 {
		tb.Fatalf("the page has no </body> to put the measuring script before")
		return Layout{}
	}
	withScript := append(append(append([]byte{}, page[:i]...), measureScript...), page[i:]...)
	file, err := os.CreateTemp(dir, "page-*.html")
	if err != nil {
		tb.Fatalf("write the page to measure: %v", err)
		return Layout{}
	}
	_, err = file.Write(withScript)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		tb.Fatalf("write the page to measure: %v", err)
		return Layout{}
	}
	dom := Headless(ctx, tb, browser, dir, fmt.Sprintf("--window-size=%d,1000", width), "--dump-dom", "file://"+file.Name())
	m := measured.FindStringSubmatch(dom)
	if m == nil {
		tb.Fatalf("the measuring script wrote nothing into the page (did it run?); the DOM starts: %.500s", dom)
		return Layout{}
	}
	var l Layout
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &l); err != nil {
		tb.Fatalf("the measurements do not decode: %v: %s", err, m[1])
	}
	return l
}
