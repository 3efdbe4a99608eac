// Package sandboxtest is the conformance kit of the sandbox contract: one
// call a backend's author runs against their backend, a line per rule of
// the contract, as database/sql's driver tests and testing/fstest do for
// theirs. The Docker backend passes it in `make test`.
//
//	results := sandboxtest.Check(ctx, sandboxtest.Config{Type: mybackend.Type, InitBinary: bin})
//	for _, r := range results { fmt.Println(r) }
//
// or, in a test, sandboxtest.Test(t, cfg). Every sandbox the kit starts
// runs the overnight binary's hidden `probe` subcommand (package probe) to
// report from inside what the backend made of it. The kit opens the
// backend on temporary state dirs of its own and removes everything it
// made, whatever failed.
package sandboxtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/sandbox"
)

// Config is what the kit runs against.
type Config struct {
	// Type is the backend's type, opened on the kit's own state dirs. Its
	// declared capabilities are the ones checked, and a sandbox must not
	// implement one it does not declare.
	Type sandbox.Type
	// InitBinary is a static linux/amd64 overnight binary: every sandbox's
	// init, and the probes it runs.
	InitBinary string
	// Timeout bounds the whole check. Default 5 minutes.
	Timeout time.Duration
}

// Result is one rule's outcome.
type Result struct {
	Rule    string `json:"rule"`
	Passed  bool   `json:"passed"`
	Skipped bool   `json:"skipped,omitempty"` // the backend does not declare the capability the rule is about
	Detail  string `json:"detail"`
}

// String is the result's line: PASS, FAIL or SKIP, the rule, what was
// seen.
func (r Result) String() string {
	word := "FAIL"
	switch {
	case r.Skipped:
		word = "SKIP"
	case r.Passed:
		word = "PASS"
	}
	return fmt.Sprintf("%s  %-14s %s", word, r.Rule, r.Detail)
}

// Failed is the results that failed.
func Failed(results []Result) []Result {
	var out []Result
	for _, r := range results {
		if !r.Passed && !r.Skipped {
			out = append(out, r)
		}
	}
	return out
}

// Test runs the kit as subtests of t, one per rule.
func Test(t *testing.T, cfg Config) {
	t.Helper()
	for _, r := range Check(context.Background(), cfg) {
		t.Run(r.Rule, func(t *testing.T) {
			switch {
			case r.Skipped:
				t.Skip(r.Detail)
			case !r.Passed:
				t.Error(r.Detail)
			default:
				t.Log(r.Detail)
			}
		})
	}
}

// rule is one check of the contract; it returns what it saw, or why it
// failed.
type rule struct {
	name string
	need sandbox.Capability // "" : every backend
	run  func(k *kit, ctx context.Context) (string, error)
}

var rules = []rule{
	{"type", "", (*kit).typeRule},
	{"prepare", "", (*kit).prepareRule},
	{"exit-and-logs", "", (*kit).exitRule},
	{"environment", "", (*kit).envRule},
	{"user", "", (*kit).userRule},
	{"filesystem", "", (*kit).fsRule},
	{"no-network", "", (*kit).noNetworkRule},
	{"gateway", "", (*kit).gatewayRule},
	{"workspace", "", (*kit).workspaceRule},
	{"signal", "", (*kit).signalRule},
	{"name-in-use", "", (*kit).nameInUseRule},
	{"remove", "", (*kit).removeRule},
	{"reap", "", (*kit).reapRule},
	{"freeze", sandbox.CapFreeze, (*kit).freezeRule},
	{"link", sandbox.CapLink, (*kit).linkRule},
	{"exec", sandbox.CapExec, (*kit).execRule},
	{"services", sandbox.CapServices, (*kit).servicesRule},
	{"copy-out", sandbox.CapCopyOut, (*kit).copyOutRule},
	{"standby", sandbox.CapStandby, (*kit).standbyRule},
}

// Rules lists the rules' names, in the order Check runs them.
func Rules() []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.name
	}
	return out
}

// kit is one Check under way: the backend on a state dir of its own.
type kit struct {
	cfg   Config
	b     sandbox.Backend
	state string
	image sandbox.Image // the init binary's own
	seq   int
	runs  []string // runs whose leftovers go at the end
}

