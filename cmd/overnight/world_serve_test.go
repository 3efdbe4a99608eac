package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// worldServer is a running `overnight world serve`.
type worldServer struct {
	cmd    *exec.Cmd
	done   chan struct{} // closed once it exited
	err    error         // its exit, once done
	line   string        // the first line it printed
	url    string
	stderr *bytes.Buffer
}

// startWorld starts `overnight world serve cloud` with args and env and waits
// for its line; the process is stopped after the spec (SIGTERM, then
// SIGKILL), unless the spec has ended it.
func startWorld(ctx context.Context, env []string, args ...string) *worldServer {
	GinkgoHelper()
	return startWorldNamed(ctx, "cloud", env, args...)
}

// startWorldNamed is startWorld for the built-in world name.
func startWorldNamed(ctx context.Context, name string, env []string, args ...string) *worldServer {
	GinkgoHelper()
	cmd := exec.Command(bin, append([]string{"world", "serve", name}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	ws := &worldServer{cmd: cmd, done: make(chan struct{}), stderr: &bytes.Buffer{}}
	cmd.Stderr = ws.stderr
	Expect(cmd.Start()).To(Succeed())
	go func() { ws.err = cmd.Wait(); close(ws.done) }()
	DeferCleanup(func() {
		select {
		case <-ws.done:
			return // the spec ended it
		default:
		}
		ws.terminate()
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
	case ws.line = <-lines:
	case <-time.After(30 * time.Second):
		Fail("world serve printed no line within 30s; stderr: " + ws.stderr.String())
	case <-ctx.Done():
		Fail("the spec ended before world serve printed its line")
	}
	rest, ok := strings.CutPrefix(ws.line, "serving world "+name+" on ")
	Expect(ok).To(BeTrue(), "its line: %q; stderr: %s", ws.line, ws.stderr.String())
	ws.url, _, _ = strings.Cut(rest, ",")
	return ws
}

// kill SIGKILLs the server and waits for it.
func (ws *worldServer) kill() {
	GinkgoHelper()
	Expect(ws.cmd.Process.Kill()).To(Succeed())
	select {
	case <-ws.done:
	case <-time.After(10 * time.Second):
		Fail("world serve outlived SIGKILL by 10s")
	}
}

// terminate SIGTERMs the server and checks it exits 0 within 10 s.
func (ws *worldServer) terminate() {
	GinkgoHelper()
	_ = ws.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ws.done:
		Expect(ws.err).NotTo(HaveOccurred(), "world serve ends with exit 0 on SIGTERM; stderr: %s", ws.stderr.String())
	case <-time.After(10 * time.Second):
		_ = ws.cmd.Process.Kill()
		<-ws.done
		Fail("world serve did not stop within 10s of SIGTERM")
	}
}

var _ = Describe("overnight world serve", func() {
	It("keeps the world in --data through a SIGKILL, started from $OVERNIGHT_WORLD_ADDR and $OVERNIGHT_WORLD_DATA", func(ctx SpecContext) {
		data := filepath.Join(GinkgoT().TempDir(), "cloud-world")
		ws := startWorld(ctx, []string{"OVERNIGHT_WORLD_ADDR=127.0.0.1:0", "OVERNIGHT_WORLD_DATA=" + data})
		Expect(ws.line).To(MatchRegexp(`^serving world cloud on http://127\.0\.0\.1:[1-9][0-9]*, state in ` + data + `$`))
		cl, err := remote.Dial(ctx, ws.url, remote.Config{})
		Expect(err).NotTo(HaveOccurred())
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var outs []world.Outcome
		for i, name := range []string{"a-net", "b-net", "a-net"} {
			o, err := cl.Execute(ctx, world.Request{Key: fmt.Sprintf("run-1/k/step-%d/0", i+1), Kind: cloud.KindCreateNetwork, Args: json.RawMessage(`{"name":"` + name + `"}`), Now: now})
			Expect(err).NotTo(HaveOccurred())
			Expect(o.Status).To(Equal("done"))
			outs = append(outs, o)
		}
		_, err = cl.SetAPIVersion(ctx, cloud.V2, now)
		Expect(err).NotTo(HaveOccurred())
		before, err := cl.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(before).To(HaveLen(4))
		ws.kill()

		ws = startWorld(ctx, nil, "--addr", "127.0.0.1:0", "--data", data)
		Expect(ws.line).To(HaveSuffix(", state in " + data))
		cl, err = remote.Dial(ctx, ws.url, remote.Config{})
		Expect(err).NotTo(HaveOccurred())
		Expect(cl.APIVersion()).To(Equal(cloud.V2))
		after, err := cl.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(after).To(Equal(before), "every answered apply survived the kill")
		o, found, err := cl.Lookup(ctx, before[2].Key)
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(o).To(Equal(outs[2]))
		dups, err := cl.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(dups).To(HaveLen(1))
		Expect(dups[0].Name).To(Equal("a-net"))
	})

	It("keeps the world in memory without --data, says so, and stops cleanly on SIGTERM", func(ctx SpecContext) {
		ws := startWorld(ctx, nil, "--option", "goal=maintenance")
		Expect(ws.line).To(HaveSuffix(", state in memory (lost when it stops)"))
		cl, err := remote.Dial(ctx, ws.url, remote.Config{})
		Expect(err).NotTo(HaveOccurred())
		Expect(cl.Description().Options).To(Equal(map[string]any{"goal": "maintenance"}))
		ws.terminate()
		_, err = cl.Ledger(ctx)
		Expect(err).To(MatchError(ContainSubstring("connection refused")))
	})

	It("refuses an address other machines can reach unless --allow-remote, an unknown world and a bad option", func(ctx SpecContext) {
		state := GinkgoT().TempDir()
		for _, addr := range []string{":7779", "0.0.0.0:0", "[::]:0"} {
			o := overnight(ctx, state, nil, "world", "serve", "cloud", "--addr", addr)
			Expect(o.code).To(Equal(3), addr)
			Expect(o.stderr).To(ContainSubstring("the world protocol has no authentication"), addr)
			Expect(o.stderr).To(ContainSubstring("loopback only"), addr)
			Expect(o.stderr).To(ContainSubstring("--allow-remote"), addr)
		}
		o := overnight(ctx, state, []string{"OVERNIGHT_WORLD_ADDR=0.0.0.0:0"}, "world", "serve", "cloud")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring("--addr 0.0.0.0:0: 0.0.0.0 is not a loopback address"), "$OVERNIGHT_WORLD_ADDR is checked as --addr is")

		ws := startWorld(ctx, nil, "--addr", "0.0.0.0:0", "--allow-remote")
		Expect(ws.line).To(MatchRegexp(`^serving world cloud on http://(\[::\]|0\.0\.0\.0):[1-9][0-9]*, state in memory`))

		o = overnight(ctx, state, nil, "world", "serve", "nope")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring(`no built-in world "nope" (built-in worlds: cloud, fleet)`))
		o = overnight(ctx, state, nil, "world", "serve", "cloud", "--option", "goal=everything")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring("option goal: unknown value everything"))
		o = overnight(ctx, state, nil, "world", "serve", "cloud", "--option", "goal")
		Expect(o.code).To(Equal(3))
		Expect(o.stderr).To(ContainSubstring(`--option "goal": want KEY=VALUE`))
	})
})
