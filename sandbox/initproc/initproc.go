// Package initproc is PID 1 inside every overnight sandbox.
//
// The harness copies its own static binary into each sandbox image as /overnight and starts it as
// `/overnight init -- AGENT...`. Main then does the few things a container's init must do, and
// nothing else:
//
//   - it serves the gateway on the container's own loopback (127.0.0.1:7070), relaying every TCP
//     connection byte for byte to the unix socket named in OVERNIGHT_SOCKET, so an agent in any
//     language reaches the gateway with a plain HTTP client (OVERNIGHT_URL=http://127.0.0.1:7070);
//   - it starts the agent with the same environment and the same stdin, stdout and stderr;
//   - it forwards SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to the agent;
//   - it reaps every orphan that the pid namespace hands to it, so no zombie accumulates;
//   - it exits with the agent's exit code (128+N when the agent was killed by signal N).
//
// Started as a standby (OVERNIGHT_STANDBY names a directory: sandbox.Standbys), it first waits,
// doing nothing, until the harness hands over the attempt's environment in that directory
// (sandbox.Handover), and then goes on as above with it; a signal while it waits ends it (128+N).
//
// The package must not interpret what crosses the relay (authentication, fencing and the protocol
// belong to the harness's gateway), must not write to stdout, and writes to stderr only when it
// cannot do its job. It runs unprivileged, with no network but loopback.
package initproc

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/overnight-dev/overnight/sandbox"
)

// Environment variables Main reads.
const (
	// EnvSocket names the gateway's unix socket inside the sandbox (set by the harness).
	EnvSocket = "OVERNIGHT_SOCKET"
	// EnvRelayAddr overrides the TCP address the relay listens on (default DefaultRelayAddr).
	// When its port is 0, Main listens on a free port and passes the chosen address to the
	// agent in this same variable.
	EnvRelayAddr = "OVERNIGHT_RELAY_ADDR"
)

// DefaultRelayAddr is the loopback address the relay serves when EnvRelayAddr is unset.
const DefaultRelayAddr = "127.0.0.1:7070"

// Exit codes Main returns when the agent itself never ran.
const (
	// ExitRelayFailed: the relay could not listen, or a standby's handover
	// could not be read, so the agent was not started.
	ExitRelayFailed = 125
	// ExitCannotExecute: the command exists but could not be started (permission, format).
	ExitCannotExecute = 126
	// ExitNotFound: no command was given, or it does not exist.
	ExitNotFound = 127
)

// dialTimeout bounds how long one relayed connection waits for the gateway socket.
const dialTimeout = 5 * time.Second

// reapInterval is a safety net: reap even if a SIGCHLD notification was coalesced away.
const reapInterval = 2 * time.Second

// forwarded are the signals Main passes on to the agent rather than acting on them itself.
var forwarded = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP,
	syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

// Main runs the sandbox init: args are the agent command (argv after "--"). Returns the exit code
// to use. It returns only once the agent has exited.
func Main(args []string) int {
	if len(args) == 0 {
		errorf("no agent command given; usage: overnight init -- COMMAND [ARG...]")
		return ExitNotFound
	}

	// Notify before anything can exit: a SIGCHLD or SIGTERM arriving between starting the
	// child and subscribing would otherwise be lost (or, for SIGTERM, kill the init).
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, append([]os.Signal{syscall.SIGCHLD}, forwarded...)...)
	defer signal.Stop(sigs)

	// Outside a container (tests, `overnight init` on a host) orphans would go to the host's
	// init; as a subreaper they come to us, exactly as they do when we are PID 1.
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

	if dir := os.Getenv(sandbox.EnvStandby); dir != "" {
		// A standby: nothing runs until an attempt takes it over.
		h, sig, err := awaitHandover(dir, sigs)
		switch {
		case sig != nil:
			if s, ok := sig.(syscall.Signal); ok {
				return 128 + int(s)
			}
			return 128
		case err == nil:
			err = takeOver(h)
		}
		if err != nil {
			errorf("standby: no handover to start the agent with: %v", err)
			return ExitRelayFailed
		}
	}

	env := os.Environ()
	addr := os.Getenv(EnvRelayAddr)
	if addr == "" {
		addr = DefaultRelayAddr
	}
	// The relay listens before the agent starts, so the agent's very first call succeeds.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		errorf("cannot listen on %s for the gateway relay: %v; set %s to a free address", addr, err, EnvRelayAddr)
		return ExitRelayFailed
	}
	defer ln.Close()
	if _, port, _ := net.SplitHostPort(addr); port == "0" {
		env = setEnv(env, EnvRelayAddr, ln.Addr().String())
	}
	r := &Relay{Socket: os.Getenv(EnvSocket)}
	go r.Serve(ln)

	proc, code := start(args, env)
	if proc == nil {
		return code
	}
	defer proc.Release()
	return supervise(proc, sigs)
}

// start launches the agent; on failure it returns a nil process and the exit code to use.
func start(args, env []string) (*os.Process, int) {
	path := args[0]
	if lp, err := exec.LookPath(path); err == nil {
		path = lp
	} else if !containsSlash(path) {
		// LookPath passes over a file without the execute bit: say so
		// rather than "not found".
		for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
			cand := filepath.Join(dir, path)
			if fi, err := os.Stat(cand); err == nil && !fi.IsDir() {
				errorf("cannot start agent: %s (found in PATH at %s)", whyNot(args[0], cand, syscall.EACCES), cand)
				return nil, ExitCannotExecute
			}
		}
		errorf("agent command %q not found in PATH=%q", args[0], os.Getenv("PATH"))
		return nil, ExitNotFound
	}
	proc, err := os.StartProcess(path, args, &os.ProcAttr{
		Env:   env,
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
	})
	if err != nil {
		why := whyNot(args[0], path, err)
		if _, serr := os.Stat(path); serr != nil && errors.Is(serr, os.ErrNotExist) {
			errorf("cannot start agent: %s", why)
			return nil, ExitNotFound
		}
		errorf("cannot start agent: %s", why)
		return nil, ExitCannotExecute
	}
	return proc, 0
}

// supervise forwards signals, reaps every child, and returns the agent's exit code once it exits.
// All waiting happens here, with wait4(-1): os.Process.Wait would race with the reaper for the
// agent's status.
func supervise(proc *os.Process, sigs <-chan os.Signal) int {
	tick := time.NewTicker(reapInterval)
	defer tick.Stop()
	for {
		if code, done := reap(proc.Pid); done {
			return code
		}
		select {
		case sig := <-sigs:
			if sig != syscall.SIGCHLD {
				// The agent may already be gone; then there is nobody to tell.
				_ = proc.Signal(sig)
			}
		case <-tick.C:
		}
	}
}

// reap collects every exited child without blocking. It reports the agent's exit code when the
// agent was among them.
func reap(agent int) (code int, done bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return code, done
		}
		if pid == agent {
			code, done = exitCode(ws), true
		}
	}
}

// exitCode maps a wait status to a shell-style exit code.
func exitCode(ws syscall.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	default:
		return 128
	}
}

func setEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if len(kv) > len(key) && kv[:len(key)+1] == key+"=" {
			continue
		}
		out = append(out, kv)
	}
	return append(out, key+"="+value)
}

func containsSlash(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return true
		}
	}
	return false
}

// stderr is where init reports what it cannot do; a variable so tests can capture it.
var stderr io.Writer = os.Stderr

func errorf(format string, args ...any) {
	fmt.Fprintf(stderr, "overnight init: "+format+"\n", args...)
}