// Check runs every rule against cfg's backend and returns a result per
// rule. A backend that cannot even be opened fails every rule with that.
func Check(ctx context.Context, cfg Config) []Result {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	results := make([]Result, 0, len(rules))
	all := func(why string) []Result {
		for _, r := range rules {
			results = append(results, Result{Rule: r.name, Detail: why})
		}
		return results
	}
	if cfg.Type.Open == nil || cfg.InitBinary == "" {
		return all("the kit needs Config.Type (with Open) and Config.InitBinary")
	}
	state, err := os.MkdirTemp("", "sandboxtest-")
	if err != nil {
		return all("make a state dir: " + err.Error())
	}
	defer os.RemoveAll(state)
	b, err := cfg.Type.Open(ctx, sandbox.Config{StateDir: state, InitBinary: cfg.InitBinary})
	if err != nil {
		return all("open the backend: " + err.Error())
	}
	k := &kit{cfg: cfg, b: b, state: state}
	defer k.cleanup()
	if k.image, err = b.Prepare(ctx, sandbox.Agent{Builtin: "probe"}); err != nil {
		return all("prepare the init's image: " + err.Error())
	}
	for _, r := range rules {
		if r.need != "" && !cfg.Type.Has(r.need) {
			results = append(results, Result{Rule: r.name, Skipped: true, Detail: fmt.Sprintf("the %s backend does not declare %s", cfg.Type.Name, r.need)})
			continue
		}
		detail, err := r.run(k, ctx)
		if err != nil {
			results = append(results, Result{Rule: r.name, Detail: err.Error()})
			continue
		}
		results = append(results, Result{Rule: r.name, Passed: true, Detail: detail})
	}
	return results
}

// cleanup removes everything the kit's runs left.
func (k *kit) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, _ = k.b.Reap(ctx, nil)
	for _, run := range k.runs {
		_ = k.b.Release(ctx, run)
	}
	_ = k.b.Close(ctx)
}

// run is a new run id of the kit's.
func (k *kit) run() string {
	k.seq++
	id := fmt.Sprintf("kit-%d-%d", time.Now().UnixNano()%1_000_000_000, k.seq)
	k.runs = append(k.runs, id)
	return id
}

// spec is a sandbox of run running the probe mode.
func (k *kit) spec(run string, attempt int, probe ...string) sandbox.Spec {
	img := k.image
	img.Cmd = append([]string{sandbox.InitPath, "probe"}, probe...)
	return sandbox.Spec{RunID: run, Attempt: attempt, Image: img, Env: map[string]string{"HOME": sandbox.WorkspacePath}}
}

// sleeper starts a sandbox of run (a new one when run is "") that sleeps
// 30 s, for a rule to act on; the caller removes it.
func (k *kit) sleeper(ctx context.Context, run string, network bool) (sandbox.Sandbox, error) {
	if run == "" {
		run = k.run()
	}
	spec := k.spec(run, 1, "sleep", "30s")
	spec.Network = network
	sb, err := k.b.Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	return sb, nil
}

// finish waits for sb to exit and returns its exit code and output, and
// removes it.
func finish(ctx context.Context, sb sandbox.Sandbox) (int, string, string, error) {
	defer sb.Remove(context.WithoutCancel(ctx))
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	code, err := sb.Wait(wctx)
	if err != nil {
		return code, "", "", fmt.Errorf("wait: %w", err)
	}
	out, errOut, err := sb.Logs(ctx)
	if err != nil {
		return code, "", "", fmt.Errorf("logs: %w", err)
	}
	return code, string(out), string(errOut), nil
}

// probe runs one probe in a new sandbox of a new run and returns its
// stdout, failing on a non-zero exit.
func (k *kit) probe(ctx context.Context, spec sandbox.Spec) (string, error) {
	sb, err := k.b.Start(ctx, spec)
	if err != nil {
		return "", fmt.Errorf("start: %w", err)
	}
	code, out, errOut, err := finish(ctx, sb)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", fmt.Errorf("probe %q exited %d: %s", spec.Image.Cmd[2:], code, strings.TrimSpace(errOut))
	}
	return strings.TrimSpace(out), nil
}

