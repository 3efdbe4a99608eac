// Command testinit stands in for the overnight binary in the sandbox package's tests: it is the
// init (`testinit init -- ...`, exactly what overnight's `init` subcommand runs) and a handful of
// probe agents that report from inside a sandbox what the tests cannot see from outside.
// It is a test helper only; nothing ships it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/overnight-dev/overnight/sandbox/initproc"
)

// nonce is set with -ldflags "-X main.nonce=..." so each test suite builds a binary (and so a
// sandbox image) of its own.
var nonce string

func main() {
	_ = nonce
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testinit init -- CMD... | echo OUT ERR CODE | sleep D | wait-signal | gateway-call PATH... | gateway-post PATH BYTES | gateway-loop relay|socket N | cat FILE | write | whoami | orphans N | selfsignal")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "init":
		if len(args) > 0 && args[0] == "--" {
			args = args[1:]
		}
		os.Exit(initproc.Main(args))
	case "echo": // echo OUT ERR CODE
		fmt.Println(args[0])
		fmt.Fprintln(os.Stderr, args[1])
		code, _ := strconv.Atoi(args[2])
		os.Exit(code)
	case "env": // print the environment, one variable a line
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
	case "sleep":
		d, err := time.ParseDuration(args[0])
		if err != nil {
			fail(err)
		}
		time.Sleep(d)
	case "wait-signal":
		os.Exit(waitSignal())
	case "gateway-call":
		os.Exit(gatewayCall(args))
	case "gateway-post":
		size, _ := strconv.Atoi(args[1])
		os.Exit(gatewayPost(args[0], size))
	case "gateway-loop": // gateway-loop relay|socket N
		n, _ := strconv.Atoi(args[1])
		os.Exit(gatewayLoop(args[0], n))
	case "cat":
		data, err := os.ReadFile(args[0])
		if err != nil {
			fail(err)
		}
		_, _ = os.Stdout.Write(data)
	case "write":
		write()
	case "put": // put PATH TEXT: write TEXT to PATH
		if err := os.WriteFile(args[0], []byte(args[1]), 0o644); err != nil {
			fail(err)
		}
	case "whoami":
		whoami()
	case "pause": // what overnight's pause runs: PID 1 of a network-namespace holder
		os.Exit(initproc.Pause())
	case "netns": // the network namespace (its inode) and its interfaces
		ns, err := os.Readlink("/proc/self/ns/net")
		if err != nil {
			fail(err)
		}
		ifs, err := net.Interfaces()
		if err != nil {
			fail(err)
		}
		names := make([]string, 0, len(ifs))
		for _, i := range ifs {
			names = append(names, i.Name)
		}
		fmt.Println(ns, strings.Join(names, ","))
	case "listen": // listen on 127.0.0.1:PORT (or HOST:PORT), say so, and stay
		ln, err := net.Listen("tcp", hostPort(args[0]))
		if err != nil {
			fail(err)
		}
		fmt.Println("listening")
		_ = ln
		select {}
	case "accept": // accept on HOST:PORT, closing each connection, for ever
		ln, err := net.Listen("tcp", hostPort(args[0]))
		if err != nil {
			fail(err)
		}
		fmt.Println("accepting")
		for {
			c, err := ln.Accept()
			if err != nil {
				fail(err)
			}
			c.Close()
		}
	case "dial": // dial 127.0.0.1:PORT (or HOST:PORT): "open" or "closed"
		c, err := net.DialTimeout("tcp", hostPort(args[0]), time.Second)
		if err != nil {
			fmt.Println("closed")
			return
		}
		c.Close()
		fmt.Println("open")
	case "pwd":
		wd, err := os.Getwd()
		if err != nil {
			fail(err)
		}
		fmt.Println(wd)
	case "orphans":
		n, _ := strconv.Atoi(args[0])
		orphans(n)
	case "spawn": // leave behind a grandchild that lives until its stdin closes
		self, _ := os.Executable()
		p, err := os.StartProcess(self, []string{self, "wait-stdin"},
			&os.ProcAttr{Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
		if err != nil {
			fail(err)
		}
		_ = p.Release()
	case "wait-stdin":
		_, _ = io.Copy(io.Discard, os.Stdin)
	case "selfsignal":
		signal.Reset(syscall.SIGTERM)
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		time.Sleep(5 * time.Second)
		os.Exit(1)
	default:
		fail(fmt.Errorf("unknown mode %q", os.Args[1]))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "testinit:", err)
	os.Exit(1)
}

func waitSignal() int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGUSR1)
	fmt.Println("ready")
	deadline := time.After(60 * time.Second)
	for {
		select {
		case s := <-sigs:
			fmt.Println("got", s)
			if s == syscall.SIGTERM {
				return 0
			}
		case <-deadline:
			fmt.Println("no SIGTERM within 60s")
			return 3
		}
	}
}

