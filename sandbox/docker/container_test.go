package docker_test

import (
	"github.com/overnight-dev/overnight/sandbox/docker"

	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox"
)

var _ = Describe("a sandbox's confinement", func() {
	It("runs the agent as 65534 with no capabilities, no-new-privs, loopback only, and only the given env", func(ctx SpecContext) {
		// A variable of the harness's own environment must not leak into the sandbox.
		GinkgoT().Setenv("OVERNIGHT_HOST_SECRET", "sk-do-not-leak")
		e := newEngine()
		spec := agentSpec("whoami")
		spec.Env["AGENT_SETTING"] = "42"
		code, out, errOut := runToEnd(ctx, e, spec)
		Expect(code).To(Equal(0), errOut)
		var who struct {
			UID        int      `json:"uid"`
			GID        int      `json:"gid"`
			CapEff     string   `json:"cap_eff"`
			CapBnd     string   `json:"cap_bnd"`
			NoNewPrivs string   `json:"no_new_privs"`
			Interfaces []string `json:"interfaces"`
			PPID       int      `json:"ppid"`
			Cwd        string   `json:"cwd"`
			Env        []string `json:"env"`
		}
		Expect(json.Unmarshal([]byte(out), &who)).To(Succeed(), out)
		Expect(who.UID).To(Equal(65534))
		Expect(who.GID).To(Equal(65534))
		Expect(who.CapEff).To(Equal("0000000000000000"))
		Expect(who.CapBnd).To(Equal("0000000000000000"))
		Expect(who.NoNewPrivs).To(Equal("1"))
		Expect(who.Interfaces).To(Equal([]string{"lo"}))
		Expect(who.PPID).To(Equal(1), "the agent is the child of the init, PID 1")
		Expect(who.Cwd).To(Equal("/workspace"))
		Expect(who.Env).To(ContainElements("AGENT_SETTING=42", "OVERNIGHT_URL=http://127.0.0.1:7070", "OVERNIGHT_SOCKET=/run/overnight/gateway.sock"))
		Expect(strings.Join(who.Env, "\n")).NotTo(ContainSubstring("sk-do-not-leak"))
	})

	It("has a read-only root, and a writable /tmp and workspace volume created with the run's labels", func(ctx SpecContext) {
		e := newEngine()
		spec := agentSpec("write")
		spec.Workspace = "ovn-test-ws-" + spec.RunID
		code, out, errOut := runToEnd(ctx, e, spec)
		Expect(code).To(Equal(0), errOut)
		var res map[string]string
		Expect(json.Unmarshal([]byte(out), &res)).To(Succeed(), out)
		Expect(res).To(HaveKeyWithValue("workspace", "ok"))
		Expect(res).To(HaveKeyWithValue("tmp", "ok"))
		Expect(res["root"]).To(ContainSubstring("read-only file system"))

		vol, err := cli.VolumeInspect(ctx, spec.Workspace)
		Expect(err).NotTo(HaveOccurred())
		Expect(vol.Labels).To(HaveKeyWithValue(sandbox.LabelManaged, "true"))
		Expect(vol.Labels).To(HaveKeyWithValue(sandbox.LabelRun, spec.RunID))
		Expect(vol.Labels).To(HaveKeyWithValue(sandbox.LabelState, e.StateHash()))

		// The next attempt finds in the workspace what the previous one wrote there.
		spec.Attempt = 2
		spec.Cmd = []string{sandbox.InitPath, "cat", "/workspace/probe"}
		code, out, errOut = runToEnd(ctx, e, spec)
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal("probe"))
	})

	It("gives a sandbox without a workspace volume a writable tmpfs workspace", func(ctx SpecContext) {
		code, out, errOut := runToEnd(ctx, newEngine(), agentSpec("write"))
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(ContainSubstring(`"workspace":"ok"`))
		Expect(out).To(ContainSubstring(`"tmp":"ok"`))
	})

	It("carries the hardening, limits, labels and name the engine reports", func(ctx SpecContext) {
		e := newEngine()
		spec := agentSpec("echo", "x", "y", "0")
		spec.Attempt = 3
		spec.Limits = sandbox.Limits{MemoryBytes: 128 << 20, PIDs: 64, NanoCPUs: 500_000_000}
		sb := create(ctx, e, spec)
		Expect(sb.Name).To(Equal("overnight-" + spec.RunID + "-3"))
		info, err := cli.ContainerInspect(ctx, sb.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(info.Name).To(Equal("/" + sb.Name))
		hc := info.HostConfig
		Expect(string(hc.NetworkMode)).To(Equal("none"))
		Expect(hc.ReadonlyRootfs).To(BeTrue())
		Expect(hc.Tmpfs).To(HaveKey("/tmp"))
		Expect(hc.Tmpfs).To(HaveKey("/workspace"))
		Expect(hc.CapDrop).To(ConsistOf("ALL"))
		Expect(hc.CapAdd).To(BeEmpty())
		Expect(hc.SecurityOpt).To(ContainElement("no-new-privileges"))
		Expect(hc.Privileged).To(BeFalse())
		Expect(hc.Memory).To(Equal(int64(128 << 20)))
		Expect(hc.MemorySwap).To(Equal(int64(128<<20)), "no swap")
		Expect(hc.PidsLimit).To(HaveValue(Equal(int64(64))))
		Expect(hc.NanoCPUs).To(Equal(int64(500_000_000)))
		Expect(string(hc.RestartPolicy.Name)).To(Equal("no"))
		Expect(hc.AutoRemove).To(BeFalse())
		Expect(hc.Binds).To(BeEmpty(), "no docker socket or any other host path")
		Expect(info.Config.User).To(Equal("65534:65534"))
		Expect(info.Config.Labels).To(HaveKeyWithValue(sandbox.LabelManaged, "true"))
		Expect(info.Config.Labels).To(HaveKeyWithValue(sandbox.LabelRun, spec.RunID))
		Expect(info.Config.Labels).To(HaveKeyWithValue(sandbox.LabelState, e.StateHash()))
		Expect(info.Config.Labels).To(HaveKeyWithValue(sandbox.LabelAttempt, "3"))
		Expect(info.Config.Labels).To(HaveKeyWithValue(labelSuite, suiteID))

		// The defaults, when no limits are given.
		spec = agentSpec("echo", "x", "y", "0")
		sb = create(ctx, e, spec)
		info, err = cli.ContainerInspect(ctx, sb.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(info.HostConfig.Memory).To(Equal(int64(256 << 20)))
		Expect(info.HostConfig.PidsLimit).To(HaveValue(Equal(int64(256))))
		Expect(info.HostConfig.NanoCPUs).To(Equal(int64(1_000_000_000)))
	})

	It("refuses a root or symbolic user, and a second sandbox for the same run and attempt", func(ctx SpecContext) {
		e := newEngine()
		for _, user := range []string{"0:0", "root", "65534"} {
			spec := agentSpec("echo", "x", "y", "0")
			spec.User = user
			_, err := e.Create(ctx, spec)
			Expect(err).To(MatchError(sandbox.ErrInvalidSpec), user)
		}
		spec := agentSpec("echo", "x", "y", "0")
		create(ctx, e, spec)
		_, err := e.Create(ctx, spec)
		Expect(err).To(MatchError(sandbox.ErrNameInUse))
		Expect(err.Error()).To(ContainSubstring(docker.ContainerName(spec.RunID, 1)))
	})
})

var _ = Describe("a sandbox's lifecycle", func() {
	It("reports the agent's exit code, and its stdout and stderr apart", func(ctx SpecContext) {
		code, out, errOut := runToEnd(ctx, newEngine(), agentSpec("echo", "to stdout", "to stderr", "3"))
		Expect(code).To(Equal(3))
		Expect(out).To(Equal("to stdout\n"))
		Expect(errOut).To(Equal("to stderr\n"))
	})

	It("reports 128+N for an agent killed by signal N", func(ctx SpecContext) {
		code, _, _ := runToEnd(ctx, newEngine(), agentSpec("selfsignal"))
		Expect(code).To(Equal(143))
	})

	It("keeps only the last LogLimit bytes of each stream", func(ctx SpecContext) {
		e := newEngine(func(o *docker.Options) { o.LogLimit = 10 })
		_, out, errOut := runToEnd(ctx, e, agentSpec("echo", "0123456789abcdef", "short", "0"))
		Expect(out).To(Equal("789abcdef\n"))
		Expect(errOut).To(Equal("short\n"))
	})

	It("forwards SIGUSR1 and SIGTERM to the agent, so Stop ends it cleanly before the grace period", func(ctx SpecContext) {
		e := newEngine()
		sb := start(ctx, e, agentSpec("wait-signal"))
		Eventually(func() string { return stdoutOf(ctx, e, sb.ID) }).WithTimeout(10 * time.Second).
			Should(Equal("ready\n"))
		Expect(e.Kill(ctx, sb.ID, "SIGUSR1")).To(Succeed())
		Eventually(func() string { return stdoutOf(ctx, e, sb.ID) }).WithTimeout(10 * time.Second).
			Should(ContainSubstring("got user defined signal 1\n"))

		began := time.Now()
		Expect(e.Stop(ctx, sb.ID, 20*time.Second)).To(Succeed())
		Expect(time.Since(began)).To(BeNumerically("<", 10*time.Second), "the agent ended on SIGTERM, not on the SIGKILL after the grace period")
		code, err := e.Wait(ctx, sb.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(0))
		Expect(stdoutOf(ctx, e, sb.ID)).To(HaveSuffix("got terminated\n"))
	})

	It("kills with SIGKILL by default (exit 137), and says when there is nothing to kill", func(ctx SpecContext) {
		e := newEngine()
		sb := start(ctx, e, agentSpec("sleep", "60s"))
		Expect(e.Kill(ctx, sb.ID, "")).To(Succeed())
		code, err := e.Wait(ctx, sb.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(137))
		err = e.Kill(ctx, sb.ID, "")
		Expect(err).To(MatchError(sandbox.ErrNotRunning))
		Expect(err.Error()).To(ContainSubstring(sb.ID))
	})

	It("pauses and unpauses", func(ctx SpecContext) {
		e := newEngine()
		sb := start(ctx, e, agentSpec("sleep", "60s"))
		Expect(e.Pause(ctx, sb.ID)).To(Succeed())
		info, err := cli.ContainerInspect(ctx, sb.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(info.State.Paused).To(BeTrue())
		Expect(e.Unpause(ctx, sb.ID)).To(Succeed())
		// The engine may report the thaw a moment after the call returns.
		Eventually(func(g Gomega) {
			info, err := cli.ContainerInspect(ctx, sb.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(info.State.Paused).To(BeFalse())
			g.Expect(info.State.Running).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		Expect(e.Unpause(ctx, sb.ID)).To(Succeed(), "a thaw of a sandbox that is not frozen does nothing")
		Expect(e.Kill(ctx, sb.ID, "")).To(Succeed())
		_, err = e.Wait(ctx, sb.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(e.Pause(ctx, sb.ID)).To(MatchError(sandbox.ErrNotRunning))
		Expect(e.Unpause(ctx, sb.ID)).To(Succeed(), "nor of one that has stopped")
	})

	It("restarts in place: SIGTERM to the agent, then the same container runs again", func(ctx SpecContext) {
		e := newEngine()
		sb := start(ctx, e, agentSpec("wait-signal"))
		Eventually(func() string { return stdoutOf(ctx, e, sb.ID) }).WithTimeout(10 * time.Second).
			Should(Equal("ready\n"))
		before, err := cli.ContainerInspect(ctx, sb.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(e.Restart(ctx, sb.ID, 20*time.Second)).To(Succeed())
		Eventually(func() string { return stdoutOf(ctx, e, sb.ID) }).WithTimeout(10 * time.Second).
			Should(Equal("ready\ngot terminated\nready\n"))
		after, err := cli.ContainerInspect(ctx, sb.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(after.State.Running).To(BeTrue())
		Expect(after.State.StartedAt).NotTo(Equal(before.State.StartedAt))
		Expect(e.Stop(ctx, sb.ID, 10*time.Second)).To(Succeed())
	})

	It("says ErrNotFound for a sandbox that is gone, and removing it again is fine", func(ctx SpecContext) {
		e := newEngine()
		sb := create(ctx, e, agentSpec("echo", "x", "y", "0"))
		Expect(e.Remove(ctx, sb.ID)).To(Succeed())
		Expect(e.Remove(ctx, sb.ID)).To(Succeed())
		_, err := e.Wait(ctx, sb.ID)
		Expect(err).To(MatchError(sandbox.ErrNotFound))
		Expect(err.Error()).To(ContainSubstring("wait for sandbox " + sb.ID))
		Expect(e.Start(ctx, sb.ID)).To(MatchError(sandbox.ErrNotFound))
		_, _, err = e.Logs(ctx, sb.ID)
		Expect(err).To(MatchError(sandbox.ErrNotFound))
	})

	It("removes a sandbox even when the caller's context is already cancelled", func(ctx SpecContext) {
		e := newEngine()
		sb := start(ctx, e, agentSpec("sleep", "60s"))
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		Expect(e.Remove(cancelled, sb.ID)).To(Succeed())
		_, err := cli.ContainerInspect(ctx, sb.ID)
		Expect(err).To(HaveOccurred())
	})
})

var _ = Describe("the init as PID 1", func() {
	It("reaps orphaned grandchildren, which a PID 1 without it leaves as zombies", func(ctx SpecContext) {
		e := newEngine()
		code, out, errOut := runToEnd(ctx, e, agentSpec("orphans", "4"))
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal("orphans=4 zombies=0\n"))

		// Control: the same agent as PID 1 itself, without the init, keeps its zombies, so the
		// probe above would have seen them.
		name := "overnight-control-" + nextRun()
		DeferCleanup(func(ctx context.Context) { Expect(e.Remove(ctx, name)).To(Succeed()) })
		resp, err := cli.ContainerCreate(ctx, &container.Config{
			Image:      image,
			Entrypoint: []string{sandbox.InitPath},
			Cmd:        []string{"orphans", "4"},
			Labels:     map[string]string{sandbox.LabelManaged: "true", sandbox.LabelState: e.StateHash(), sandbox.LabelRun: "control", labelSuite: suiteID},
		}, &container.HostConfig{NetworkMode: "none", ReadonlyRootfs: true}, nil, nil, name)
		Expect(err).NotTo(HaveOccurred())
		Expect(e.Start(ctx, resp.ID)).To(Succeed())
		code, err = e.Wait(ctx, resp.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(0))
		Expect(stdoutOf(ctx, e, resp.ID)).To(Equal("orphans=4 zombies=4\n"))
	})

	It("exits 127 with a clear message when the agent command does not exist", func(ctx SpecContext) {
		spec := agentSpec()
		spec.Cmd = []string{"/no/such/agent"}
		code, _, errOut := runToEnd(ctx, newEngine(), spec)
		Expect(code).To(Equal(127))
		Expect(errOut).To(ContainSubstring(`overnight init: cannot start agent: "/no/such/agent" does not exist in the image`))
	})
})