func (k *kit) typeRule(ctx context.Context) (string, error) {
	t := k.b.Type()
	if t.Name == "" || t.Name != k.cfg.Type.Name {
		return "", fmt.Errorf("the backend says its type is %q, the kit was given %q", t.Name, k.cfg.Type.Name)
	}
	for _, c := range t.Capabilities {
		if !slices.Contains(sandbox.Capabilities(), c) {
			return "", fmt.Errorf("unknown capability %q declared", c)
		}
	}
	sb, err := k.sleeper(ctx, "", false)
	if err != nil {
		return "", err
	}
	defer sb.Remove(context.WithoutCancel(ctx))
	if sb.ID() == "" {
		return "", errors.New("a started sandbox has no ID")
	}
	var lies []string
	check := func(c sandbox.Capability, has bool) {
		if has != t.Has(c) {
			lies = append(lies, fmt.Sprintf("%s: declared %v, implemented %v", c, t.Has(c), has))
		}
	}
	_, freezer := sb.(sandbox.Freezer)
	_, cutter := sb.(sandbox.LinkCutter)
	_, execer := sb.(sandbox.Execer)
	_, services := k.b.(sandbox.Services)
	_, copier := sb.(sandbox.Copier)
	_, standbys := k.b.(sandbox.Standbys)
	check(sandbox.CapFreeze, freezer)
	check(sandbox.CapLink, cutter)
	check(sandbox.CapExec, execer)
	check(sandbox.CapServices, services)
	check(sandbox.CapCopyOut, copier)
	check(sandbox.CapStandby, standbys)
	if len(lies) > 0 {
		return "", fmt.Errorf("the type's capabilities differ from what its sandboxes implement: %s", strings.Join(lies, "; "))
	}
	return fmt.Sprintf("%s, capabilities %v, as its sandboxes implement", t.Name, t.Capabilities), nil
}

func (k *kit) prepareRule(ctx context.Context) (string, error) {
	again, err := k.b.Prepare(ctx, sandbox.Agent{Builtin: "probe"})
	if err != nil {
		return "", err
	}
	if again.Ref != k.image.Ref {
		return "", fmt.Errorf("preparing the same agent twice gave %q, then %q", k.image.Ref, again.Ref)
	}
	if _, err := k.b.Prepare(ctx, sandbox.Agent{}); !errors.Is(err, sandbox.ErrInvalidSpec) {
		return "", fmt.Errorf("an agent with nothing to run: want ErrInvalidSpec, got %v", err)
	}
	if _, err := k.b.Prepare(ctx, sandbox.Agent{Image: "overnight-sandboxtest-no-such-image:1"}); !errors.Is(err, sandbox.ErrImageNotFound) {
		return "", fmt.Errorf("an agent image that is not there: want ErrImageNotFound, got %v", err)
	}
	return "the same agent prepares to the same image; nothing to run is ErrInvalidSpec; a missing image ErrImageNotFound", nil
}

func (k *kit) exitRule(ctx context.Context) (string, error) {
	sb, err := k.b.Start(ctx, k.spec(k.run(), 1, "exit", "3", "to stdout", "to stderr"))
	if err != nil {
		return "", err
	}
	code, out, errOut, err := finish(ctx, sb)
	switch {
	case err != nil:
		return "", err
	case code != 3:
		return "", fmt.Errorf("exit code %d, want 3", code)
	case out != "to stdout\n" || errOut != "to stderr\n":
		return "", fmt.Errorf("logs stdout %q, stderr %q; want them apart", out, errOut)
	}
	return "Wait gave the exit code (3); Logs kept stdout and stderr apart", nil
}

func (k *kit) envRule(ctx context.Context) (string, error) {
	const host = "SANDBOXTEST_HOST_ONLY"
	os.Setenv(host, "must-not-leak")
	defer os.Unsetenv(host)
	spec := k.spec(k.run(), 1, "env")
	spec.Env["KIT_VAR"] = "a value with spaces"
	out, err := k.probe(ctx, spec)
	if err != nil {
		return "", err
	}
	if !strings.Contains(out, "KIT_VAR=a value with spaces") {
		return "", fmt.Errorf("the spec's variable is missing from the sandbox's environment:\n%s", out)
	}
	if strings.Contains(out, host) {
		return "", errors.New("the host's environment leaked into the sandbox")
	}
	return "the spec's environment, nothing of the host's", nil
}

func (k *kit) userRule(ctx context.Context) (string, error) {
	out, err := k.probe(ctx, k.spec(k.run(), 1, "whoami"))
	if err != nil {
		return "", err
	}
	if out != sandbox.DefaultUser {
		return "", fmt.Errorf("runs as %s, want %s", out, sandbox.DefaultUser)
	}
	return "runs as " + out + " (not root)", nil
}

