// Package probe is what the conformance kit (sandbox/sandboxtest) runs
// inside a sandbox to see what a backend made of it: the overnight binary
// serves it as its hidden `probe` subcommand, so every sandbox a backend
// starts from the init binary can run it. Each mode prints one plain
// answer on stdout (errors on stderr, exit 1).
package probe

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Usage lists the modes.
const Usage = `probe MODE [ARGS]: exit CODE OUT ERR | env | self | whoami | fs | write PATH TEXT | link TARGET PATH | cat PATH |
dial HOST:PORT | gateway SOCKET | wait-signal | sleep DURATION | ticker | serve ADDR`

// Main runs one probe and returns its exit code.
func Main(args []string) int {
	if len(args) == 0 {
		return fail(fmt.Errorf("no mode: %s", Usage))
	}
	mode, args := args[0], args[1:]
	need := func(n int) bool { return len(args) >= n }
	switch mode {
	case "exit": // exit CODE OUT ERR: print OUT and ERR, exit CODE
		if !need(3) {
			break
		}
		code, err := strconv.Atoi(args[0])
		if err != nil {
			return fail(err)
		}
		fmt.Println(args[1])
		fmt.Fprintln(os.Stderr, args[2])
		return code
	case "env": // the environment, sorted
		env := os.Environ()
		sort.Strings(env)
		for _, kv := range env {
			fmt.Println(kv)
		}
		return 0
	case "self": // what an agent can see of how it runs (see self)
		out, err := self()
		if err != nil {
			return fail(err)
		}
		fmt.Print(out)
		return 0
	case "whoami": // uid:gid
		fmt.Printf("%d:%d\n", os.Getuid(), os.Getgid())
		return 0
	case "fs": // what is writable: root, /tmp, the workspace
		var out []string
		for _, dir := range []string{"/", "/tmp", "/workspace"} {
			f, err := os.CreateTemp(dir, ".probe-")
			if err != nil {
				out = append(out, dir+"=ro")
				continue
			}
			f.Close()
			os.Remove(f.Name())
			out = append(out, dir+"=rw")
		}
		fmt.Println(strings.Join(out, " "))
		return 0
	case "write": // write PATH TEXT
		if !need(2) {
			break
		}
		if err := os.MkdirAll(filepath.Dir(args[0]), 0o755); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(args[0], []byte(args[1]), 0o644); err != nil {
			return fail(err)
		}
		fmt.Println("wrote", args[0])
		return 0
	case "link": // link TARGET PATH: a symbolic link at PATH to TARGET
		if !need(2) {
			break
		}
		if err := os.Symlink(args[0], args[1]); err != nil {
			return fail(err)
		}
		fmt.Println("linked", args[1])
		return 0
	case "cat": // cat PATH
		if !need(1) {
			break
		}
		b, err := os.ReadFile(args[0])
		if err != nil {
			return fail(err)
		}
		os.Stdout.Write(b)
		return 0
	case "dial": // dial HOST:PORT: reached, or unreachable
		if !need(1) {
			break
		}
		c, err := net.DialTimeout("tcp", args[0], 2*time.Second)
		if err != nil {
			fmt.Println("unreachable")
			return 0
		}
		c.Close()
		fmt.Println("reached")
		return 0
	case "gateway": // gateway SOCKET: send a line, print the answer
		if !need(1) {
			break
		}
		c, err := net.DialTimeout("unix", args[0], 5*time.Second)
		if err != nil {
			return fail(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := fmt.Fprintln(c, "ping"); err != nil {
			return fail(err)
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return fail(err)
		}
		fmt.Print(line)
		return 0
	case "wait-signal": // wait for SIGTERM, say so, exit 0
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		fmt.Println("waiting")
		fmt.Println("got", (<-ch).String())
		return 0
	case "sleep": // sleep DURATION
		if !need(1) {
			break
		}
		d, err := time.ParseDuration(args[0])
		if err != nil {
			return fail(err)
		}
		time.Sleep(d)
		return 0
	case "ticker": // a line every 20ms, for ever
		for i := 0; ; i++ {
			fmt.Println(i)
			time.Sleep(20 * time.Millisecond)
		}
	case "serve": // serve ADDR: HTTP, answering "ok" to anything
		if !need(1) {
			break
		}
		srv := &http.Server{Addr: args[0], ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintln(w, "ok")
		})}
		return fail(srv.ListenAndServe())
	}
	return fail(fmt.Errorf("bad probe %q %q: %s", mode, args, Usage))
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "probe:", err)
	return 1
}

// self describes what an agent can see of how it was started, for a
// comparison of two sandboxes: its environment (but HOSTNAME, the
// container's own), user, groups, working directory, mounts (where, what
// and how; a tmpfs's size and mode too), and the limits its cgroups put on
// memory, processes and CPU.
func self() (string, error) {
	var b strings.Builder
	env := os.Environ()
	sort.Strings(env)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "HOSTNAME=") {
			fmt.Fprintf(&b, "env %s\n", kv)
		}
	}
	groups, _ := os.Getgroups()
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "user %d:%d groups %v\ncwd %s\n", os.Getuid(), os.Getgid(), groups, wd)
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	var mounts []string
	for _, line := range strings.Split(strings.TrimSpace(string(info)), "\n") {
		// ID PARENT MAJ:MIN ROOT POINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 6 || len(g) < 3 {
			continue
		}
		m := fmt.Sprintf("mount %s %s %s", f[4], g[0], f[5])
		if g[0] == "tmpfs" {
			m += " " + g[2]
		}
		mounts = append(mounts, m)
	}
	sort.Strings(mounts)
	b.WriteString(strings.Join(mounts, "\n") + "\n")
	for _, f := range []string{
		"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes",
		"/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us",
		"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.swap.max", "/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/cpu.max",
	} {
		if v, err := os.ReadFile(f); err == nil {
			fmt.Fprintf(&b, "limit %s %s\n", f, strings.TrimSpace(string(v)))
		}
	}
	return b.String(), nil
}
