package harnesstest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Etcd is an etcd server a spec started (StartEtcd): a real HTTP API this
// project did not write, with authentication enabled, on free loopback
// ports and a data dir of its own.
type Etcd struct {
	// URL is its client URL, http://127.0.0.1:PORT: its JSON gateway
	// (POST /v3/kv/put, /v3/kv/range) answers there.
	URL string
	// Token authenticates as root: the Authorization header's value.
	Token string

	cmd    *exec.Cmd
	exited chan struct{}
	log    *lockedBuffer
	client *http.Client
}

// lockedBuffer is a buffer a process writes and a test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// etcdUser and etcdPassword are the root user StartEtcd creates.
const (
	etcdUser     = "root"
	etcdPassword = "overnight-test"
)

// EtcdBinary returns Debian's etcd (package etcd-server, 3.4), installing
// it when it is missing and this is root, as CI is; without root it skips
// tb, saying why. The package's own service is never started (policy-rc.d
// or no init; the specs run the binary themselves).
func EtcdBinary(ctx context.Context, tb TB) string {
	tb.Helper()
	if path, err := exec.LookPath("etcd"); err == nil {
		return path
	}
	if os.Geteuid() != 0 {
		tb.Skip("the spec needs etcd (Debian's etcd-server): it is not installed, and installing it (apt-get install etcd-server) needs root")
		return ""
	}
	if err := AptInstall(ctx, "etcd-server"); err != nil {
		tb.Fatalf("install etcd-server: %v", err)
		return ""
	}
	path, err := exec.LookPath("etcd")
	if err != nil {
		tb.Fatalf("etcd-server installed, yet etcd is not on PATH: %v", err)
	}
	return path
}

// FreePorts returns n loopback ports free a moment ago.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// EtcdArgs are the arguments that run etcd alone, named name, its data in
// dir, serving clients at url and peers at peer.
func EtcdArgs(name, dir, url, peer string) []string {
	return []string{
		"--name", name, "--data-dir", dir,
		"--listen-client-urls", url, "--advertise-client-urls", url,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", name + "=" + peer,
		"--auth-token-ttl", "3600", "--log-level", "warn",
	}
}

// StartEtcd starts etcd (EtcdBinary) on free loopback ports, its data in a
// directory under dir, enables authentication (a root user and role, by
// the JSON gateway) and authenticates: every request then needs Token. It
// gives up after 30 seconds. The caller stops it (Stop) — in a
// DeferCleanup, say.
func StartEtcd(ctx context.Context, tb TB, dir string) *Etcd {
	tb.Helper()
	bin := EtcdBinary(ctx, tb)
	var lastErr error
	for try := 0; try < 3; try++ { // a port taken in between: another pair
		e, err := startEtcd(ctx, bin, filepath.Join(dir, fmt.Sprintf("etcd-%d", try)))
		if err == nil {
			return e
		}
		lastErr = err
	}
	tb.Fatalf("start etcd: %v", lastErr)
	return nil
}

func startEtcd(ctx context.Context, bin, dir string) (*Etcd, error) {
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	e := &Etcd{URL: url, exited: make(chan struct{}), log: &lockedBuffer{}, client: &http.Client{Timeout: 10 * time.Second}}
	e.cmd = exec.Command(bin, EtcdArgs("overnight-test", filepath.Join(dir, "data"), url, peer)...)
	e.cmd.Stdout, e.cmd.Stderr = e.log, e.log
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := e.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = e.cmd.Wait()
		close(e.exited)
	}()
	if err := e.setUp(ctx); err != nil {
		e.Stop()
		return nil, fmt.Errorf("%w; etcd's log:\n%s", err, e.log)
	}
	return e, nil
}

// setUp waits for etcd to answer, then enables authentication and takes a
// token.
func (e *Etcd) setUp(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := e.Call(ctx, "/v3/maintenance/status", map[string]any{})
		if err == nil {
			break
		}
		select {
		case <-e.exited:
			return errors.New("etcd exited before it answered")
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd did not answer within 30s: %w", err)
		}
	}
	for _, step := range []struct {
		path string
		body map[string]any
	}{
		{"/v3/auth/role/add", map[string]any{"name": "root"}},
		{"/v3/auth/user/add", map[string]any{"name": etcdUser, "password": etcdPassword}},
		{"/v3/auth/user/grant", map[string]any{"user": etcdUser, "role": "root"}},
		{"/v3/auth/enable", map[string]any{}},
	} {
		if _, err := e.Call(ctx, step.path, step.body); err != nil {
			return err
		}
	}
	out, err := e.Call(ctx, "/v3/auth/authenticate", map[string]any{"name": etcdUser, "password": etcdPassword})
	if err != nil {
		return err
	}
	token, _ := out["token"].(string)
	if token == "" {
		return fmt.Errorf("etcd authenticated with no token: %v", out)
	}
	e.Token = token
	return nil
}

// Call POSTs body to etcd's JSON gateway at path, with the token once
// there is one, and returns the answer; a status other than 200 is an
// error carrying the answer.
func (e *Etcd) Call(ctx context.Context, path string, body any) (map[string]any, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	if e.Token != "" {
		req.Header.Set("Authorization", e.Token)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("etcd %s: %d %s", path, resp.StatusCode, data)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("etcd %s: %w: %s", path, err, data)
	}
	return out, nil
}

// B64 is s as etcd's JSON gateway carries keys and values: base64.
func B64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// Version is etcd's own count of the writes of key (its per-key version:
// 0 when there is no such key), read directly, not through the harness.
func (e *Etcd) Version(ctx context.Context, key string) (int, error) {
	out, err := e.Call(ctx, "/v3/kv/range", map[string]any{"key": B64(key)})
	if err != nil {
		return 0, err
	}
	kvs, _ := out["kvs"].([]any)
	if len(kvs) == 0 {
		return 0, nil
	}
	kv, _ := kvs[0].(map[string]any)
	v, _ := kv["version"].(string)
	return strconv.Atoi(v)
}

// Revision is etcd's revision: it moves with every write to any key.
func (e *Etcd) Revision(ctx context.Context) (int64, error) {
	out, err := e.Call(ctx, "/v3/kv/range", map[string]any{"key": B64("\x00")})
	if err != nil {
		return 0, err
	}
	h, _ := out["header"].(map[string]any)
	rev, _ := h["revision"].(string)
	return strconv.ParseInt(rev, 10, 64)
}

// Stop kills etcd and waits (at most ten seconds) for it to be gone.
func (e *Etcd) Stop() {
	if e.cmd.Process != nil {
		_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
	}
	select {
	case <-e.exited:
	case <-time.After(10 * time.Second):
	}
}

// Log is what etcd printed so far.
func (e *Etcd) Log() string { return e.log.String() }