func (k *kit) fsRule(ctx context.Context) (string, error) {
	for _, ws := range []bool{false, true} {
		spec := k.spec(k.run(), 1, "fs")
		spec.Workspace = ws
		out, err := k.probe(ctx, spec)
		if err != nil {
			return "", err
		}
		if out != "/=ro /tmp=rw /workspace=rw" {
			return "", fmt.Errorf("with Workspace %v: %s; want the root read-only, /tmp and /workspace writable", ws, out)
		}
	}
	return "the root is read-only; /tmp and /workspace are writable (scratch and kept)", nil
}

// hostAddr is a non-loopback address of this machine, where the kit
// listens: a sandbox without a network must not reach it.
func hostAddr() (net.Listener, string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, "", err
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.To4() == nil {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ipn.IP.String(), "0"))
		if err != nil {
			continue
		}
		return ln, ln.Addr().String(), nil
	}
	return nil, "", errors.New("this machine has no non-loopback IPv4 address to listen on")
}

func (k *kit) noNetworkRule(ctx context.Context) (string, error) {
	ln, addr, err := hostAddr()
	if err != nil {
		return "", err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err != nil {
		return "", fmt.Errorf("the kit cannot reach its own listener at %s: %w", addr, err)
	} else {
		c.Close()
	}
	out, err := k.probe(ctx, k.spec(k.run(), 1, "dial", addr))
	if err != nil {
		return "", err
	}
	if out != "unreachable" {
		return "", fmt.Errorf("a sandbox without a network reached the host at %s", addr)
	}
	return "the host (" + addr + ") is unreachable from a sandbox without a network", nil
}

func (k *kit) gatewayRule(ctx context.Context) (string, error) {
	dir, cleanup, err := sandbox.NewSocketDir()
	if err != nil {
		return "", err
	}
	defer cleanup()
	ln, err := sandbox.ListenSocket(filepath.Join(dir, sandbox.SocketName))
	if err != nil {
		return "", err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if line, err := bufio.NewReader(c).ReadString('\n'); err == nil && line == "ping\n" {
					fmt.Fprintln(c, "pong")
				}
			}()
		}
	}()
	spec := k.spec(k.run(), 1, "gateway", sandbox.GatewaySocket)
	spec.SocketDir = dir
	out, err := k.probe(ctx, spec)
	if err != nil {
		return "", err
	}
	if out != "pong" {
		return "", fmt.Errorf("the gateway socket answered %q", out)
	}
	return "the gateway's socket dir is reachable at " + sandbox.GatewayDir + " by the sandbox's user", nil
}

func (k *kit) workspaceRule(ctx context.Context) (string, error) {
	run := k.run()
	const file = sandbox.WorkspacePath + "/kept.txt"
	spec := k.spec(run, 1, "write", file, "kept")
	spec.Workspace = true
	if _, err := k.probe(ctx, spec); err != nil {
		return "", err
	}
	spec = k.spec(run, 2, "cat", file)
	spec.Workspace = true
	out, err := k.probe(ctx, spec)
	if err != nil {
		return "", fmt.Errorf("attempt 2 does not find what attempt 1 wrote: %w", err)
	}
	if out != "kept" {
		return "", fmt.Errorf("attempt 2 read %q", out)
	}
	if err := k.b.Release(ctx, run); err != nil {
		return "", fmt.Errorf("release: %w", err)
	}
	if err := k.b.Release(ctx, run); err != nil {
		return "", fmt.Errorf("release twice: %w", err)
	}
	spec = k.spec(run, 3, "cat", file)
	spec.Workspace = true
	if out, err := k.probe(ctx, spec); err == nil {
		return "", fmt.Errorf("after Release, attempt 3 still read %q", out)
	}
	return "kept across a run's attempts; gone after Release (twice is fine)", nil
}

