package journal_test

// Some specs need a second process: flock is per open file description, and
// only a real SIGKILL shows what survives a crash. They re-execute this test
// binary with helperModeEnv set; TestMain then runs the helper instead of the
// tests, so it works the same under `go test` and the ginkgo CLI.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/journal"
)

const (
	helperModeEnv = "OVERNIGHT_JOURNAL_TEST_HELPER" // "hold" or "crash"
	helperDirEnv  = "OVERNIGHT_JOURNAL_TEST_DIR"
	helperIterEnv = "OVERNIGHT_JOURNAL_TEST_ITER"

	crashWriters = 8
	// A helper never outlives this, even if its parent forgets it.
	helperLifetime = 60 * time.Second
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperModeEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

func runHelper(mode string) int {
	dir := os.Getenv(helperDirEnv)
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "helper %s: open %s: %v\n", mode, dir, err)
		return 2
	}
	switch mode {
	case "hold":
		// Own the state dir until killed.
		fmt.Fprintf(os.Stdout, "ready %d\n", os.Getpid())
		time.Sleep(helperLifetime)
	case "crash":
		iter, _ := strconv.Atoi(os.Getenv(helperIterEnv))
		fmt.Fprintln(os.Stdout, "ready")
		crashWrite(j, iter)
	default:
		fmt.Fprintf(os.Stderr, "helper: unknown mode %q\n", mode)
		return 2
	}
	if err := j.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "helper %s: close: %v\n", mode, err)
		return 2
	}
	return 0
}

// crashRequest is the atomic commit number i of writer w in iteration iter:
// 2 or 3 entries under one request prefix.
func crashRequest(iter, w, i int) (prefix string, entries []journal.Entry) {
	prefix = fmt.Sprintf("crash/%03d/%02d/%08d/", iter, w, i)
	for p := 0; p < crashParts(i); p++ {
		key := prefix + string(rune('a'+p))
		entries = append(entries, journal.Entry{Key: []byte(key), Value: crashValue(key)})
	}
	return prefix, entries
}

func crashParts(i int) int { return 2 + i%2 }

func crashValue(key string) []byte {
	return fmt.Appendf(nil, "value of %s|%0100d", key, len(key))
}

// crashWrite runs crashWriters concurrent writers, each printing "ack W I"
// only after Commit of its request I returned nil. Each line is one write(2)
// on an unbuffered stdout, so it is in the pipe before the next commit starts.
func crashWrite(j *journal.Journal, iter int) {
	ctx, cancel := context.WithTimeout(context.Background(), helperLifetime)
	defer cancel()
	var wg sync.WaitGroup
	for w := 0; w < crashWriters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1_000_000 && ctx.Err() == nil; i++ {
				_, entries := crashRequest(iter, w, i)
				if err := j.Commit(ctx, entries...); err != nil {
					fmt.Fprintf(os.Stderr, "writer %d commit %d: %v\n", w, i, err)
					return
				}
				fmt.Fprintf(os.Stdout, "ack %d %d\n", w, i)
			}
		}()
	}
	wg.Wait()
}

// helperProcess is a running helper with its stdout delivered line by line.
type helperProcess struct {
	cmd    *exec.Cmd
	lines  chan string // closed at EOF
	stderr *bytes.Buffer
	waited chan struct{}
}

func startHelper(mode, dir string, extraEnv ...string) *helperProcess {
	GinkgoHelper()
	exe, err := os.Executable()
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperModeEnv+"="+mode, helperDirEnv+"="+dir)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &helperProcess{cmd: cmd, lines: make(chan string, 1<<16), stderr: &bytes.Buffer{}, waited: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(p.kill) // registered before anything else can fail
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	return p
}

// waitLine returns the next line, or fails the spec after timeout or at EOF.
func (p *helperProcess) waitLine(timeout time.Duration) string {
	GinkgoHelper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			p.kill()
			Fail(fmt.Sprintf("helper pid %d ended without output; stderr: %s", p.cmd.Process.Pid, p.stderr))
		}
		return line
	case <-time.After(timeout):
		Fail(fmt.Sprintf("helper pid %d: no output within %s; stderr: %s", p.cmd.Process.Pid, timeout, p.stderr))
	}
	return ""
}

// kill SIGKILLs the helper and reaps it; safe to call more than once.
func (p *helperProcess) kill() {
	_ = p.cmd.Process.Kill()
	select {
	case <-p.waited:
	default:
		// Drain stdout first: Wait closes the pipe.
		for range p.lines {
		}
		_ = p.cmd.Wait()
		close(p.waited)
	}
}

// killAndCollect SIGKILLs the helper and returns every complete line it wrote
// that was not consumed yet.
func (p *helperProcess) killAndCollect() []string {
	_ = p.cmd.Process.Kill()
	var rest []string
	for line := range p.lines {
		rest = append(rest, line)
	}
	p.kill()
	return rest
}