// gatewayCall GETs each path through OVERNIGHT_URL on one keep-alive client and prints
// "STATUS BODY" per call.
func gatewayCall(paths []string) int {
	base := os.Getenv("OVERNIGHT_URL")
	client := &http.Client{Timeout: 10 * time.Second}
	for _, p := range paths {
		req, _ := http.NewRequest(http.MethodGet, base+p, nil)
		if tok := os.Getenv("OVERNIGHT_TOKEN"); tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Printf("%d %s\n", resp.StatusCode, bytes.TrimSpace(body))
	}
	return 0
}

// gatewayPost POSTs size pseudo-random bytes to path and prints the digests of what it sent and
// what it got back.
func gatewayPost(path string, size int) int {
	rng := rand.New(rand.NewPCG(uint64(size), 42))
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(rng.Uint32())
	}
	resp, err := http.Post(os.Getenv("OVERNIGHT_URL")+path, "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Printf("status=%d sent=%s received=%s received_len=%d\n", resp.StatusCode, digest(body), digest(got), len(got))
	return 0
}

// gatewayLoop POSTs a small JSON body to /v1/events n times, one after another, on one
// keep-alive client — through the init's relay (OVERNIGHT_URL) or straight to the bind-mounted
// socket (OVERNIGHT_SOCKET), with net/http's client — and prints "requests=N elapsed_ns=T"
// (the loop alone, timed here).
func gatewayLoop(via string, n int) int {
	base := os.Getenv("OVERNIGHT_URL")
	tr := &http.Transport{MaxIdleConns: 4, IdleConnTimeout: 30 * time.Second}
	if via == "socket" {
		base = "http://gateway"
		sock := os.Getenv("OVERNIGHT_SOCKET")
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
	}
	client := &http.Client{Transport: tr}
	body := []byte(`{"type":"progress"}`)
	call := func() error {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/events", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		return err
	}
	if err := call(); err != nil { // the connection is made outside the measurement
		fmt.Println("error:", err)
		return 1
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := call(); err != nil {
			fmt.Println("error:", err)
			return 1
		}
	}
	fmt.Printf("requests=%d elapsed_ns=%d\n", n, time.Since(start).Nanoseconds())
	return 0
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// write tries to write where an agent may (workspace, /tmp) and where it must not (/).
func write() {
	result := map[string]string{}
	for key, path := range map[string]string{"workspace": "/workspace/probe", "tmp": "/tmp/probe", "root": "/probe"} {
		if err := os.WriteFile(path, []byte("probe"), 0o644); err != nil {
			result[key] = err.Error()
		} else {
			result[key] = "ok"
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(result)
}

// whoami reports the identity and confinement the agent runs under.
func whoami() {
	status := map[string]string{}
	if f, err := os.Open("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok {
				status[k] = strings.TrimSpace(v)
			}
		}
		f.Close()
	}
	var names []string
	ifaces, err := net.Interfaces()
	if err != nil {
		names = []string{"error: " + err.Error()}
	}
	for _, i := range ifaces {
		names = append(names, i.Name)
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{
		"uid":          os.Getuid(),
		"gid":          os.Getgid(),
		"cap_eff":      status["CapEff"],
		"cap_bnd":      status["CapBnd"],
		"no_new_privs": status["NoNewPrivs"],
		"interfaces":   names,
		"pid":          os.Getpid(),
		"ppid":         os.Getppid(),
		"cwd":          must(os.Getwd()),
		"env":          os.Environ(),
	})
}

func must(s string, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return s
}

// orphans leaves n grandchildren behind, which the kernel hands to PID 1; once all n are seen
// as PID 1's children, it releases them (closing the pipe they wait on), gives PID 1 time to
// collect them, and reports how many it saw and how many are left as zombies.
func orphans(n int) {
	self, _ := os.Executable()
	release, hold, err := os.Pipe()
	if err != nil {
		fail(err)
	}
	for i := 0; i < n; i++ {
		cmd := exec.Command(self, "spawn")
		cmd.Stdin, cmd.Stderr = release, os.Stderr
		if err := cmd.Run(); err != nil {
			fail(err)
		}
	}
	release.Close()
	seen := 0
	for deadline := time.Now().Add(10 * time.Second); seen < n && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		alive, _ := childrenOfPID1()
		seen = max(seen, alive)
	}
	hold.Close()
	zombies := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		alive, z := childrenOfPID1()
		if zombies = z; alive == 0 && z == 0 {
			break
		}
		if alive == 0 && os.Getpid() == 1 {
			// Nobody else can reap them: we are PID 1 (the control without an init).
			time.Sleep(500 * time.Millisecond)
			_, zombies = childrenOfPID1()
			break
		}
	}
	fmt.Printf("orphans=%d zombies=%d\n", seen, zombies)
}

// childrenOfPID1 counts PID 1's children other than this process, running and zombie apart.
func childrenOfPID1() (alive, zombies int) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		pid, _ := strconv.Atoi(strings.Fields(s)[0])
		if len(fields) < 2 || pid == os.Getpid() || pid == 1 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid != 1 {
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

// hostPort is arg as HOST:PORT: a bare port is on loopback.
func hostPort(arg string) string {
	if strings.Contains(arg, ":") {
		return arg
	}
	return "127.0.0.1:" + arg
}