func (k *kit) signalRule(ctx context.Context) (string, error) {
	sb, err := k.b.Start(ctx, k.spec(k.run(), 1, "wait-signal"))
	if err != nil {
		return "", err
	}
	if err := waitFor(ctx, sb, "waiting"); err != nil {
		sb.Remove(ctx)
		return "", err
	}
	if err := sb.Signal(ctx, "SIGTERM"); err != nil {
		sb.Remove(ctx)
		return "", fmt.Errorf("SIGTERM: %w", err)
	}
	code, out, _, err := finish(ctx, sb)
	if err != nil {
		return "", err
	}
	if code != 0 || !strings.Contains(out, "got terminated") {
		return "", fmt.Errorf("after SIGTERM the agent exited %d saying %q: the init must forward it", code, out)
	}
	sb, err = k.b.Start(ctx, k.spec(k.run(), 1, "sleep", "60s"))
	if err != nil {
		return "", err
	}
	if err := sb.Signal(ctx, "SIGKILL"); err != nil {
		sb.Remove(ctx)
		return "", fmt.Errorf("SIGKILL: %w", err)
	}
	if code, _, _, err = finish(ctx, sb); err != nil {
		return "", err
	}
	if code != 137 {
		return "", fmt.Errorf("after SIGKILL Wait gave %d, want 137", code)
	}
	if err := sb.Signal(ctx, "SIGTERM"); !errors.Is(err, sandbox.ErrNotRunning) && !errors.Is(err, sandbox.ErrNotFound) {
		return "", fmt.Errorf("a signal to a removed sandbox: want ErrNotRunning or ErrNotFound, got %v", err)
	}
	return "SIGTERM reaches the agent through the init; SIGKILL ends it with 137", nil
}

// waitFor waits until sb's stdout holds want (bounded).
func waitFor(ctx context.Context, sb sandbox.Sandbox, want string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out, _, err := sb.Logs(ctx)
		if err == nil && strings.Contains(string(out), want) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the probe never said %q", want)
}

func (k *kit) copyOutRule(ctx context.Context) (string, error) {
	const (
		ws   = sandbox.WorkspacePath
		file = ws + "/report.md"
	)
	run := k.run()
	// The workspace outlives each attempt: one writes the file, the next
	// ones add a directory and links beside it.
	steps := [][]string{
		{"write", file, "# the report\n"},
		{"write", ws + "/dir/inner.md", "inner"},
		{"link", "report.md", ws + "/inside.md"},
		{"link", sandbox.InitPath, ws + "/outside"},
	}
	var sb sandbox.Sandbox
	for i, step := range steps {
		spec := k.spec(run, i+1, step...)
		spec.Workspace = true
		if i < len(steps)-1 {
			if _, err := k.probe(ctx, spec); err != nil {
				return "", err
			}
			continue
		}
		var err error
		if sb, err = k.b.Start(ctx, spec); err != nil {
			return "", err
		}
	}
	defer sb.Remove(context.WithoutCancel(ctx))
	if _, err := sb.Wait(ctx); err != nil {
		return "", err
	}
	c, ok := sb.(sandbox.Copier)
	if !ok {
		return "", errors.New("the type declares copy-out, and its sandbox is no sandbox.Copier")
	}
	for _, path := range []string{file, ws + "/inside.md"} {
		got, err := c.CopyOut(ctx, path, 1<<20)
		if err != nil {
			return "", fmt.Errorf("copy %s out of an exited sandbox: %w", path, err)
		}
		if string(got) != "# the report\n" {
			return "", fmt.Errorf("copied %q out of %s", got, path)
		}
	}
	refusals := []struct {
		path string
		max  int64
		want error
		what string
	}{
		{file, 4, sandbox.ErrTooLarge, "a file over the limit"},
		{ws + "/none.md", 1 << 20, sandbox.ErrNotFound, "a missing file"},
		{ws + "/dir", 1 << 20, sandbox.ErrNotRegular, "a directory"},
		{ws + "/outside", 1 << 20, sandbox.ErrNotRegular, "a symbolic link out of the workspace"},
		{"report.md", 1 << 20, sandbox.ErrInvalidSpec, "a relative path"},
	}
	for _, r := range refusals {
		if _, err := c.CopyOut(ctx, r.path, r.max); !errors.Is(err, r.want) {
			return "", fmt.Errorf("%s (%s): want %v, got %v", r.what, r.path, r.want, err)
		}
	}
	return "a file the agent wrote, or a link to it in the workspace, is copied out of the exited sandbox; over the limit ErrTooLarge, missing ErrNotFound, a directory or a link out of the workspace ErrNotRegular", nil
}

