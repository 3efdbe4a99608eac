package worldtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// The environment a command world is started with, as the harness starts
// one (docs/world-protocol.md, "Command worlds").
const (
	// EnvWorldAddr is the HOST:PORT the world must listen on.
	EnvWorldAddr = "OVERNIGHT_WORLD_ADDR"
	// EnvWorldData is the directory of the world's durable state.
	EnvWorldData = "OVERNIGHT_WORLD_DATA"
)

// CheckCommand starts the world command (argv, e.g. {"python3",
// "inventory.py"}) as the harness starts a command world — with
// OVERNIGHT_WORLD_ADDR, a free loopback port, and OVERNIGHT_WORLD_DATA,
// Options.Data or a temporary directory, set, and $OVERNIGHT_WORLD_ADDR
// and $OVERNIGHT_WORLD_DATA in argv replaced by them — waits until it
// answers describe, runs every rule against it, crash-reconciled included
// (which SIGKILLs it and starts it again on the same data), and stops it
// (SIGTERM to its process group, SIGKILL after 5 s). A command that exits
// or does not answer describe within Options.StartTimeout makes a report
// whose Err wraps ErrNoAnswer, with the end of its output.
func CheckCommand(ctx context.Context, argv []string, opts Options) Report {
	opts = opts.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	k := newKit("", opts)
	k.command = argv
	fail := func(err error) Report {
		r := Report{Command: argv, Err: err, Error: err.Error()}
		for _, x := range rules {
			r.Results = append(r.Results, Result{Rule: x.name, Verdict: Skip, Evidence: "not run: " + err.Error()})
		}
		return r
	}
	if len(argv) == 0 || argv[0] == "" {
		return fail(fmt.Errorf("%w: no command to start", ErrNoAnswer))
	}
	data := opts.Data
	if data == "" {
		dir, err := os.MkdirTemp("", "worldtest-")
		if err != nil {
			return fail(fmt.Errorf("%w: make the world's data directory: %v", ErrNoAnswer, err))
		}
		defer os.RemoveAll(dir)
		data = dir
	} else if !opts.AllowWrites {
		if files, err := os.ReadDir(data); err == nil && len(files) > 0 {
			return fail(fmt.Errorf("%w: the data directory %s holds files already: the kit would write to that world (keys under worldtest/%s/); give an empty or new directory, or --allow-writes (Options.AllowWrites)",
				ErrWritesRefused, data, k.nonce))
		}
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		return fail(fmt.Errorf("%w: make the world's data directory: %v", ErrNoAnswer, err))
	}
	k.data, k.own = data, true
	p, err := k.start(ctx)
	if err != nil {
		return fail(err)
	}
	k.proc = p
	defer func() { k.proc.stop() }()
	k.base = p.base
	return k.check(ctx)
}

// worldProc is a command world the kit started.
type worldProc struct {
	cmd  *exec.Cmd
	base string
	done chan struct{} // closed once the process has exited
	out  *tailBuffer
}

// start starts the command on the kit's data dir and a free port, and
// waits until it answers describe.
func (k *kit) start(ctx context.Context) (*worldProc, error) {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoAnswer, err)
	}
	args := make([]string, len(k.command))
	for i, a := range k.command {
		args[i] = os.Expand(a, func(v string) string {
			switch v {
			case EnvWorldAddr:
				return addr
			case EnvWorldData:
				return k.data
			}
			return "$" + v
		})
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = k.opts.Dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OVERNIGHT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, k.opts.Env...), EnvWorldAddr+"="+addr, EnvWorldData+"="+k.data)
	out := &tailBuffer{}
	var w io.Writer = out
	if k.opts.Output != nil {
		w = io.MultiWriter(out, k.opts.Output)
	}
	cmd.Stdout, cmd.Stderr = w, w
	// Its own process group, so that a shell's children die with it; and
	// it dies with the kit.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: start %q: %v", ErrNoAnswer, k.command, err)
	}
	p := &worldProc{cmd: cmd, base: "http://" + addr, done: make(chan struct{}), out: out}
	go func() { _ = cmd.Wait(); close(p.done) }()
	if err := remote.WaitDescribe(ctx, p.base, k.opts.StartTimeout, p.done, func() string { return fmt.Sprintf("the process exited (%v)", p.cmd.ProcessState) }); err != nil {
		p.kill()
		return nil, fmt.Errorf("%w: %q did not answer describe at %s within %s: %v%s", ErrNoAnswer, k.command, p.base, k.opts.StartTimeout, err, p.out.ending())
	}
	return p, nil
}

// kill SIGKILLs the world's process group and waits until it is reaped.
func (p *worldProc) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// stop ends the world: SIGTERM to its process group, SIGKILL after 5 s.
func (p *worldProc) stop() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		// Its group may hold children that outlived it.
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	case <-time.After(5 * time.Second):
		p.kill()
	}
}

// freeLoopbackAddr is a loopback address with a port free now.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// tailBuffer keeps the last 4 KiB written to it: a world's output, for
// errors.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailMax = 4 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailMax {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailMax:]...)
	}
	return len(p), nil
}

// ending is "; its output ends: ..." ("" with no output).
func (t *tailBuffer) ending() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return "; it printed nothing"
	}
	if len(s) > 800 {
		s = "..." + s[len(s)-800:]
	}
	return "; its output ends: " + s
}
