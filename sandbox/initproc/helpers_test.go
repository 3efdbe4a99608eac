package initproc_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/overnight-dev/overnight/sandbox/initproc"
)

// helper is the agent side of the subprocess tests: the test binary re-executed as
// `helper MODE ARGS...` underneath a re-executed init.
func helper(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "helper: no mode")
		return 2
	}
	switch args[0] {
	case "exit": // exit N: one line on each stream, then exit N
		code, _ := strconv.Atoi(args[1])
		fmt.Println("to stdout")
		fmt.Fprintln(os.Stderr, "to stderr")
		return code
	case "selfsignal": // die from SIGTERM sent to ourselves (default disposition)
		signal.Reset(syscall.SIGTERM)
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		time.Sleep(5 * time.Second)
		return 1
	case "env": // env KEY: print the value
		fmt.Println(os.Getenv(args[1]))
		return 0
	case "environ": // the whole environment, sorted
		env := os.Environ()
		slices.Sort(env)
		fmt.Println(strings.Join(env, "\n"))
		return 0
	case "sleep":
		d, _ := time.ParseDuration(args[1])
		time.Sleep(d)
		return 0
	case "spawn": // start a grandchild that lives until its stdin closes, and leave it behind
		self, _ := os.Executable()
		p, err := os.StartProcess(self, []string{self, "helper", "wait-stdin"},
			&os.ProcAttr{Env: os.Environ(), Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		_ = p.Release()
		return 0
	case "wait-stdin":
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 0
	case "wait-signal":
		return waitSignal()
	case "orphans":
		n, _ := strconv.Atoi(args[1])
		return orphans(n)
	case "http-get": // http-get PATH through the relay
		resp, err := http.Get("http://" + os.Getenv(initproc.EnvRelayAddr) + args[1])
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d %s\n", resp.StatusCode, body)
		return 0
	}
	fmt.Fprintln(os.Stderr, "helper: unknown mode", args[0])
	return 2
}

func waitSignal() int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGHUP)
	fmt.Println("ready")
	deadline := time.After(20 * time.Second)
	for {
		select {
		case s := <-sigs:
			fmt.Println("got", s)
			if s == syscall.SIGTERM {
				return 0
			}
		case <-deadline:
			fmt.Println("no SIGTERM within 20s")
			return 3
		}
	}
}

// orphans leaves n grandchildren behind, which the kernel hands to init (our parent, a
// subreaper); once all n are seen as init's children, it releases them (closing the pipe they
// wait on) and watches init's children until none is left, alive or zombie.
func orphans(n int) int {
	self, _ := os.Executable()
	release, hold, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for i := 0; i < n; i++ {
		cmd := exec.Command(self, "helper", "spawn")
		cmd.Stdin, cmd.Stderr = release, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "spawn:", err)
			return 1
		}
	}
	release.Close()
	initPid := os.Getppid()
	seen := 0
	for deadline := time.Now().Add(10 * time.Second); seen < n && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		alive, _ := childrenOf(initPid)
		seen = max(seen, alive)
	}
	hold.Close()
	zombies := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		alive, z := childrenOf(initPid)
		if zombies = z; alive == 0 && z == 0 {
			break
		}
	}
	fmt.Printf("orphans=%d zombies=%d\n", seen, zombies)
	return 0
}

// childrenOf counts the processes (other than this one) whose parent is pid: running ones and
// zombies separately.
func childrenOf(pid int) (alive, zombies int) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may contain spaces, so parse after the last ')'.
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 {
			continue
		}
		self, _ := strconv.Atoi(strings.Fields(s)[0])
		ppid, _ := strconv.Atoi(fields[1])
		if ppid != pid || self == os.Getpid() {
			continue
		}
		if fields[0] == "Z" {
			zombies++
		} else {
			alive++
		}
	}
	return alive, zombies
}