func (k *kit) nameInUseRule(ctx context.Context) (string, error) {
	spec := k.spec(k.run(), 1, "sleep", "30s")
	sb, err := k.b.Start(ctx, spec)
	if err != nil {
		return "", err
	}
	defer sb.Remove(context.WithoutCancel(ctx))
	again, err := k.b.Start(ctx, spec)
	if err == nil {
		again.Remove(ctx)
		return "", errors.New("a second sandbox of the same run and attempt started")
	}
	if !errors.Is(err, sandbox.ErrNameInUse) {
		return "", fmt.Errorf("a second sandbox of the same run and attempt: want ErrNameInUse, got %v", err)
	}
	return "a second sandbox of one run and attempt is refused (ErrNameInUse)", nil
}

func (k *kit) listed(ctx context.Context, b sandbox.Backend, id string) (bool, error) {
	left, err := b.List(ctx)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(left, func(l sandbox.Leftover) bool { return l.ID == id }), nil
}

func (k *kit) removeRule(ctx context.Context) (string, error) {
	run := k.run()
	sb, err := k.sleeper(ctx, run, false)
	if err != nil {
		return "", err
	}
	left, err := k.b.List(ctx)
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(left, func(l sandbox.Leftover) bool { return l.ID == sb.ID() })
	if i < 0 || left[i].RunID != run || left[i].Attempt != 1 {
		return "", fmt.Errorf("the backend's List does not show the running sandbox with its run and attempt: %+v", left)
	}
	if err := sb.Remove(ctx); err != nil {
		return "", fmt.Errorf("remove a running sandbox: %w", err)
	}
	if err := sb.Remove(ctx); err != nil {
		return "", fmt.Errorf("remove it twice: %w", err)
	}
	if there, err := k.listed(ctx, k.b, sb.ID()); err != nil || there {
		return "", fmt.Errorf("still listed after Remove (%v)", err)
	}
	return "a running sandbox is removed (twice is fine), and listed no more", nil
}

func (k *kit) reapRule(ctx context.Context) (string, error) {
	dead, live := k.run(), k.run()
	d, err := k.sleeper(ctx, dead, false)
	if err != nil {
		return "", err
	}
	defer d.Remove(context.WithoutCancel(ctx))
	l, err := k.sleeper(ctx, live, false)
	if err != nil {
		return "", err
	}
	defer l.Remove(context.WithoutCancel(ctx))
	// Another state dir's backend sees none of it, and reaps none of it.
	otherDir, err := os.MkdirTemp("", "sandboxtest-other-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(otherDir)
	other, err := k.cfg.Type.Open(ctx, sandbox.Config{StateDir: otherDir, InitBinary: k.cfg.InitBinary})
	if err != nil {
		return "", err
	}
	defer other.Close(ctx)
	if there, err := k.listed(ctx, other, d.ID()); err != nil || there {
		return "", fmt.Errorf("another state dir's backend lists this one's sandbox (%v)", err)
	}
	if _, err := other.Reap(ctx, nil); err != nil {
		return "", fmt.Errorf("another state dir's reap: %w", err)
	}
	if there, err := k.listed(ctx, k.b, d.ID()); err != nil || !there {
		return "", fmt.Errorf("another state dir's reap removed this one's sandbox (%v)", err)
	}
	removed, err := k.b.Reap(ctx, func(run string) bool { return run == live })
	if err != nil {
		return "", err
	}
	if !slices.Contains(removed, d.ID()) || slices.Contains(removed, l.ID()) {
		return "", fmt.Errorf("the backend's Reap removed %v: want the dead run's %s, not the live run's %s", removed, d.ID(), l.ID())
	}
	if there, err := k.listed(ctx, k.b, l.ID()); err != nil || !there {
		return "", fmt.Errorf("the live run's sandbox is gone (%v)", err)
	}
	return "Reap removes the dead run's sandbox, spares the live one's, and never touches another state dir's", nil
}

func (k *kit) freezeRule(ctx context.Context) (string, error) {
	sb, err := k.b.Start(ctx, k.spec(k.run(), 1, "ticker"))
	if err != nil {
		return "", err
	}
	defer sb.Remove(context.WithoutCancel(ctx))
	f, ok := sb.(sandbox.Freezer)
	if !ok {
		return "", errors.New("declared freeze, but its sandbox is no sandbox.Freezer")
	}
	if err := waitFor(ctx, sb, "\n3\n"); err != nil {
		return "", err
	}
	if err := f.Freeze(ctx); err != nil {
		return "", fmt.Errorf("freeze: %w", err)
	}
	lines := func() int {
		out, _, _ := sb.Logs(ctx)
		return strings.Count(string(out), "\n")
	}
	time.Sleep(100 * time.Millisecond) // a line under way lands
	before := lines()
	time.Sleep(400 * time.Millisecond)
	if after := lines(); after != before {
		return "", fmt.Errorf("a frozen sandbox went on: %d lines, then %d", before, after)
	}
	if err := f.Thaw(ctx); err != nil {
		return "", fmt.Errorf("thaw: %w", err)
	}
	if err := f.Thaw(ctx); err != nil {
		return "", fmt.Errorf("thaw a sandbox that is not frozen: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for lines() <= before {
		if time.Now().After(deadline) {
			return "", errors.New("a thawed sandbox did not go on")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "a frozen sandbox makes no progress; thawed, it goes on (a second thaw is fine)", nil
}

func (k *kit) linkRule(ctx context.Context) (string, error) {
	alone, err := k.sleeper(ctx, "", false)
	if err != nil {
		return "", err
	}
	defer alone.Remove(context.WithoutCancel(ctx))
	lone, ok := alone.(sandbox.LinkCutter)
	if !ok {
		return "", errors.New("declared link, but its sandbox is no sandbox.LinkCutter")
	}
	if err := lone.CutLink(ctx); !errors.Is(err, sandbox.ErrUnsupported) {
		return "", fmt.Errorf("cutting a sandbox on no network: want ErrUnsupported, got %v", err)
	}
	sb, err := k.sleeper(ctx, "", true)
	if err != nil {
		return "", err
	}
	defer sb.Remove(context.WithoutCancel(ctx))
	lc := sb.(sandbox.LinkCutter) // as its sibling, checked above
	up := func(want bool, when string) error {
		got, err := lc.Linked(ctx)
		if err != nil {
			return fmt.Errorf("linked %s: %w", when, err)
		}
		if got != want {
			return fmt.Errorf("linked %s: %v, want %v", when, got, want)
		}
		return nil
	}
	if err := up(true, "at start"); err != nil {
		return "", err
	}
	if err := lc.CutLink(ctx); err != nil {
		return "", fmt.Errorf("cut: %w", err)
	}
	if err := up(false, "after the cut"); err != nil {
		return "", err
	}
	if err := lc.RestoreLink(ctx); err != nil {
		return "", fmt.Errorf("restore: %w", err)
	}
	if err := up(true, "restored"); err != nil {
		return "", err
	}
	return "a sandbox on its run's network is cut and linked again; one on no network is ErrUnsupported", nil
}

func (k *kit) execRule(ctx context.Context) (string, error) {
	sb, err := k.sleeper(ctx, "", false)
	if err != nil {
		return "", err
	}
	defer sb.Remove(context.WithoutCancel(ctx))
	ex, ok := sb.(sandbox.Execer)
	if !ok {
		return "", errors.New("declared exec, but its sandbox is no sandbox.Execer")
	}
	res, err := ex.Exec(ctx, []string{sandbox.InitPath, "probe", "exit", "4", "out", "err"})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 4 || strings.TrimSpace(string(res.Stdout)) != "out" || strings.TrimSpace(string(res.Stderr)) != "err" {
		return "", fmt.Errorf("exec gave code %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	who, err := ex.Exec(ctx, []string{sandbox.InitPath, "probe", "whoami"})
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(string(who.Stdout)) != sandbox.DefaultUser {
		return "", fmt.Errorf("exec runs as %q, want the sandbox's user %s", who.Stdout, sandbox.DefaultUser)
	}
	return "a command exec'd in a running sandbox runs as its user; its output and exit code come back", nil
}

var okBody = regexp.MustCompile(`^ok\s*$`)

func (k *kit) servicesRule(ctx context.Context) (string, error) {
	run := k.run()
	services, ok := k.b.(sandbox.Services)
	if !ok {
		return "", errors.New("declared services, but the backend is no sandbox.Services")
	}
	svc, err := services.StartService(ctx, sandbox.ServiceSpec{RunID: run, Name: "kit", Image: k.image.Ref,
		Cmd: []string{sandbox.InitPath, "probe", "serve", ":8080"}, Port: 8080})
	if err != nil {
		return "", err
	}
	defer svc.Remove(context.WithoutCancel(ctx))
	url := "http://" + svc.Addr() + "/"
	var body string
	deadline := time.Now().Add(30 * time.Second)
	for {
		body, err = get(ctx, url)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || !okBody.MatchString(body) {
		return "", fmt.Errorf("the harness cannot reach the service at %s: %v %q", url, err, body)
	}
	out, err := k.probe(ctx, k.spec(k.run(), 1, "dial", svc.Addr()))
	if err != nil {
		return "", err
	}
	if out != "unreachable" {
		return "", fmt.Errorf("a sandbox reached the service at %s", svc.Addr())
	}
	if err := k.b.Release(ctx, run); err != nil {
		return "", fmt.Errorf("release the service's run: %w", err)
	}
	if there, err := k.listed(ctx, k.b, svc.ID()); err != nil || there {
		return "", fmt.Errorf("the service outlived its run's Release (%v)", err)
	}
	return "a service answers the harness at " + svc.Addr() + ", not a sandbox, and goes with its run's Release", nil
}

func get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, err = bufio.NewReader(resp.Body).WriteTo(&b)
	return b.String(), err
}

// standbyRule: a standby's agent does not start before its handover, and
// then sees exactly what the same attempt started cold sees (the probe's
// self: environment, user, working directory, mounts, limits).
func (k *kit) standbyRule(ctx context.Context) (string, error) {
	st, ok := k.b.(sandbox.Standbys)
	if !ok {
		return "", errors.New("the backend declares standby and does not implement sandbox.Standbys")
	}
	dir, cleanup, err := sandbox.NewSocketDir()
	if err != nil {
		return "", err
	}
	defer cleanup()
	limits := sandbox.Limits{MemoryBytes: 200 << 20, PIDs: 100, NanoCPUs: 500_000_000, TmpBytes: 32 << 20}
	perAttempt := map[string]string{"OVERNIGHT_TOKEN": "kit-token", "OVERNIGHT_ATTEMPT": "2", "KIT_SHARED": "the attempt's value"}
	spec := func(run string) sandbox.Spec {
		s := k.spec(run, 2, "self")
		s.SocketDir, s.Workspace, s.Limits = dir, true, limits
		s.Env["KIT_SHARED"] = "the run's value"
		return s
	}
	cold := spec(k.run())
	for key, v := range perAttempt {
		cold.Env[key] = v
	}
	want, err := k.probe(ctx, cold)
	if err != nil {
		return "", fmt.Errorf("cold start: %w", err)
	}

	run := k.run()
	sb, err := st.StartStandby(ctx, spec(run))
	if err != nil {
		return "", fmt.Errorf("start a standby: %w", err)
	}
	defer sb.Remove(context.WithoutCancel(ctx))
	left, err := k.b.List(ctx)
	if err != nil {
		return "", err
	}
	if i := slices.IndexFunc(left, func(l sandbox.Leftover) bool { return l.ID == sb.ID() }); i < 0 || left[i].RunID != run || left[i].Attempt != 2 {
		return "", fmt.Errorf("the backend's List does not show the standby with its run and attempt: %+v", left)
	}
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	code, werr := sb.Wait(wctx)
	cancel()
	if werr == nil {
		return "", fmt.Errorf("the standby exited (%d) before its handover", code)
	}
	if out, _, err := sb.Logs(ctx); err != nil || len(out) > 0 {
		return "", fmt.Errorf("the standby's agent ran before its handover (stdout %q, %v)", out, err)
	}
	if err := sb.TakeOver(ctx, sandbox.Handover{Attempt: 3, Env: perAttempt}); !errors.Is(err, sandbox.ErrInvalidSpec) {
		return "", fmt.Errorf("a handover for another attempt: want ErrInvalidSpec, got %v", err)
	}
	if err := sb.TakeOver(ctx, sandbox.Handover{Attempt: 2, Env: perAttempt}); err != nil {
		return "", fmt.Errorf("take over: %w", err)
	}
	code, got, errOut, err := finish(ctx, sb)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", fmt.Errorf("the standby's probe exited %d: %s", code, strings.TrimSpace(errOut))
	}
	if got = strings.TrimSpace(got); got != want {
		return "", fmt.Errorf("a standby taken over differs from a cold start:\n%s", lineDiff(want, got))
	}
	if err := k.b.Release(ctx, run); err != nil {
		return "", err
	}
	return "a standby's agent waits for its handover, then sees what a cold start sees (environment, user, cwd, mounts, limits)", nil
}

// lineDiff lists the lines only in a (-) and only in b (+).
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
